"""A SQLite database locked by another process: 503 with ``retry-after``, logged once, never a
500 with a traceback; served again once the lock goes.

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
from support.servers import free_port

from memfs.server.app import create_app
from memfs.server.sqlite import SqliteStorage

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
                other_process.execute("BEGIN EXCLUSIVE")  # a writer that does not let go
                r = await http.post("/v1/memory_stores", json={"name": "locked"})
                assert r.status_code == 503, r.text
                assert r.headers["retry-after"] == "2"
                assert r.json()["error"]["type"] == "api_error"
                assert r.json()["error"]["message"] == "the database is unavailable; retry later"
                assert r.json()["request_id"] == r.headers["request-id"]
                dbx = "/api/2.0/agents/memory-stores?managed_memory_store_id=locked"
                r = await http.post(dbx, json={})
                assert r.status_code == 503 and r.headers["retry-after"] == "2"
                assert r.json()["error_code"] == "UNAVAILABLE"
                other_process.execute("ROLLBACK")
                r = await http.post("/v1/memory_stores", json={"name": "locked"})
                assert r.status_code == 200, r.text
            nursery.cancel_scope.cancel()
    finally:
        other_process.close()
        await storage.aclose()
    records = [(r.levelname, r.getMessage()) for r in caplog.records if r.name.startswith("memfs")]
    outage = [m for level, m in records if "cannot be reached" in m]
    assert len(outage) == 1 and "SQLITE_BUSY" in outage[0], records
    assert any("answers again" in m and "answered 503 meanwhile: 2" in m for _, m in records)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
