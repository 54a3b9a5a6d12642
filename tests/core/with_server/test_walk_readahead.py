"""Walk readahead on the real server, without FUSE: a reader walking the tree (``grep -r``) gets
the next directories fetched ahead with ``view=full`` pages, which bring listings and contents;
listing-only walks and a walk of one sub-tree fetch nothing beyond what they read.
"""

from __future__ import annotations

import math
import os
import time
import uuid

import pytest
import trio

from memfs.api import StoreClient
from memfs.api.store import MemoryStoresAPI
from memfs.core.build import build_core
from memfs.core.fetch.cache import Listing, ListingCache
from memfs.core.model.inodes import ROOT_INODE
from memfs.core.ops.vfs import Vfs, VfsConfig

LISTING = "/v1/memory_stores/{store}/memories"
RETRIEVE = "/v1/memory_stores/{store}/memories/{memory}"
DIRS = {"/d0": 25, "/d1": 25, "/d2": 25, "/d2/s": 5, "/d3": 25, "/d4": 25, "/d5": 25}


@pytest.fixture
async def store_id(client: StoreClient) -> str:
    store = await client.create_store(f"walk-{uuid.uuid4().hex[:8]}")
    for directory, count in DIRS.items():
        for n in range(count):
            await client.create_memory(store.id, f"{directory}/f{n:02}.md", f"{directory} {n}\n")
    return store.id


async def walk(vfs: Vfs, ino: int, path: str, *, read: bool, out: dict[str, bytes]) -> None:
    """What ``grep -r`` (read) or ``ls -R`` (no read) does: depth-first, in readdir order."""
    for name, node in await vfs.readdir(ino):
        child = f"{path.rstrip('/')}/{name}"
        if node.is_dir:
            await walk(vfs, node.ino, child, read=read, out=out)
        elif read:
            fh, _ = await vfs.open(node.ino, os.O_RDONLY)
            out[child] = await vfs.read(fh, 0, 1 << 20)
            await vfs.release(fh)


async def walked(
    client: StoreClient, store_id: str, start: str = "/", *, read: bool = True
) -> tuple[Vfs, dict[str, bytes]]:
    vfs = build_core(MemoryStoresAPI(client, store_id), VfsConfig())
    vfs.vouch_listings(math.inf)  # what a healthy change feed does
    ino = ROOT_INODE
    for name in filter(None, start.split("/")):
        ino = (await vfs.lookup(ino, name)).ino
    client.stats.reset()
    out: dict[str, bytes] = {}
    async with trio.open_nursery() as nursery:
        vfs.parts.bulk.nursery = nursery
        await walk(vfs, ino, start, read=read, out=out)
        nursery.cancel_scope.cancel()
    return vfs, out


async def test_grep_r_fetches_ahead_one_request_per_20_memories(
    client: StoreClient, store_id: str
) -> None:
    vfs, out = await walked(client, store_id)
    assert len(out) == sum(DIRS.values())
    assert out["/d2/s/f03.md"] == b"/d2/s 3\n" and out["/d5/f24.md"] == b"/d5 24\n"
    assert client.stats.count("GET", RETRIEVE) == 0
    # the root and d0 are listed before the walk is recognised (d0's reads start it: its own
    # pages); from d1 on, each sub-tree costs only its depth=0 view=full pages, which bring its
    # listings too: d2 with d2/s is one sub-tree of 30 memories, 2 pages (by directory, 2 + 1)
    subtrees = {"/d0": 25, "/d1": 25, "/d2": 30, "/d3": 25, "/d4": 25, "/d5": 25}
    pages = sum(math.ceil(count / 20) for count in subtrees.values())
    assert client.stats.count("GET", LISTING) == 2 + pages
    assert vfs.parts.bulk.walk_prefetches == len(subtrees) - 1


async def test_listing_only_walk_fetches_no_content(client: StoreClient, store_id: str) -> None:
    vfs, _ = await walked(client, store_id, read=False)
    assert client.stats.count("GET", LISTING) == 1 + len(DIRS)  # one basic listing each
    assert vfs.parts.bulk.prefetches == 0 and len(vfs.parts.contents) == 0


async def test_walk_of_a_subtree_stays_in_it(client: StoreClient, store_id: str) -> None:
    vfs, out = await walked(client, store_id, "/d2")
    assert sorted(out) == sorted(
        [f"/d2/f{n:02}.md" for n in range(25)] + [f"/d2/s/f{n:02}.md" for n in range(5)]
    )
    # d2: its listing and 2 pages; d2/s: fetched ahead, 1 page; no sibling of d2 is touched
    assert client.stats.count("GET", LISTING) == 4
    assert vfs.parts.bulk.walk_prefetches == 1
    assert vfs.parts.listings.stale("/d3") is None


def test_listing_begun_before_a_drop_is_not_kept() -> None:
    listings = ListingCache()
    begun = time.monotonic()
    listings.drop("/d")  # a change to /d arrived while its listing was being fetched
    assert not listings.put("/d", Listing(started=begun, items=()))
    assert listings.stale("/d") is None
    assert listings.put("/d", Listing(started=time.monotonic(), items=()))
