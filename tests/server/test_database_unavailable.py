"""A SQLite database locked by another process: 503 with ``retry-after``, logged once, never a
500 with a traceback; served again once the lock goes, and memfs's client waits as asked.

The busy timeout is an argument of the storage, not of ``memfs server`` (10 s there), so the
server's app runs over real HTTP in process with a short one (tests/postgres/test_restart.py
does the same for a PostgreSQL restart with the real server process).
"""

from __future__ import annotations

import logging
import sqlite3
from functools import partial
from pathlib import Path

import httpx
import pytest
import trio
from hypercorn.config import Config
from hypercorn.trio import serve as hypercorn_serve

from kit.servers import free_port
from kit.waiting import wait_until
from memfs.api import StoreClient
from memfs.api.config import ClientConfig, Secret
from memfs.server.app import create_app
from memfs.server.backends.sqlite import SqliteStorage

KEY = "sk-locked-" + "l" * 24


async def test_a_locked_sqlite_database_is_503_with_retry_after(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "locked.db"
    storage = await SqliteStorage.open(path, busy_timeout_ms=200)
    config = Config()
    config.bind = [f"127.0.0.1:{free_port()}"]
    config.accesslog = None
    caplog.set_level(logging.INFO, logger="memfs")
    other_process = sqlite3.connect(path, isolation_level=None)
    try:
        async with trio.open_nursery() as nursery:
            app = create_app(storage, [KEY])
            await nursery.start(partial(hypercorn_serve, app, config))
            async with httpx.AsyncClient(
                base_url="http://" + config.bind[0], headers={"x-api-key": KEY}
            ) as http:
                store = await http.post("/v1/memory_stores", json={"name": "locked"})
                store_id = store.json()["id"]
                other_process.execute("BEGIN EXCLUSIVE")  # a writer that does not let go
                r = await http.post("/v1/memory_stores", json={"name": "refused"})
                assert r.status_code == 503, r.text
                assert r.headers["retry-after"] == "2"
                assert r.json()["error"]["type"] == "api_error"
                assert r.json()["error"]["message"] == "the database is unavailable; retry later"
                assert r.json()["request_id"] == r.headers["request-id"]
                dbx = "/api/2.0/agents/memory-stores?managed_memory_store_id=locked"
                r = await http.post(dbx, json={})
                assert r.status_code == 503 and r.headers["retry-after"] == "2"
                assert r.json()["error_code"] == "UNAVAILABLE"
                # memfs's client retries after the server's retry-after (its own backoff
                # would wait at most 0.5 s): the lock goes meanwhile, and the memory is made.
                config = ClientConfig(api_key=Secret(KEY), base_url="http://" + config.bind[0])
                async with StoreClient(config) as client:
                    waited: list[float] = []

                    async def create() -> None:
                        started = trio.current_time()
                        await client.create_memory(store_id, "/after-the-lock", "x")
                        waited.append(trio.current_time() - started)

                    nursery.start_soon(create)
                    await wait_until(lambda: client.stats.by_status[503] == 1)
                    other_process.execute("ROLLBACK")
                    await wait_until(lambda: waited)
                assert waited[0] >= 2.0 and client.stats.retries == 1
                r = await http.get(f"/v1/memory_stores/{store_id}/memories")
                assert [m["path"] for m in r.json()["data"]] == ["/after-the-lock"]
            nursery.cancel_scope.cancel()
    finally:
        other_process.close()
        await storage.aclose()
    records = [(r.levelname, r.getMessage()) for r in caplog.records if r.name.startswith("memfs")]
    outage = [m for level, m in records if "cannot be reached" in m]
    assert len(outage) == 1 and "SQLITE_BUSY" in outage[0], records
    assert any("answers again" in m and "answered 503 meanwhile: 3" in m for _, m in records)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
