"""Shared fixtures: a real reference server in a subprocess, over real HTTP, and real mounts.

``server`` is started once per test session (function-scoped stores keep tests apart);
``fresh_server`` starts a private one for tests that need to stop or restart it.
API keys travel by environment variable only, never argv.

``pg_cluster`` is a throwaway PostgreSQL cluster (``kit/pgcluster.py``) started once per
session for the tests that run on the PostgreSQL backend; they skip only if the PostgreSQL
binaries are absent. ``pg_url`` is a fresh empty database on it for one test. A test that
restarts PostgreSQL takes ``own_pg_cluster``, a cluster of its own.

``XDG_CACHE_HOME`` points at a session temp directory for the whole run (autouse), so a mount
started by any test (``client_env()`` copies the environment) keeps its write-back journal
there, never in the real ``~/.cache/memfs``; mount fixtures still give each test its own.

``sdk`` is the official SDK on the session's server; ``mount_factory`` mounts fresh stores on it
(``kit.mounts.MountMaker``) and unmounts them all in teardown.

What tests import (``ServerProcess``, ``MountedStore``, ``wait_for``...) lives in ``kit/``, the
kit the benchmarks share: a conftest is never imported as a module.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import anthropic
import pytest

from kit.mounts import MountedStore, MountMaker
from kit.pgcluster import PgCluster
from kit.servers import ServerProcess, free_port
from memfs.api import StoreClient
from memfs.api.config import ClientConfig, Secret


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


def _throwaway_cluster() -> Iterator[PgCluster]:
    bindir = PgCluster.find_bin()
    if bindir is None:
        pytest.skip("PostgreSQL binaries (initdb, pg_ctl) are not installed")
    cluster = PgCluster(bindir, port=free_port())
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    yield from _throwaway_cluster()


@pytest.fixture
def own_pg_cluster() -> Iterator[PgCluster]:
    """A cluster of the test's own, which it may stop and start again (``shut_down``)."""
    yield from _throwaway_cluster()


@pytest.fixture
def pg_url(pg_cluster: PgCluster) -> str:
    return pg_cluster.create_database()


@pytest.fixture
def sdk(server: ServerProcess) -> Iterator[anthropic.Anthropic]:
    client = anthropic.Anthropic(api_key=server.api_key, base_url=server.base_url, max_retries=1)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def mount_factory(
    server: ServerProcess, sdk: anthropic.Anthropic, tmp_path: Path
) -> Iterator[Callable[..., MountedStore]]:
    env = server.client_env()
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg-cache")  # journals never in ~/.cache
    maker = MountMaker(sdk, env, tmp_path, prefix="mnt")
    try:
        yield maker
    finally:
        maker.close()


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory every user can enter (pytest's tmp_path is private to root)."""
    shared = Path(tempfile.mkdtemp(prefix="memfs-shared-"))
    os.chmod(shared, 0o755)
    try:
        yield shared
    finally:
        shutil.rmtree(shared, ignore_errors=True)
