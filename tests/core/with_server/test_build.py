"""One builder (issue 12): ``build_core`` gives each object of the core what it needs at
construction — the journal, the directory of refused files, the records a read-only mount
leaves, the kernel invalidator — and nothing is patched in afterwards."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from memfs.api import StoreClient
from memfs.api.config import ClientConfig, Secret
from memfs.api.store import MemoryStoresAPI
from memfs.contract.errors import NotUtf8Error
from memfs.core.build import build_core
from memfs.core.model.inodes import ROOT_INODE
from memfs.core.ops.namespace import Invalidation
from memfs.core.ops.vfs import VfsConfig
from memfs.writeback.journal import Journal


@pytest.fixture
async def store(server: Any) -> AsyncIterator[tuple[StoreClient, str]]:
    config = ClientConfig(api_key=Secret(server.api_key), base_url=server.base_url)
    async with StoreClient(config) as client:
        created = await client.create_store(f"build-{uuid.uuid4().hex[:8]}")
        yield client, created.id


async def test_build_core_wires_journal_kept_files_and_invalidator(
    store: tuple[StoreClient, str], tmp_path: Path
) -> None:
    client, store_id = store
    journal = Journal.open(tmp_path / "cache", store_id)
    seen: list[Invalidation] = []

    async def invalidator(items: list[Invalidation]) -> None:
        seen.extend(items)

    vfs = build_core(
        MemoryStoresAPI(client, store_id),
        VfsConfig(grace=0.3, update_delay=0.05, new_file_delay=0.1),
        journal=journal,
        kept_dir=tmp_path / "kept",
        untouched=3,
        invalidator=invalidator,
    )
    try:
        assert vfs.parts.durable.journal is journal and vfs.parts.durable.untouched == 3
        async with trio.open_nursery() as nursery:
            await nursery.start(vfs.parts.writeback.run)
            # a close journals its record through the hook the queue was built with
            fh, _ = await vfs.create(ROOT_INODE, "a.md", os.O_WRONLY | os.O_CREAT)
            await vfs.write(fh, 0, b"kept\n")
            await vfs.flush(fh)
            await vfs.release(fh)
            assert journal.writes == 1
            # a refused content is kept in the directory given to the builder
            fh, _ = await vfs.create(ROOT_INODE, "b.md", os.O_WRONLY | os.O_CREAT)
            await vfs.write(fh, 0, b"\xff\xfe")
            with pytest.raises(NotUtf8Error):
                await vfs.flush(fh)
            await vfs.release(fh)
            assert [p.read_bytes() for p in (tmp_path / "kept").iterdir()] == [b"\xff\xfe"]
            await vfs.fsync_dir()
            assert journal.load() == []
            # a remote change queues an invalidation; the invalidator given at build runs it
            ino = (await vfs.lookup(ROOT_INODE, "a.md")).ino
            memory = await MemoryStoresAPI(client, store_id).find("/a.md")
            assert memory is not None
            await client.update_memory(store_id, memory.id, content="changed\n")
            versions = [v async for v in client.list_versions(store_id)]
            assert vfs.apply_versions(versions) >= 1
            await vfs.run_invalidations()
            assert ("inode", ino, b"") in seen
            nursery.cancel_scope.cancel()
    finally:
        journal.close()
