"""Helpers of the core tests: ``Core``, a ``Vfs`` on the real server with file helpers."""

from __future__ import annotations

import os

from memfs.api import StoreClient
from memfs.contract.models import Memory
from memfs.core.ops.vfs import Vfs


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
