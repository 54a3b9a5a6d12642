"""What several benchmark cases set up: a ``memfs server`` on a throwaway database (the kit's
``ServerProcess``, as the tests start it), a throwaway PostgreSQL cluster.

A fixture here is a context manager that undoes everything it made on the way out, even when
the benchmark fails.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from kit.pgcluster import PgCluster
from kit.servers import ServerProcess, free_port


def bench_key() -> str:
    """A fresh API key for one benchmark's server."""
    return "sk-memfs-bench-" + secrets.token_hex(12)


def memfs_command() -> list[str]:
    """The ``memfs`` console script next to this interpreter (what a user runs), else -m."""
    script = Path(sys.executable).parent / "memfs"
    return [str(script)] if script.exists() else [sys.executable, "-m", "memfs"]


@contextmanager
def server_on(
    db: Path | str,
    key: str,
    *,
    extra_args: Sequence[str] = (),
    log_path: Path | None = None,
    admin_key: str | None = None,
    log_level: str = "WARNING",
) -> Iterator[ServerProcess]:
    """A ``memfs server`` on ``db`` (a SQLite file or a ``postgresql://`` URL) accepting ``key``;
    its log goes to ``log_path`` (by default next to a SQLite file); stopped on the way out."""
    url = str(db) if str(db).startswith("postgresql://") else None
    if url is not None and log_path is None:
        raise ValueError("a server on PostgreSQL needs a log_path")
    server = ServerProcess(
        db=Path(db),  # with a URL, only where the log would go by default
        port=free_port(),
        keys=[key],
        extra_args=["--log-level", log_level, *extra_args],
        db_url=url,
        log_path=log_path,
        admin_key=admin_key,
    )
    with server:
        yield server


@contextmanager
def pg_cluster(needed: bool) -> Iterator[PgCluster | None]:
    """A throwaway PostgreSQL cluster if ``needed`` (else None), stopped on the way out."""
    bindir = PgCluster.find_bin()
    if not needed or bindir is None:
        yield None
        return
    cluster = PgCluster(bindir, port=free_port())
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
