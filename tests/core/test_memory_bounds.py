"""What a core holds in memory stays within its cache budget (``memfs.contract.cache_budget``),
FUSE-free.

The caches of clean, re-fetchable data (contents, version contents) are charged to one budget
and evicted least recently used across all of them; several cores handed one budget share it
(a session's stores). Structures that grow with the store's history or with every name ever
seen are bounded too.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import time
import tracemalloc
from datetime import UTC, datetime, timedelta

import trio

from kit.fake_store import FakeStore
from memfs.contract.cache_budget import BudgetedCache, CacheBudget
from memfs.contract.models import Memory, MemoryVersion, format_time
from memfs.core.build import build_core
from memfs.core.fetch.cache import Listing
from memfs.core.model.inodes import ROOT_INODE
from memfs.search.engine import Hit
from memfs.versions.index import HISTORY_ENTRY_BYTES, VERSION_BYTES, VersionIndex
from memfs.versions.tree import VersionsConfig, VersionsTree

from .helpers import CONFIG

KB = 1024


def test_the_least_recently_used_entry_of_any_cache_leaves_first() -> None:
    budget = CacheBudget(100)
    first: BudgetedCache[str, bytes] = BudgetedCache(budget, len, name="first")
    second: BudgetedCache[str, bytes] = BudgetedCache(budget, len, name="second")
    first.put("a", b"x" * 40)
    second.put("b", b"y" * 40)
    assert first.get("a") is not None  # "a" is now more recent than "b"
    second.put("c", b"z" * 40)  # over by 20: the oldest use is "b", in the same cache
    assert "b" not in second and "a" in first and "c" in second
    first.put("d", b"w" * 40)  # over again: "a" (used before "c") leaves
    assert "a" not in first and list(second) == ["c"]
    assert budget.used == first.bytes + second.bytes == 80 <= budget.max_bytes
    assert budget.by_cache() == {"first": (40, 1), "second": (40, 1)}


def test_an_entry_larger_than_the_budget_is_not_kept_and_evicts_nothing() -> None:
    budget = CacheBudget(100)
    cache: BudgetedCache[str, bytes] = BudgetedCache(budget, len, name="contents")
    cache.put("small", b"x" * 60)
    assert not cache.put("huge", b"y" * 101)
    assert "huge" not in cache and "small" in cache and budget.used == 60


def test_contents_and_version_contents_share_the_cache_size() -> None:
    # .versions/ kept a second 64 MiB cache of its own: reading history could double a mount
    config = dataclasses.replace(CONFIG, cache_bytes=100 * KB)
    vfs = build_core(FakeStore(), config)
    for n in range(50):
        vfs.parts.contents.put(f"content-{n}", b"c" * (4 * KB))
        vfs.versions.contents.put(f"version-{n}", b"v" * (4 * KB))
    held = vfs.parts.contents.bytes + vfs.versions.contents.size
    assert held <= 100 * KB
    assert vfs.parts.contents.bytes > 0 and vfs.versions.contents.size > 0  # both kept recent ones
    assert vfs.parts.contents.max_bytes == 100 * KB


def test_cores_handed_one_budget_share_it() -> None:
    budget = CacheBudget(64 * KB)
    cores = [build_core(FakeStore(), CONFIG, cache_budget=budget) for _ in range(3)]
    for n in range(40):
        for core in cores:
            core.parts.contents.put(f"{id(core)}-{n}", b"x" * (2 * KB))
    assert sum(core.parts.contents.bytes for core in cores) == budget.used <= 64 * KB
    # the most recent entries of every store are there; the oldest of all left
    assert all(core.parts.contents.peek(f"{id(core)}-39") for core in cores)
    assert not any(core.parts.contents.peek(f"{id(core)}-0") for core in cores)


def listing_of(directory: str, count: int) -> Listing:
    now = datetime.now(UTC)
    items = tuple(
        Memory(
            id=f"mem_{directory.strip('/')}_{n}",
            memory_store_id="memstore_1",
            path=f"{directory}/note-{n:03}.md",
            content_sha256=f"{n:064}",
            content_size_bytes=100,
            memory_version_id=f"memver_{directory.strip('/')}_{n}",
            created_at=now,
            updated_at=now,
        )
        for n in range(count)
    )
    return Listing(started=time.monotonic(), items=items)


def test_listings_are_charged_to_the_cache_size() -> None:
    # listings were bounded by count (4,096 directories, each of any size), outside the
    # cache size: now each is charged its estimated bytes, and the least recently used leaves
    config = dataclasses.replace(CONFIG, cache_bytes=200 * KB, listing_ttl=60.0)
    vfs = build_core(FakeStore(), config)
    for n in range(200):
        assert vfs.parts.listings.put(f"/d{n}", listing_of(f"/d{n}", 20))
        assert vfs.parts.listings.get("/d0") is not None  # used all along: kept
    assert vfs.parts.listings.bytes <= 200 * KB
    assert 0 < len(vfs.parts.listings) < 200
    assert vfs.parts.listings.get("/d199") is not None and vfs.parts.listings.stale("/d1") is None
    vfs.parts.contents.put("sha", b"x" * (150 * KB))  # contents take the room of listings
    assert vfs.parts.listings.bytes + vfs.parts.contents.bytes <= 200 * KB
    assert vfs.parts.listings.stale("/d199") is not None  # the most recent listings stay


def notes(count: int, size: int) -> dict[str, str]:
    """``count`` memories of about ``size`` bytes of words, each its own text."""
    words = ["tomato", "sauce", "basil", "kernel", "inode", "socket", "journal", "replica"]
    return {
        f"/notes/note-{n:04}.md": " ".join(
            words[(n * 7 + i * 3) % len(words)] for i in range(size // 7)
        )
        for n in range(count)
    }


async def test_the_local_search_index_is_charged_to_the_cache_budget() -> None:
    # the index of a store without server search held a full copy of the store's text outside
    # any budget: now it keeps the text compressed and is charged to the cache size, the
    # content cache making room for it
    store = FakeStore()
    tree = notes(200, 5 * KB)
    for path, content in tree.items():
        store.seed(path, content)
    config = dataclasses.replace(CONFIG, cache_bytes=600 * KB, server_search=False)
    vfs = build_core(store, config)
    assert paths_of(await vfs.search.search.search("tomato")) != []
    index = vfs.search.search.local.index
    assert len(index) == 200
    assert index.bytes < sum(map(len, tree.values())) / 2  # a copy of the text, compressed
    assert vfs.parts.contents.budget.by_cache()["search index"] == (index.bytes, 0)
    assert vfs.parts.contents.bytes + index.bytes <= 600 * KB
    assert vfs.parts.contents.bytes > 0  # the index's fetch filled what room there is


def paths_of(hits: list[Hit]) -> list[str]:
    return [hit.path for hit in hits]


async def test_point_in_time_views_are_charged_to_the_cache_size() -> None:
    # each view root kept its view (every file at that instant: ~150 bytes a file) for as long
    # as the kernel held the root, which is until memory pressure: now views are cached in the
    # budget, and a view evicted is computed again from the index
    store = FakeStore()
    for n in range(60):
        store.seed(f"/d{n % 3}/note-{n:02}.md", f"note {n}\n")
    budget = CacheBudget(80 * KB)  # the index takes about 39 kB of it (60 versions)
    config = VersionsConfig(settled_after=0.0, refresh_interval=0.0, recheck=60.0)
    tree = VersionsTree(store, config, cache_budget=budget)
    versions_root = (await tree.lookup(ROOT_INODE, ".versions")).ino
    instants = [name for name, _ in await tree.readdir(versions_root) if name[:1].isdigit()]
    assert len(instants) == 60
    for name in instants:
        view = (await tree.lookup(versions_root, name)).ino
        assert len(await tree.readdir(view)) >= 1  # d0 at least
    views = budget.by_cache()["version views"]
    assert budget.used <= 80 * KB and 0 < views[1] < 60
    last = (await tree.lookup(versions_root, instants[-1])).ino
    assert sorted(name for name, _ in await tree.readdir(last)) == ["d0", "d1", "d2"]
    first = (await tree.lookup(versions_root, instants[0])).ino  # evicted: computed again
    assert [name for name, _ in await tree.readdir(first)] == ["d0"]


def versions_from_the_wire(memories: int, count: int) -> list[MemoryVersion]:
    """``count`` versions of ``memories`` memories, each parsed from its own JSON (as from a
    listing page: every string its own copy), oldest first."""
    start = datetime(2026, 12, 1, tzinfo=UTC)
    items = [
        {
            "id": f"memver_{n:026}",
            "type": "memory_version",
            "memory_id": f"mem_{n % memories:026}",
            "memory_store_id": "memstore_01jabcdefghijklmnopqrstu",
            "operation": "created" if n < memories else "modified",
            "created_at": format_time(start + timedelta(seconds=n)),
            "path": f"/area-{n % 6}/topic-{n % 5}/note-{n % memories:05}.md",
            "content_sha256": f"{n:064x}",
            "content_size_bytes": 1000 + n,
            "created_by": {"type": "api_actor", "api_key_id": "apikey_01jabcdefghijklmnopqrs"},
            "redacted_at": None,
            "redacted_by": None,
        }
        for n in range(count)
    ]
    return [MemoryVersion.from_json(item) for item in json.loads(json.dumps(items))]


def test_the_version_index_costs_what_the_budget_is_charged() -> None:
    # every version's metadata, from the wire, took about 1,080 bytes (its own copy of its
    # store's id, memory id, path and author; a __dict__ per object) and the histories 245 an
    # entry, outside any budget: now what it holds is at most what it is charged
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        versions = versions_from_the_wire(300, 3000)
        index = VersionIndex(FakeStore())
        index.merge(reversed(versions))
        del versions  # the index holds its own
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
        assert index.charge.bytes == 3000 * VERSION_BYTES
        index.history()
        with_history = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held <= 3000 * VERSION_BYTES
    assert index.charge.bytes == 3000 * (VERSION_BYTES + HISTORY_ENTRY_BYTES)
    assert with_history <= index.charge.bytes


async def test_the_version_index_is_dropped_from_the_budget_and_listed_again() -> None:
    # the index kept every version since the first use of .versions for the daemon's life:
    # now it is charged to the cache budget, dropped when it is its least recently used part,
    # and listed again at its next use, where every view is what it was
    store = FakeStore()
    for n in range(30):
        store.seed(f"/d{n % 3}/note-{n:02}.md", f"note {n}\n")
    for n in range(30):
        store.edit(store.head(f"/d{n % 3}/note-{n:02}.md").id, f"note {n}, edited\n")
    budget = CacheBudget(200 * KB)
    config = VersionsConfig(settled_after=0.0, refresh_interval=60.0, recheck=60.0)
    tree = VersionsTree(store, config, cache_budget=budget)
    versions_root = (await tree.lookup(ROOT_INODE, ".versions")).ino
    instants = [name for name, _ in await tree.readdir(versions_root) if name[:1].isdigit()]
    middle = (await tree.lookup(versions_root, instants[44])).ino  # 30 notes, 15 edited
    before = await view_of(tree, middle)
    assert budget.by_cache()["version index"] == (60 * VERSION_BYTES, 1)
    listings = store.calls["list_versions"]

    tree.contents.put("other", b"x" * (190 * KB))  # the index is the least recently used
    assert len(tree.index.versions) == 0 and tree.index.charge.drops == 1
    assert budget.used <= 200 * KB and budget.by_cache()["version index"] == (0, 0)
    assert store.calls["list_versions"] == listings  # nothing listed until it is used

    assert await view_of(tree, middle) == before  # listed again: the same view
    assert store.calls["list_versions"] == listings + 1
    assert len(tree.index.versions) == 60
    assert before["/d0/note-00.md"] == b"note 0, edited\n"
    assert before["/d2/note-29.md"] == b"note 29\n"  # not yet edited at that instant


async def view_of(tree: VersionsTree, view: int) -> dict[str, bytes]:
    """Every file of a point-in-time view and its content, by path."""
    files: dict[str, bytes] = {}
    for directory, directory_ino in await tree.readdir(view):
        for name, ino in await tree.readdir(directory_ino):
            fh, _ = await tree.open(ino, os.O_RDONLY)
            try:
                files[f"/{directory}/{name}"] = await tree.read(fh, 0, 1 << 20)
            finally:
                await tree.release(fh)
    return files


async def test_the_kernel_is_asked_to_forget_the_views_used_least_recently() -> None:
    # every node of .versions the kernel was shown (each instant of `ls .versions`, each file
    # of a view read) stayed until the kernel forgot it, which it does under memory pressure
    # only (10,144 nodes after the 10-minute benchmark): above max_nodes, the kernel is asked
    # to forget every entry of .versions but the most recently used, and forgets their subtrees
    store = FakeStore()
    for n in range(40):
        store.seed(f"/d/note-{n:02}.md", f"note {n}\n")
    invalidated: list[tuple[str, int, bytes]] = []

    async def invalidator(items: list[tuple[str, int, bytes]]) -> None:
        invalidated.extend(items)

    vfs = build_core(store, CONFIG, invalidator=invalidator)
    tree = vfs.versions
    tree.config.max_nodes = 30
    versions_root = (await tree.lookup(ROOT_INODE, ".versions")).ino
    listed = await tree.readdir(versions_root)  # 40 instants, history/, log.txt
    for _, ino in listed:
        tree.remember(ino)  # readdirplus: the kernel holds each
    used = [name for name, _ in listed[30:40]]  # then reads 10 of the views
    for name in used:
        view = (await tree.lookup(versions_root, name)).ino
        (directory,) = await tree.readdir(view)
        for _, ino in await tree.readdir(directory[1]):
            tree.remember(ino)
    assert len(tree.nodes) > 30

    await vfs.run_invalidations()
    asked = {name.decode() for kind, parent, name in invalidated if parent == versions_root}
    assert all(kind == "entry" for kind, _, _ in invalidated)
    assert asked and not asked & set(used)  # the views read last are kept
    assert {listed[0][0], "history"} <= asked  # only listed: the first asked to forget
    invalidated.clear()
    await vfs.run_invalidations()
    assert invalidated == []  # asked once, until they are used again

    held = len(tree.nodes)
    for name, ino in listed:  # the kernel forgets them (and what it held below them)
        if name in asked:
            tree.forget(ino, 1)
    assert len(tree.nodes) == held - len(asked) and len(asked) == 41 - 10  # log.txt: kept
    view = (await tree.lookup(versions_root, listed[0][0])).ino  # looked up again: resolves
    assert [name for name, _ in await tree.readdir(view)] == ["d"]


async def test_the_version_index_is_not_dropped_while_a_request_uses_it() -> None:
    store = FakeStore()
    for n in range(20):
        store.seed(f"/note-{n:02}.md", f"note {n}\n")
    budget = CacheBudget(100 * KB)
    config = VersionsConfig(settled_after=0.0, refresh_interval=0.0, recheck=60.0)
    tree = VersionsTree(store, config, cache_budget=budget)
    versions_root = (await tree.lookup(ROOT_INODE, ".versions")).ino
    await tree.readdir(versions_root)
    store.seed("/late.md", "late\n")
    gate = store.hold_next("list_versions")  # the next listing waits in the middle
    async with trio.open_nursery() as nursery:
        nursery.start_soon(tree.readdir, versions_root)
        await store.wait_calls("list_versions", 2)
        # over the budget with the index as its least recently used part: held, it stays
        # (the new entry leaves instead)
        tree.contents.put("other", b"x" * (90 * KB))
        assert len(tree.index.versions) == 20 and tree.index.charge.drops == 0
        gate.set()
    assert len(tree.index.versions) == 21  # the listing merged into a whole index
    tree.contents.put("more", b"y" * (90 * KB))  # not held any more: it leaves now
    assert tree.index.charge.drops == 1 and len(tree.index.versions) == 0
    assert tree.contents.get("more") is not None and budget.used <= 100 * KB
