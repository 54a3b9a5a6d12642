"""The filesystem core (``Vfs``) on the real reference server, without FUSE."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from memfs.api import StoreClient
from memfs.api.config import ClientConfig, Secret
from memfs.api.store import MemoryStoresAPI
from memfs.core.build import build_core
from memfs.core.ops.vfs import VfsConfig

from .helpers import Core


@pytest.fixture
async def core(server: Any) -> AsyncIterator[Core]:
    config = ClientConfig(api_key=Secret(server.api_key), base_url=server.base_url)
    async with StoreClient(config) as client:
        store = await client.create_store(f"core-{uuid.uuid4().hex[:8]}")
        vfs = build_core(
            MemoryStoresAPI(client, store.id),
            VfsConfig(grace=0.3, update_delay=0.05, new_file_delay=0.1),
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(vfs.parts.writeback.run)
            yield Core(vfs, client)
            nursery.cancel_scope.cancel()
