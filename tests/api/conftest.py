"""Fixtures for the client tests: a StoreClient on the real server, and a fresh store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from memfs.api import StoreClient
from memfs.contract.models import MemoryStore

from .helpers import make_client, unique


@pytest.fixture
async def client(server: Any) -> AsyncIterator[StoreClient]:
    async with make_client(server) as store_client:
        yield store_client


@pytest.fixture
async def store(client: StoreClient) -> MemoryStore:
    return await client.create_store(unique(), description="a test store")
