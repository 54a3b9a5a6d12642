"""Walk readahead by sub-tree, without FUSE or a server: a ``FakeStore`` behind the store
protocol that counts the fetches in flight. A cold ``grep -r`` fetches several sub-trees at once
(at most ``MAX_IN_FLIGHT``), never more pages than its directories one by one, and a fetch that
fails, or a content cache smaller than the tree, only makes readers ask for themselves."""

from __future__ import annotations

import math
import os
from typing import Any

import trio

from kit.fake_databricks import FakeDatabricks
from kit.fake_store import FakeStore
from memfs.api.databricks.store import DatabricksStore
from memfs.contract.models import MemoryPrefix, Page
from memfs.core.build import build_core
from memfs.core.fetch.prefetch import MAX_IN_FLIGHT, SMALL_DIRECTORY
from memfs.core.fetch.subtree import SubTreeListings
from memfs.core.model.inodes import ROOT_INODE
from memfs.core.ops.vfs import Vfs, VfsConfig

SUBTREE = "list_subtree_page"
DIRECTORY = "list_directory_page"


class InFlight(FakeStore):
    """A ``FakeStore`` whose listing pages take a moment, counting how many run at once."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0
        self.most = 0

    async def _timed(self, call: Any) -> Any:
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            await trio.sleep(0.01)  # a round trip: other fetches may start meanwhile
            return await call
        finally:
            self.now -= 1

    async def list_subtree_page(
        self, prefix: str | None, *, cursor: str | None = None, limit: int = 20
    ) -> Any:
        return await self._timed(super().list_subtree_page(prefix, cursor=cursor, limit=limit))

    async def list_directory_page(self, prefix: str | None, **kwargs: Any) -> Page[Any]:
        page: Page[Any] = await self._timed(super().list_directory_page(prefix, **kwargs))
        return page


async def walk(vfs: Vfs, ino: int, path: str, out: dict[str, bytes]) -> None:
    """What ``grep -r`` does: depth-first, in readdir order, reading every file."""
    for name, node in await vfs.readdir(ino):
        child = f"{path.rstrip('/')}/{name}"
        if node.is_dir:
            await walk(vfs, node.ino, child, out)
        else:
            fh, _ = await vfs.open(node.ino, os.O_RDONLY)
            out[child] = await vfs.read(fh, 0, 1 << 20)
            await vfs.release(fh)


async def walked(store: Any, **config: Any) -> tuple[Vfs, dict[str, bytes]]:
    vfs = build_core(store, VfsConfig(**config))
    vfs.vouch_listings(math.inf)  # what a healthy change feed does
    out: dict[str, bytes] = {}
    async with trio.open_nursery() as nursery:
        vfs.parts.bulk.run_in(nursery)
        await walk(vfs, ROOT_INODE, "/", out)
        nursery.cancel_scope.cancel()  # what unmount does to fetches still running
    return vfs, out


def seeded(store: FakeStore, tree: dict[str, int]) -> dict[str, bytes]:
    contents = {}
    for directory, count in tree.items():
        for n in range(count):
            path = f"{directory}/f{n:02}.md"
            store.seed(path, f"{path} says {n}\n" * (n + 1))
            contents[path] = f"{path} says {n}\n".encode() * (n + 1)
    return contents


# projects of 3 topics of 9 notes: each project a sub-tree of 27 memories in 2 pages
NESTED = {f"/p{p}/t{t}": 9 for p in range(8) for t in range(3)}


async def test_grep_r_fetches_sub_trees_several_at_once() -> None:
    store = InFlight()
    contents = seeded(store, NESTED)
    vfs, out = await walked(store)
    assert out == contents
    assert store.calls["read"] == 0  # every content came in bulk
    # the root, /p0 and /p0/t0 listed by the walker, /p0/t0 read (its own page), the walk
    # recognised at /p0/t1: the rest of /p0 (t1, t2: a sub-tree each, 1 page each), then p1..p7
    # (2 pages each); by directory it would be 4 + 2 + 7 * (1 + 3) = 34 pages
    assert store.calls[DIRECTORY] == 4
    assert store.calls[SUBTREE] == 2 + 7 * 2
    assert 2 <= store.most <= MAX_IN_FLIGHT
    assert vfs.parts.bulk.most_in_flight <= MAX_IN_FLIGHT


async def test_small_directories_are_fetched_in_one_stream() -> None:
    store = InFlight()
    flat = {f"/d{n:02}": SMALL_DIRECTORY - 1 for n in range(30)}
    contents = seeded(store, flat)
    _, out = await walked(store)
    assert out == contents
    assert store.calls["read"] == 0
    # the root and /d00 listed, /d00 read; then the whole store in pages of 20, not 29 pages
    # of 4 (the first page brings /d00 again)
    assert store.calls[DIRECTORY] == 3
    assert store.calls[SUBTREE] == math.ceil(len(contents) / 20)


async def test_a_walk_below_a_listed_root_streams_only_its_own_directory() -> None:
    store = FakeStore()
    walked_part = seeded(store, {f"/a/d{n:02}": SMALL_DIRECTORY - 1 for n in range(10)})
    seeded(store, {f"/b/d{n:02}": SMALL_DIRECTORY - 1 for n in range(30)})
    vfs = build_core(store, VfsConfig())
    vfs.vouch_listings(math.inf)
    out: dict[str, bytes] = {}
    async with trio.open_nursery() as nursery:
        vfs.parts.bulk.run_in(nursery)
        entries = dict(await vfs.readdir(ROOT_INODE))  # an ls of the mount, then grep -r MNT/a
        await walk(vfs, entries["a"].ino, "/a", out)
        nursery.cancel_scope.cancel()
    assert out == walked_part
    # /a streamed in 2 pages of 20 (40 memories); nothing of /b's 120 was fetched
    assert store.calls[SUBTREE] == 2
    assert vfs.parts.contents.bytes == sum(len(c) for c in walked_part.values())


async def test_failed_sub_tree_fetches_fall_back_to_readers_asking() -> None:
    store = FakeStore()
    contents = seeded(store, NESTED)
    store.fail_next(SUBTREE, times=5)
    _, out = await walked(store)
    assert out == contents  # no read and no readdir failed
    assert store.calls[SUBTREE] > 5  # later sub-trees were still fetched in bulk


async def test_a_tree_larger_than_the_content_cache_is_read_right() -> None:
    store = FakeStore()
    contents = seeded(store, NESTED)
    size = sum(len(c) for c in contents.values())
    vfs, out = await walked(store, cache_bytes=size // 4)
    assert out == contents
    assert vfs.parts.contents.bytes <= size // 4


async def test_a_databricks_walk_lists_each_sub_tree_once() -> None:
    api = FakeDatabricks()
    contents = {}
    for directory, count in NESTED.items():
        for n in range(count):
            path = f"{directory}/f{n:02}.md"
            api.put("alice", path, f"{path} {n}\n")
            contents[path] = f"{path} {n}\n".encode()
    store = DatabricksStore(api, api.store_id, "alice", None)  # type: ignore[arg-type]
    _, out = await walked(store)
    assert out == contents
    assert api.calls["get_entry"] == 0  # every content came with a listing
    # the root, /p0, /p0/t0 listed by the walker, /p0/t0 read; then /p0/t1, /p0/t2 and p1..p7
    # one listing each (the API lists whole sub-trees anyway): 13, where by directory the
    # walk asked for every one of the 32 directories
    assert api.calls["list_entries"] == 4 + 2 + 7


def test_sub_tree_listings_are_complete_once_the_pages_pass_them() -> None:
    store = FakeStore()
    memories = [store.seed(path, "x") for path in ("/a/b/c.md", "/a/b/d.md", "/a/e.md", "/f.md")]
    tree = SubTreeListings("/")
    tree.add(memories[0])
    assert tree.passed() == []  # /a/b may have more
    tree.next_page()
    tree.add(memories[1])
    tree.add(memories[2])
    assert [(d, [i.path for i in items], page) for d, items, page in tree.passed()] == [
        ("/a/b", ["/a/b/c.md", "/a/b/d.md"], 0)
    ]
    tree.add(memories[3])
    assert [d for d, _, _ in tree.passed()] == ["/a"]
    ((root, items, _),) = tree.rest()
    assert root == "/" and items == (MemoryPrefix("/a/"), memories[3])
    assert not tree.disordered


def test_sub_tree_pages_out_of_order_hand_out_nothing_more() -> None:
    store = FakeStore()
    later, earlier, other = (store.seed(p, "x") for p in ("/a/z.md", "/a/b.md", "/c.md"))
    tree = SubTreeListings("/")
    tree.add(later)
    tree.add(other)
    assert [d for d, _, _ in tree.passed()] == ["/a"]  # believed complete...
    tree.add(earlier)  # ...until a path of /a came after /c.md
    assert tree.disordered and tree.rest() == []
