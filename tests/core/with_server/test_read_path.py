"""The read path of the core on the real server, without FUSE: requests are counted.

A warm store is served with no request; a directory read file after file is fetched in bulk
(``view=full`` pages of 20); the change feed costs one request per poll and reports a gap.
"""

from __future__ import annotations

import math
import os
import time
import uuid
from typing import Any

import trio

from memfs.api import StoreClient
from memfs.api.store import MemoryStoresAPI
from memfs.core.build import build_core
from memfs.core.fetch.cache import ContentCache, Listing, ListingCache
from memfs.core.model.inodes import ROOT_INODE
from memfs.core.ops.vfs import Vfs, VfsConfig
from memfs.mount.changefeed import ChangeFeed, PollingSource

FILES = 45


async def make_store(client: StoreClient) -> str:
    store = await client.create_store(f"cache-{uuid.uuid4().hex[:8]}")
    for n in range(FILES):
        await client.create_memory(store.id, f"/d/f{n:02}.md", f"file {n}\n" * (n + 1))
    await client.create_memory(store.id, "/top.md", "top\n")
    return store.id


async def read_all(vfs: Vfs) -> dict[str, bytes]:
    out = {}
    d = (await vfs.lookup(ROOT_INODE, "d")).ino
    for name, node in await vfs.readdir(d):
        fh, _ = await vfs.open(node.ino, os.O_RDONLY)
        out[name] = await vfs.read(fh, 0, 1 << 20)
        await vfs.release(fh)
    return out


async def test_cold_directory_read_is_bulk_and_warm_read_is_free(client: StoreClient) -> None:
    store_id = await make_store(client)
    vfs = build_core(MemoryStoresAPI(client, store_id), VfsConfig())
    client.stats.reset()
    contents = await read_all(vfs)
    assert contents["f07.md"] == b"file 7\n" * 8
    assert len(contents) == FILES
    gets = client.stats.count("GET", "/v1/memory_stores/{store}/memories/{memory}")
    listings = client.stats.count("GET", "/v1/memory_stores/{store}/memories")
    # read right after a readdir: no single retrieve, ceil(45 / 20) full pages; two listings
    assert gets == 0
    assert listings == 2 + math.ceil(FILES / 20)
    assert vfs.parts.bulk.prefetches == 1
    vfs.vouch_listings(math.inf)  # what a healthy change feed does
    client.stats.reset()
    assert await read_all(vfs) == contents
    for _, node in await vfs.readdir(ROOT_INODE):
        vfs.attr(node)
    assert client.stats.total == 0


async def test_lone_read_is_one_retrieve(client: StoreClient) -> None:
    store_id = await make_store(client)
    vfs = build_core(MemoryStoresAPI(client, store_id), VfsConfig())
    d = (await vfs.lookup(ROOT_INODE, "d")).ino
    node = await vfs.lookup(d, "f01.md")
    client.stats.reset()
    fh, _ = await vfs.open(node.ino, os.O_RDONLY)
    assert await vfs.read(fh, 0, 100) == b"file 1\n" * 2
    await vfs.release(fh)
    assert client.stats.total == 1 and vfs.parts.bulk.prefetches == 0


async def test_content_cache_is_bounded_by_bytes() -> None:
    cache = ContentCache(max_bytes=100)
    cache.put("a", b"x" * 60)
    cache.put("b", b"y" * 60)  # evicts a
    assert cache.get("a") is None and cache.get("b") == b"y" * 60
    cache.put("huge", b"z" * 1000)  # larger than the cache: not kept, nothing evicted for it
    assert cache.get("huge") is None and cache.get("b") is not None
    assert cache.bytes == 60 and (cache.hits, cache.misses) == (2, 2)


async def test_listing_expires_unless_vouched() -> None:
    # a listing's age is ``now - started``: one started ``ttl`` ago is past its ttl, without
    # sleeping through it (a sleep is never shorter, but a loaded machine can make it longer
    # than a short ttl between the put and the first get)
    listings = ListingCache(ttl=60)
    listings.put("/d", Listing(started=time.monotonic(), items=()))
    assert listings.get("/d") is not None
    listings.put("/d", Listing(started=time.monotonic() - 60, items=()))
    assert listings.get("/d") is None
    listings.vouch(math.inf)
    assert listings.get("/d") is not None  # vouched: kept past its ttl
    listings.withdraw()
    assert listings.get("/d") is None


async def test_polling_source_one_request_per_poll_and_gaps(client: StoreClient) -> None:
    store = await client.create_store(f"feed-{uuid.uuid4().hex[:8]}")
    source = PollingSource(MemoryStoresAPI(client, store.id))
    await source.start()
    memory = await client.create_memory(store.id, "/a.md", "one")
    client.stats.reset()
    batch = await source.poll()
    assert client.stats.total == 1
    assert [v.memory_id for v in batch.versions] == [memory.id] and batch.trusted
    assert (await source.poll()).versions == []  # seen versions are not repeated
    for n in range(101):
        await client.create_memory(store.id, f"/m{n}.md", "x")
    gap = await source.poll()
    assert not gap.trusted


async def test_feed_applies_remote_change_and_invalidates(client: StoreClient) -> None:
    store_id = await make_store(client)
    vfs = build_core(MemoryStoresAPI(client, store_id), VfsConfig())
    seen: list[Any] = []
    awaited: list[Any] = []  # the invalidation that shows the change was applied (set below)
    invalidated = trio.Event()

    async def invalidator(items: list[Any]) -> None:
        seen.extend(items)
        if awaited and awaited[0] in seen:
            invalidated.set()

    vfs.invalidator = invalidator
    contents = await read_all(vfs)
    source = PollingSource(MemoryStoresAPI(client, store_id))
    await source.start()
    feed = ChangeFeed(vfs, source, interval=0.05, idle_interval=0.05)
    node = vfs.parts.state.table.by_path["/d/f03.md"]
    awaited.append(("inode", node.ino, b""))  # the kernel drops the changed file's pages
    await client.update_memory(store_id, node.memory_id or "", content="changed\n")
    async with trio.open_nursery() as nursery:
        await nursery.start(feed.run)
        with trio.fail_after(5):
            await invalidated.wait()
        nursery.cancel_scope.cancel()
    fh, _ = await vfs.open(node.ino, os.O_RDONLY)
    assert await vfs.read(fh, 0, 100) == b"changed\n"
    await vfs.release(fh)
    assert contents["f03.md"] != b"changed\n"
    assert feed.stats.changes >= 1 and feed.lag() is not None


async def test_statfs_counts_once_then_follows_the_feed(client: StoreClient) -> None:
    store_id = await make_store(client)
    vfs = build_core(MemoryStoresAPI(client, store_id), VfsConfig())
    source = PollingSource(MemoryStoresAPI(client, store_id))
    await source.start()
    client.stats.reset()
    assert (await vfs.statfs())["f_ffree"] == 2000 - FILES - 1
    assert client.stats.total == 1  # one basic listing page of 100
    vfs.vouch_listings(math.inf)  # a healthy feed keeps the figures current from here on
    await client.create_memory(store_id, "/new.md", "x" * 5000)
    gone = await client.create_memory(store_id, "/gone.md", "y" * 3000)
    await client.delete_memory(store_id, gone.id)
    vfs.apply_versions((await source.poll()).versions)
    client.stats.reset()
    figures = await vfs.statfs()
    assert client.stats.total == 0
    assert figures["f_ffree"] == 2000 - FILES - 2
    held = sum(len(f"file {n}\n" * (n + 1)) for n in range(FILES)) + len("top\n") + 5000
    assert figures["f_bfree"] == figures["f_blocks"] - math.ceil(held / 4096)
