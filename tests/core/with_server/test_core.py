"""The filesystem core on the real server, without FUSE: caching, rename rules, local names."""

from __future__ import annotations

import os
import uuid

import pytest

from kit.waiting import wait_until
from memfs.api import StoreClient
from memfs.api.config import ClientConfig, Secret
from memfs.api.store import MemoryStoresAPI
from memfs.contract.errors import (
    DirectoryNotEmptyError,
    FileTooLargeError,
    InvalidNameError,
    NoEntryError,
    NotUtf8Error,
    ReadOnlyError,
)
from memfs.core.build import build_core
from memfs.core.model.inodes import ROOT_INODE
from memfs.core.model.localfiles import LocalNames
from memfs.core.ops.vfs import VfsConfig


async def test_ls_l_is_one_listing(core):
    store = core.vfs.store_id
    for i in range(30):
        await core.client.create_memory(store, f"/f{i:02}.md", "x" * i)
    before = core.client.stats.total
    entries = await core.vfs.readdir(ROOT_INODE)
    for name, node in entries:
        attr = await core.vfs.lookup(ROOT_INODE, name)
        assert attr.size == int(name[1:3])
        await core.vfs.getattr(node.ino)
    assert len(entries) == 30
    assert core.client.stats.total - before == 1


async def test_inode_stable_across_rename(core):
    ino = await core.write_file(ROOT_INODE, "a.md", b"A")
    await core.vfs.fsync_dir()
    await core.vfs.rename(ROOT_INODE, "a.md", ROOT_INODE, "b.md")
    assert await core.ino(ROOT_INODE, "b.md") == ino
    await core.vfs.fsync_dir()
    mems = await core.memories()
    assert set(mems) == {"/b.md"}
    core.vfs.parts.listings.clear()
    assert await core.ino(ROOT_INODE, "b.md") == ino


async def test_temp_files_renamed_or_unlinked_never_uploaded(core):
    await core.write_file(ROOT_INODE, "tmp1", b"scratch")
    await core.vfs.unlink(ROOT_INODE, "tmp1")
    await core.write_file(ROOT_INODE, "tmp2", b"final")
    await core.vfs.rename(ROOT_INODE, "tmp2", ROOT_INODE, "doc.md")
    # the queue's own timers run what was scheduled (uploads, deletes after the grace
    # window): an upload of a temp name would have happened once the queue is empty
    await wait_until(lambda: core.vfs.pending_uploads == 0)
    await core.vfs.fsync_dir()
    mems = await core.memories()
    assert set(mems) == {"/doc.md"}
    versions = [v async for v in core.client.list_versions(core.vfs.store_id)]
    assert [v.operation for v in versions] == ["created"]


async def test_jetbrains_safe_write(core):
    store = core.vfs.store_id
    original = await core.client.create_memory(store, "/F.md", "v1")
    await core.write_file(ROOT_INODE, "F.md___jb_tmp___", b"v2")
    await core.vfs.rename(ROOT_INODE, "F.md", ROOT_INODE, "F.md___jb_old___")
    await core.vfs.rename(ROOT_INODE, "F.md___jb_tmp___", ROOT_INODE, "F.md")
    await core.vfs.unlink(ROOT_INODE, "F.md___jb_old___")
    # the queue's own timers run what was scheduled (uploads, deletes after the grace
    # window): an upload of a temp name would have happened once the queue is empty
    await wait_until(lambda: core.vfs.pending_uploads == 0)
    await core.vfs.fsync_dir()
    mems = await core.memories()
    assert set(mems) == {"/F.md"}
    assert mems["/F.md"].id == original.id
    ops = [v.operation async for v in core.client.list_versions(store, memory_id=original.id)]
    assert ops == ["modified", "created"]


async def test_errors(core):
    vfs = core.vfs
    with pytest.raises(InvalidNameError):
        await vfs.create(ROOT_INODE, "bad\u200bname", os.O_WRONLY)
    with pytest.raises(InvalidNameError):
        await vfs.mkdir(ROOT_INODE, ".versions")
    with pytest.raises(NoEntryError):
        await vfs.lookup(ROOT_INODE, ".versions")
    fh, _ = await vfs.create(ROOT_INODE, "big.md", os.O_WRONLY)
    with pytest.raises(FileTooLargeError):
        await vfs.write(fh, 102_400, b"x")
    await vfs.write(fh, 0, b"\xff")
    with pytest.raises(NotUtf8Error):
        await vfs.flush(fh)
    await vfs.release(fh)
    await vfs.mkdir(ROOT_INODE, "d")
    d = await core.ino(ROOT_INODE, "d")
    await core.write_file(d, "x~", b"local")
    with pytest.raises(DirectoryNotEmptyError):
        await vfs.rmdir(ROOT_INODE, "d")


async def test_read_only(server):
    config = ClientConfig(api_key=Secret(server.api_key), base_url=server.base_url)
    async with StoreClient(config) as client:
        store = await client.create_store(f"ro-{uuid.uuid4().hex[:8]}")
        vfs = build_core(MemoryStoresAPI(client, store.id), VfsConfig(read_only=True))
        with pytest.raises(ReadOnlyError):
            await vfs.create(ROOT_INODE, "a.md", os.O_WRONLY)
        with pytest.raises(ReadOnlyError):
            await vfs.mkdir(ROOT_INODE, "d")


def test_local_names():
    names = LocalNames()
    for path in [
        "/.a.md.swp",
        "/.a.md.swx",
        "/a.md~",
        "/.#a.md",
        "/#a.md#",
        "/4913",
        "/5036",
        "/.git/HEAD",
        "/x/.git/objects/ab",
        "/a.kate-swp",
        "/.~lock.a.odt#",
        "/a.crswap",
    ]:
        assert names.is_local(path), path
    for path in ["/a.md", "/2024", "/notes/git.md", "/.gitignore", "/a~b.md"]:
        assert not names.is_local(path), path


async def test_a_file_taking_a_departed_memory_keeps_its_own_content(core):
    # mv a.md b.md; mv notes.txt a.md: notes.txt's content goes to a.md's memory (rule 3),
    # even when neither file's content was ever read here (found by the model test).
    store = core.vfs.store_id
    a = await core.client.create_memory(store, "/a.md", "A")
    await core.client.create_memory(store, "/notes.txt", "N")
    await core.vfs.rename(ROOT_INODE, "a.md", ROOT_INODE, "b.md")
    await core.vfs.rename(ROOT_INODE, "notes.txt", ROOT_INODE, "a.md")
    assert await core.read(ROOT_INODE, "a.md") == b"N"
    assert await core.read(ROOT_INODE, "b.md") == b"A"
    await core.vfs.fsync_dir()
    memories = await core.memories()
    assert {p: m.id for p, m in memories.items() if p == "/a.md"} == {"/a.md": a.id}
    stored = {p: await core.client.get_memory(store, m.id) for p, m in memories.items()}
    assert {p: m.content for p, m in stored.items()} == {"/a.md": "N", "/b.md": "A"}
