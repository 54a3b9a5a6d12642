"""Lookups by name in a cached listing: what ``lookup`` answers is what the merged view
(``Namespace.children``, the directory as ``ls`` shows it) says, right after every kind of
change, local or reported by the change feed; and a lookup does not scan the directory.

A listing is indexed by name once; patches (upload answers, the feed's versions) carry the
index over (``memfs.core.fetch.cache.Listing``). The bug class these tests guard is a stale index: a
name created, renamed or deleted that a lookup still answers from the listing as it was. Each
test looks names up *before* anything lists the directory (a listing merge would repair the
node table first and hide it), then compares with a core that has nothing cached.
"""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path

import pytest
from trio.testing import MockClock

from kit.fake_store import FakeStore
from memfs.contract import paths
from memfs.contract.errors import NoEntryError
from memfs.core.build import build_core
from memfs.core.fetch import cache
from memfs.core.model.clashes import SUFFIX
from memfs.core.model.inodes import Kind
from memfs.core.ops.namespace import Namespace
from memfs.core.ops.vfs import Vfs

from .helpers import CONFIG, running_core


async def looked_up(vfs: Vfs, directory: str, *names: str) -> dict[str, str | None]:
    """name -> what a lookup finds there: "file <memory id>", "dir", or None (ENOENT)."""
    parent = vfs.parts.state.table.by_path[directory].ino
    found: dict[str, str | None] = {}
    for name in names:
        try:
            node = vfs.parts.state.table.nodes[(await vfs.lookup(parent, name)).ino]
        except NoEntryError:
            found[name] = None
            continue
        found[name] = "dir" if node.kind is Kind.DIR else f"file {node.memory_id}"
    return found


async def fresh_view(store: FakeStore, directory: str, *names: str) -> dict[str, str | None]:
    """What a core with nothing cached shows of ``names`` in ``directory`` (``ls``)."""
    vfs = build_core(store, CONFIG)
    entries = await vfs.parts.namespace.children(directory)
    shown = {n: entries.get(n) for n in names}
    return {
        n: None if node is None else "dir" if node.is_dir else f"file {node.memory_id}"
        for n, node in shown.items()
    }


async def warm(vfs: Vfs, directory: str) -> None:
    """The directory is listed, its listing indexed, and kept while the test runs (what a
    healthy change feed does)."""
    vfs.vouch_listings(math.inf)
    if directory != "/":
        await vfs.lookup(
            vfs.parts.state.table.by_path[paths.parent(directory)].ino, paths.basename(directory)
        )
    await looked_up(vfs, directory, "anything")


async def test_lookups_follow_local_changes(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    for name in ("a.md", "b.md", "c.md", "keep.md"):
        store.seed(f"/d/{name}", f"{name}\n")
    store.seed("/d/sub/x.md", "below\n")
    a_id, b_id = store.head("/d/a.md").id, store.head("/d/b.md").id
    names = ("a.md", "a2.md", "b.md", "b2.md", "c.md", "new.md", "sub", "keep.md")
    async with running_core(store, cache_dir) as core:
        vfs = core.vfs
        await warm(vfs, "/d")
        d = vfs.parts.state.table.by_path["/d"].ino
        sub = (await vfs.lookup(d, "sub")).ino
        await core.save("new.md", b"made here\n", parent=d)
        await vfs.rename(d, "b.md", d, "b2.md")
        await vfs.unlink(d, "c.md")
        await vfs.rename(d, "a.md", d, "a2.md")
        await core.save("a.md", b"saved again\n", parent=d)  # within grace: takes a's memory
        await vfs.unlink(sub, "x.md")
        await vfs.rmdir(d, "sub")  # its prefix is still in the cached listing of /d
        before_upload = await looked_up(vfs, "/d", *names)
        assert before_upload == {
            "a.md": f"file {a_id}",
            "a2.md": "file None",
            "b.md": None,
            "b2.md": f"file {b_id}",
            "c.md": None,
            "new.md": "file None",
            "sub": None,
            "keep.md": f"file {store.head('/d/keep.md').id}",
        }
        assert await vfs.flush_all() == []  # the answers patch the cached listing
        after_upload = await looked_up(vfs, "/d", *names)
        assert after_upload == await fresh_view(store, "/d", *names)
        assert after_upload["a.md"] == f"file {a_id}"
        assert after_upload["new.md"] == f"file {store.head('/d/new.md').id}"
        assert after_upload["sub"] is None and after_upload["c.md"] is None
        listing = vfs.parts.listings.stale("/d")
        assert listing is not None
        assert [i.path for i in listing.named("new.md")] == ["/d/new.md"]
        assert not listing.named("b.md") and not listing.named("c.md")


async def test_lookups_follow_changes_reported_by_the_feed(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    for name in ("a.md", "b.md", "c.md", "x"):
        store.seed(f"/d/{name}", f"{name}\n")
    names = ("a.md", "b.md", "b2.md", "c.md", "new.md", "x", "x" + SUFFIX)
    async with running_core(store, cache_dir) as core:
        vfs = core.vfs
        await warm(vfs, "/d")
        since = datetime.now().astimezone()
        store.seed("/d/new.md", "made elsewhere\n")
        store.edit(store.head("/d/b.md").id, path="/d/b2.md")
        store.remove(store.head("/d/c.md").id)
        store.seed("/d/x/inner.md", "a file and a directory named x\n")  # a clash begins
        versions = (await store.recent_changes(since=since, limit=100)).data
        vfs.apply_versions(versions)
        found = await looked_up(vfs, "/d", *names)
        assert found == await fresh_view(store, "/d", *names)
        assert found["x"] == "dir"
        assert found["x" + SUFFIX] == f"file {store.head('/d/x').id}"
        assert found["b.md"] is None and found["c.md"] is None
        assert found["b2.md"] == f"file {store.head('/d/b2.md').id}"

        since = datetime.now().astimezone()
        store.remove(store.head("/d/x/inner.md").id)  # the clash ends: x is the file again
        vfs.apply_versions((await store.recent_changes(since=since, limit=100)).data)
        found = await looked_up(vfs, "/d", *names)
        assert found["x"] == f"file {store.head('/d/x').id}"
        assert found["x" + SUFFIX] is None
        assert found == await fresh_view(store, "/d", *names)


async def test_a_reserved_root_name_is_not_looked_up_in_the_listing(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    store.seed("/.versions/x.md", "a memory where the mount shows its history\n")
    store.seed("/top.md", "top\n")
    async with running_core(store, cache_dir) as core:
        await warm(core.vfs, "/")
        assert await looked_up(core.vfs, "/", ".versions") == {".versions": None}


def count_calls(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[int]:
    """Count the calls of ``owner.name`` (which still runs): ``[count]``."""
    calls = [0]
    original = getattr(owner, name)

    def counted(*args: object, **kwargs: object) -> object:
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


async def test_lookups_and_creates_cost_the_same_in_a_big_directory(
    autojump_clock: MockClock, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Creates, uploads, lookups, renames and removes in a directory of 1,000 memories read
    as many listing entries (index work: ``listing_name``) and merge as many listed items with
    local state (``Namespace._listed_entry``) as in a directory of 10."""
    scanned = count_calls(monkeypatch, cache, "listing_name")
    merged = count_calls(monkeypatch, Namespace, "_listed_entry")
    ops = 12
    counts = {}
    for size in (10, 1000):
        store = FakeStore()
        for n in range(size):
            store.seed(f"/d/note-{n:04}.md", f"{n}\n")
        (cache_dir / str(size)).mkdir()
        async with running_core(store, cache_dir / str(size)) as core:
            vfs = core.vfs
            await warm(vfs, "/d")
            d = vfs.parts.state.table.by_path["/d"].ino
            scanned[0] = merged[0] = 0
            for n in range(ops):
                await core.save(f"new-{n}.md", b"new\n", parent=d)
            assert await vfs.flush_all() == []
            await looked_up(vfs, "/d", *(f"new-{n}.md" for n in range(ops)))
            await looked_up(vfs, "/d", *(f"missing-{n}.md" for n in range(ops)))
            for n in range(ops):
                await vfs.rename(d, f"new-{n}.md", d, f"renamed-{n}.md")
            assert await vfs.flush_all() == []
            for n in range(ops):
                await vfs.unlink(d, f"renamed-{n}.md")
            assert await vfs.flush_all() == []
            await looked_up(vfs, "/d", *(f"renamed-{n}.md" for n in range(ops)))
            counts[size] = (scanned[0], merged[0])
    assert counts[1000] == counts[10]


async def test_a_lookup_counts_the_subdirectories_of_the_directory_it_lists(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    """A lookup fetches the directory's listing: its subdirectories are counted from it
    (nlink 2 + n, as after ``ls``), so the kernel keeps the directory's attributes instead of
    asking for them at every path walk through it."""
    store.seed("/a/x.md", "x\n")
    store.seed("/b/y.md", "y\n")
    store.seed("/top.md", "t\n")
    async with running_core(store, cache_dir) as core:
        root = core.vfs.parts.state.table.by_path["/"].ino
        assert not (await core.vfs.getattr(root)).nlink_counted
        await core.vfs.lookup(root, "top.md")
        assert (await core.vfs.getattr(root)).nlink == 4  # the root's own 2, a and b
        await core.vfs.readdir(root)
        assert (await core.vfs.getattr(root)).nlink == 4  # as ls counts them
