"""Cached listings follow changes instead of being dropped: this mount's own writes and the
changes the feed reports patch them, so a write in a directory of hundreds of memories costs one
request, not a re-listing of the directory; and a patched listing shows what a fresh one would.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, timedelta

from memfs.api import StoreClient
from memfs.api.store import MemoryStoresAPI
from memfs.contract.models import Memory, MemoryPrefix
from memfs.core.build import build_core
from memfs.core.fetch.cache import Listing, ListingCache
from memfs.core.model.inodes import ROOT_INODE
from memfs.core.ops.remote import PATCH_LIMIT
from memfs.core.ops.vfs import Vfs, VfsConfig

from .helpers import Core

LISTING = "/v1/memory_stores/{store}/memories"
BIG = 250  # three listing pages of 100


async def names(vfs: Vfs, *where: str) -> list[str]:
    ino = ROOT_INODE
    for name in where:
        ino = (await vfs.lookup(ino, name)).ino
    return sorted(name for name, _ in await vfs.readdir(ino))


async def fresh_names(core: Core, *where: str) -> list[str]:
    """What a mount with nothing cached shows."""
    return await names(
        build_core(MemoryStoresAPI(core.client, core.vfs.store_id), VfsConfig()), *where
    )


async def seed_big_directory(core: Core) -> None:
    store = core.vfs.store_id
    for n in range(BIG):
        await core.client.create_memory(store, f"/big/f{n:03}.md", f"{n}\n")
    await core.client.create_memory(store, "/lonely/only.md", "alone\n")
    core.vfs.vouch_listings(math.inf)  # what a healthy change feed does
    assert len(await names(core.vfs, "big")) == BIG
    assert await names(core.vfs) == ["big", "lonely"]


async def test_own_writes_in_a_big_directory_cost_no_listing(core: Core) -> None:
    await seed_big_directory(core)
    vfs = core.vfs
    big = (await vfs.lookup(ROOT_INODE, "big")).ino
    core.client.stats.reset()
    for n in range(5):
        await core.write_file(big, f"new{n}.md", b"fresh\n")
    await vfs.fsync_dir()
    await vfs.unlink(big, "f000.md")
    await vfs.rename(big, "f001.md", big, "renamed.md")
    await vfs.fsync_dir()
    expected = await fresh_names(core, "big")
    assert "new4.md" in expected and "renamed.md" in expected and "f000.md" not in expected
    core.client.stats.reset()
    assert await names(vfs, "big") == expected
    assert core.client.stats.count("GET", LISTING) == 0
    assert vfs.parts.listings.patches == 7  # 5 creates, a rename, a delete


async def test_changes_from_the_feed_patch_listings(core: Core) -> None:
    await seed_big_directory(core)
    store = core.vfs.store_id
    since = datetime.now().astimezone()
    memories = await core.memories()
    client: StoreClient = core.client
    await client.create_memory(store, "/big/remote.md", "made elsewhere\n")
    await client.create_memory(store, "/big/sub/deep.md", "a new directory\n")
    await client.create_memory(store, "/top/new.md", "a new top directory\n")
    await client.update_memory(store, memories["/big/f010.md"].id, path="/big/moved.md")
    await client.update_memory(store, memories["/big/f011.md"].id, content="edited\n")
    await client.delete_memory(store, memories["/big/f012.md"].id)
    await client.delete_memory(store, memories["/lonely/only.md"].id)  # /lonely is now empty
    versions = [v async for v in client.list_versions(store, created_gte=since)]
    assert len(versions) == 7

    core.client.stats.reset()
    core.vfs.apply_versions(versions)
    assert await names(core.vfs) == ["big", "top"] == await fresh_names(core)
    expected = await fresh_names(core, "big")
    assert {"remote.md", "sub", "moved.md"} <= set(expected)
    assert not {"f010.md", "f012.md"} & set(expected)
    core.client.stats.reset()
    assert await names(core.vfs, "big") == expected
    assert core.client.stats.count("GET", LISTING) == 0
    assert core.vfs.parts.listings.patches == len(versions)
    edited = await core.vfs.lookup((await core.vfs.lookup(ROOT_INODE, "big")).ino, "f011.md")
    assert edited.size == len("edited\n")


def memory(path: str, *, memory_id: str = "mem_1", age: float = 0) -> Memory:
    when = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=100 - age)
    return Memory(memory_id, "memstore_1", path, "0" * 64, 1, f"memver_{path}", when, when)


def listed(listings: ListingCache, directory: str) -> list[str]:
    listing = listings.stale(directory)
    assert listing is not None
    return [item.path for item in listing.items]


def test_a_move_patches_both_listings_and_refuses_older_fetches() -> None:
    listings = ListingCache()
    now = time.monotonic
    listings.put("/", Listing(now(), (MemoryPrefix("/a/"), MemoryPrefix("/b/"))))
    listings.put("/a", Listing(now(), (memory("/a/x.md", age=10),)))
    listings.put("/b", Listing(now(), (memory("/b/y.md", memory_id="mem_2"),)))
    begun = now()  # a fetch of /b begins, then the move is answered
    listings.record(memory("/b/c/x.md"))
    assert listed(listings, "/b") == ["/b/c/", "/b/y.md"]
    assert listed(listings, "/a") == []
    assert listed(listings, "/") == ["/b/"]  # /a holds nothing now
    assert not listings.put("/b", Listing(begun, ()))  # it cannot show the move
    listings.record(memory("/a/x.md", age=20))  # an older state: ignored
    assert listed(listings, "/") == ["/b/"]


def test_an_empty_listing_removes_its_directory_from_the_parent() -> None:
    listings = ListingCache()
    listings.put("/", Listing(time.monotonic(), (MemoryPrefix("/gone/"), memory("/k.md"))))
    listings.put("/gone", Listing(time.monotonic(), ()))
    assert listed(listings, "/") == ["/k.md"]


async def test_a_flood_of_changes_to_one_directory_drops_its_listing(core: Core) -> None:
    # Patching copies the listing each time: past PATCH_LIMIT changes in one batch, one
    # re-listing is cheaper. What the mount shows is the same either way.
    await seed_big_directory(core)
    store = core.vfs.store_id
    since = datetime.now().astimezone()
    for n in range(PATCH_LIMIT + 1):
        await core.client.create_memory(store, f"/big/flood{n:03}.md", "x\n")
    versions = [v async for v in core.client.list_versions(store, created_gte=since)]
    core.vfs.apply_versions(versions)
    assert core.vfs.parts.listings.stale("/big") is None
    assert await names(core.vfs, "big") == await fresh_names(core, "big")


async def test_a_patched_in_rename_is_newer_than_the_listing_it_lands_in(core: Core) -> None:
    # The feed patched a remote rename into the listing but the node did not follow yet (it
    # was busy: open, or an upload pending). A lookup of the new name must still find it: the
    # patched item is as new as its patch, newer than the node's last upload.
    vfs = core.vfs
    store = vfs.store_id
    await core.client.create_memory(store, "/keep.md", "k\n")
    vfs.vouch_listings(math.inf)
    assert await names(vfs) == ["keep.md"]  # the root's listing is cached from here on
    await core.write_file(ROOT_INODE, "a.md", b"mine\n")
    await vfs.fsync_dir()  # uploaded after the listing was fetched
    since = datetime.now().astimezone()
    memory = (await core.memories())["/a.md"]
    await core.client.update_memory(store, memory.id, path="/b.md")
    versions = [v async for v in core.client.list_versions(store, created_gte=since)]
    for version in versions:
        vfs.parts.listings.apply_version(version)  # the listing follows; the node has not yet
    assert await core.read(ROOT_INODE, "b.md") == b"mine\n"
    assert await names(vfs) == ["b.md", "keep.md"]
