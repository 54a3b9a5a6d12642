"""Fixtures for the PostgreSQL/replica/change-stream tests: real ``memfs server`` subprocesses.

``backend_server`` runs once per backend (SQLite file, PostgreSQL database); ``replicas`` are
three servers on one PostgreSQL database. Keys travel by environment only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kit.servers import ServerProcess, free_port


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
