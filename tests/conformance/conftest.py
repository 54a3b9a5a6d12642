"""The conformance suite runs once per backend: the session's SQLite server, and a server on a
PostgreSQL database of the throwaway cluster (started once per session)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kit.servers import ServerProcess, free_port


@pytest.fixture(scope="session")
def postgres_server(
    pg_cluster: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    url = pg_cluster.create_database("conformance")  # type: ignore[attr-defined]
    proc = ServerProcess(
        db=Path(tmp_path_factory.mktemp("pgserver")) / "memfs.db", port=free_port(), db_url=url
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest, server: ServerProcess) -> ServerProcess:
    if request.param == "postgres":
        pg: ServerProcess = request.getfixturevalue("postgres_server")
        return pg
    return server
