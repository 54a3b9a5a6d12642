"""Fixtures for the server tests: the app in-process over httpx.ASGITransport (under trio).

``storage`` is parametrized by backend: every test that uses it runs once on SQLite and once on
PostgreSQL (a fresh database per test on the session's throwaway cluster).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from memfs.server.app import create_app
from memfs.server.metrics import Metrics
from memfs.server.postgres import PostgresStorage
from memfs.server.sqlite import SqliteStorage
from memfs.server.storage import Storage

KEY = "sk-inproc-" + "a" * 30
OTHER = "sk-inproc-" + "b" * 30
BASE = "http://memfs.test"
BETA = {"anthropic-beta": "agent-memory-2026-07-22", "anthropic-version": "2023-06-01"}


class FakeClock:
    """A settable clock for storage (times of versions, retention)."""

    def __init__(self, start: datetime | None = None, *, frozen: bool = False) -> None:
        self.now = start or datetime(2026, 11, 1, tzinfo=UTC)
        self.frozen = frozen

    def __call__(self) -> datetime:
        if not self.frozen:
            self.now += timedelta(milliseconds=1)
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


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


def make_client(app: Any, key: str | None = KEY, **headers: str) -> httpx.AsyncClient:
    base_headers = dict(BETA)
    if key is not None:
        base_headers["x-api-key"] = key
    base_headers.update(headers)
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url=BASE, headers=base_headers
    )


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


def assert_error(
    r: httpx.Response, status: int, error_type: str, contains: str = ""
) -> dict[str, Any]:
    """The response is the documented error envelope with this status and type."""
    assert r.status_code == status, r.text
    body: dict[str, Any] = r.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == error_type
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert contains.lower() in body["error"]["message"].lower(), body["error"]["message"]
    assert body["request_id"].startswith("req_")
    assert r.headers["request-id"] == body["request_id"]
    return body


MakeMemory = Callable[..., Any]


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
