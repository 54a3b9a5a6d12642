"""Shared fixtures: a real reference server in a subprocess, over real HTTP.

``server`` is started once per test session (function-scoped stores keep tests apart);
``fresh_server`` starts a private one for tests that need to stop or restart it.
API keys travel by environment variable only, never argv.

``pg_cluster`` is a throwaway PostgreSQL cluster (``tests/pgcluster.py``) started once per
session for the tests that run on the PostgreSQL backend; they skip only if the PostgreSQL
binaries are absent. ``pg_url`` is a fresh empty database on it for one test.

``XDG_CACHE_HOME`` points at a session temp directory for the whole run (autouse), so a mount
started by any test (``client_env()`` copies the environment) keeps its write-back journal
there, never in the real ``~/.cache/memfs``; mount fixtures still give each test its own.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from pgcluster import PgCluster

from memfs.api import StoreClient
from memfs.api.config import ClientConfig, Secret

TEST_KEY = "sk-memfs-test-" + "k" * 24
OTHER_KEY = "sk-memfs-other-" + "o" * 24


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ServerProcess:
    """A ``memfs server`` subprocess on a temp database."""

    db: Path
    port: int
    keys: list[str] = field(default_factory=lambda: [TEST_KEY, OTHER_KEY])
    extra_args: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None
    db_url: str | None = None  # a postgresql:// URL to serve instead of the file ``db``
    log_path: Path | None = None
    admin_key: str | None = None  # MEMFS_ADMIN_KEY of the server (fault control), never argv

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_key(self) -> str:
        return self.keys[0]

    def client_env(self) -> dict[str, str]:
        """Environment for a client process (CLI, mount daemon) talking to this server."""
        env = dict(os.environ)
        env["ANTHROPIC_BASE_URL"] = self.base_url
        env["ANTHROPIC_API_KEY"] = self.api_key
        env.pop("MEMFS_API_KEYS", None)
        env.pop("MEMFS_ADMIN_KEY", None)
        return env

    def start(self) -> None:
        env = dict(os.environ)
        env["MEMFS_API_KEYS"] = ",".join(self.keys)
        env.pop("MEMFS_ADMIN_KEY", None)
        if self.admin_key is not None:
            env["MEMFS_ADMIN_KEY"] = self.admin_key
        self.log_path = self.db.with_suffix(".log")
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the subprocess
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memfs",
                "server",
                "--db",
                self.db_url or str(self.db),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                *self.extra_args,
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log_path.read_text()[-2000:]}")
            try:
                if httpx.get(self.base_url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError("server did not become healthy within 20 s")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture(scope="session", autouse=True)
def private_cache_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Journals of every mount of the session under a temp dir (see the module docstring)."""
    home = tmp_path_factory.mktemp("xdg-cache")
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(home)
    try:
        yield home
    finally:
        if old is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = old


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(db=tmp_path_factory.mktemp("server") / "memfs.db", port=free_port())
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
async def client(server: ServerProcess) -> AsyncIterator[StoreClient]:
    """Our API client on the session's server (tests/api and tests/server have their own)."""
    config = ClientConfig(api_key=Secret(server.api_key), base_url=server.base_url)
    async with StoreClient(config) as store_client:
        yield store_client


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(db=tmp_path / "memfs.db", port=free_port())
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    bindir = PgCluster.find_bin()
    if bindir is None:
        pytest.skip("PostgreSQL binaries (initdb, pg_ctl) are not installed")
    cluster = PgCluster(bindir, port=free_port())
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def pg_url(pg_cluster: PgCluster) -> str:
    return pg_cluster.create_database()
