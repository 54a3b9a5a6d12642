"""Fixtures for the server tests: the app in-process over httpx.ASGITransport (under trio).

``storage`` is parametrized by backend: every test that uses it runs once on SQLite and once on
PostgreSQL (a fresh database per test on the session's throwaway cluster).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memfs.server.app import create_app
from memfs.server.backends.postgres import PostgresStorage
from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.backends.storage import Storage
from memfs.server.http.metrics import Metrics

from .helpers import KEY, OTHER, FakeClock, MakeMemory, make_client


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["sqlite", "postgres"])
async def storage(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock
) -> AsyncIterator[Storage]:
    store: Storage
    if request.param == "postgres":
        url = request.getfixturevalue("pg_url")
        store = await PostgresStorage.open(url, clock=clock, max_memories=10, pool_size=4)
    else:
        store = await SqliteStorage.open(tmp_path / "memfs.db", clock=clock, max_memories=10)
    try:
        yield store
    finally:
        await store.aclose()


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
def app(storage: Storage, metrics: Metrics) -> Any:
    return create_app(storage, [KEY, OTHER], metrics=metrics)


@pytest.fixture
async def client(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with make_client(app) as c:
        yield c


@pytest.fixture
async def store_id(client: httpx.AsyncClient) -> str:
    r = await client.post("/v1/memory_stores", json={"name": "Test Store"})
    assert r.status_code == 200, r.text
    return str(r.json()["id"])


@pytest.fixture
def mem(client: httpx.AsyncClient, store_id: str) -> MakeMemory:
    async def create(path: str, content: str = "", **headers: str) -> dict[str, Any]:
        r = await client.post(
            f"/v1/memory_stores/{store_id}/memories",
            json={"path": path, "content": content},
            headers=headers,
        )
        assert r.status_code == 200, r.text
        result: dict[str, Any] = r.json()
        return result

    return create
