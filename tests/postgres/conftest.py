"""Fixtures for the PostgreSQL/replica/change-stream tests: real ``memfs server`` subprocesses.

``backend_server`` runs once per backend (SQLite file, PostgreSQL database); ``replicas`` are
three servers on one PostgreSQL database. Keys travel by environment only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import ServerProcess, free_port

from memfs.api.config import ClientConfig, Secret


@pytest.fixture(params=["sqlite", "postgres"])
def backend_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerProcess]:
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    proc = ServerProcess(db=tmp_path / "memfs.db", port=free_port(), db_url=url)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def replicas(pg_url: str, tmp_path: Path) -> Iterator[list[ServerProcess]]:
    procs = [
        ServerProcess(db=tmp_path / f"replica{i}.db", port=free_port(), db_url=pg_url)
        for i in range(3)
    ]
    try:
        for proc in procs:
            proc.start()
        yield procs
    finally:
        for proc in procs:
            proc.stop()


def config_for(server: ServerProcess, **overrides: Any) -> ClientConfig:
    return ClientConfig(api_key=Secret(server.api_key), base_url=server.base_url, **overrides)


def http_for(server: ServerProcess) -> httpx.Client:
    return httpx.Client(
        base_url=server.base_url,
        headers={"x-api-key": server.api_key, "anthropic-version": "2023-06-01"},
        timeout=30,
    )


def new_store(server: ServerProcess, name: str = "changes") -> str:
    with http_for(server) as c:
        r = c.post("/v1/memory_stores", json={"name": name})
        assert r.status_code == 200, r.text
        return str(r.json()["id"])


MakeHttp = Callable[[ServerProcess], httpx.Client]
