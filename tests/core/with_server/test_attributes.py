"""Modes, owners and link counts in the core: kept locally, never a request, never uploaded."""

from __future__ import annotations

import os
import stat
import uuid
from typing import Any

import trio

from memfs.api import StoreClient
from memfs.api.config import ClientConfig, Secret
from memfs.api.store import MemoryStoresAPI
from memfs.contract.models import Memory
from memfs.core.build import build_core
from memfs.core.model.inodes import ROOT_INODE
from memfs.core.ops.vfs import VfsConfig


async def test_modes_and_owners_stay_local_through_uploads_and_remote_changes(server: Any) -> None:
    config = ClientConfig(api_key=Secret(server.api_key), base_url=server.base_url)
    async with StoreClient(config) as client:
        store = await client.create_store(f"attrs-{uuid.uuid4().hex[:8]}")
        memory = await client.create_memory(store.id, "/a.md", "A")
        await client.create_memory(store.id, "/d/b.md", "B")
        vfs = build_core(
            MemoryStoresAPI(client, store.id),
            VfsConfig(update_delay=0.05, new_file_delay=0.1, uid=1234, gid=5678, umask=0o027),
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(vfs.parts.writeback.run)
            a = await vfs.lookup(ROOT_INODE, "a.md")
            d = await vfs.lookup(ROOT_INODE, "d")
            assert (a.mode, a.uid, a.gid) == (stat.S_IFREG | 0o640, 1234, 5678)
            assert d.mode == stat.S_IFDIR | 0o750
            before = client.stats.total
            changed = await vfs.setattr(a.ino, mode=stat.S_IFREG | 0o755, uid=1, gid=2)
            assert (changed.mode, changed.uid, changed.gid) == (stat.S_IFREG | 0o755, 1, 2)
            assert client.stats.total == before  # nothing to tell the store

            fh, _ = await vfs.open(a.ino, os.O_WRONLY | os.O_TRUNC)
            await vfs.write(fh, 0, b"A2")
            await vfs.fsync(fh)  # uploaded
            await vfs.release(fh)
            await client.update_memory(store.id, memory.id, content="A3")  # changed elsewhere
            vfs.parts.listings.clear()
            assert (await vfs.readdir(ROOT_INODE))[0][0] == "a.md"  # the new head, same node
            again = await vfs.lookup(ROOT_INODE, "a.md")
            assert (again.ino, again.size, again.mode, again.uid) == (a.ino, 2, changed.mode, 1)

            # a save by rename over the file: the new file's own mode and owner, same memory
            fh, temp = await vfs.create(
                ROOT_INODE, "a.md.tmp", os.O_WRONLY, mode=0o100600, owner=(7, 8)
            )
            await vfs.write(fh, 0, b"A4")
            await vfs.release(fh)
            await vfs.rename(ROOT_INODE, "a.md.tmp", ROOT_INODE, "a.md")
            saved = await vfs.lookup(ROOT_INODE, "a.md")
            assert (saved.ino, saved.mode, saved.uid, saved.gid) == (temp.ino, 0o100600, 7, 8)
            await vfs.fsync_dir()
            listed = {m.path: m async for m in client.list_memories(store.id, limit=100)}
            assert set(listed) == {"/a.md", "/d/b.md"}
            assert isinstance(listed["/a.md"], Memory) and listed["/a.md"].id == memory.id
            assert (await client.get_memory(store.id, memory.id, view="full")).content == "A4"
            nursery.cancel_scope.cancel()
