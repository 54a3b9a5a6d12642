"""The filesystem core (``Vfs``) on the real reference server, without FUSE."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from memfs.api import StoreClient
from memfs.api.config import ClientConfig, Secret
from memfs.core.vfs import Vfs, VfsConfig
from memfs.models import Memory


class Core:
    def __init__(self, vfs: Vfs, client: StoreClient) -> None:
        self.vfs = vfs
        self.client = client

    async def memories(self) -> dict[str, Memory]:
        return {
            m.path: m
            async for m in self.client.list_memories(self.vfs.store_id, limit=100)
            if isinstance(m, Memory)
        }

    async def write_file(self, parent: int, name: str, data: bytes) -> int:
        fh, attr = await self.vfs.create(parent, name, os.O_WRONLY | os.O_CREAT)
        await self.vfs.write(fh, 0, data)
        await self.vfs.flush(fh)
        await self.vfs.release(fh)
        return attr.ino

    async def read(self, parent: int, name: str) -> bytes:
        fh, _ = await self.vfs.open(await self.ino(parent, name), os.O_RDONLY)
        try:
            return await self.vfs.read(fh, 0, 1 << 20)
        finally:
            await self.vfs.release(fh)

    async def ino(self, parent: int, name: str) -> int:
        return (await self.vfs.lookup(parent, name)).ino


@pytest.fixture
async def core(server: Any) -> AsyncIterator[Core]:
    config = ClientConfig(api_key=Secret(server.api_key), base_url=server.base_url)
    async with StoreClient(config) as client:
        store = await client.create_store(f"core-{uuid.uuid4().hex[:8]}")
        vfs = Vfs(client, store.id, VfsConfig(grace=0.3, update_delay=0.05, new_file_delay=0.1))
        async with trio.open_nursery() as nursery:
            await nursery.start(vfs.writeback.run)
            yield Core(vfs, client)
            nursery.cancel_scope.cancel()
