"""A write-back journal belongs to its workspace: a mount of the same store id on another server
never uploads it, ``memfs status`` says which workspace it waits for, and the next mount on the
right one does. A journal of an earlier memfs, which recorded no workspace, is replayed only when
the user asks (``--replay-legacy-journal``).

Two real servers (``memfs server``), shared by the tests of this module: B serves a copy of A's
database (a database copied or restored elsewhere: the Memory Stores store has the same id on
both), and each has a Databricks store of the same id, as a dev and a prod workspace do.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import anthropic
import pytest

from kit.databricks import ACTOR, Workspace, databricks_env
from kit.journals import journal_records
from kit.mounts import MountedStore, MountMaker, memfs
from kit.servers import ServerProcess, free_port
from kit.waiting import wait_for
from memfs.writeback.journal import Journal, Record


@dataclass
class Server:
    process: ServerProcess
    sdk: anthropic.Anthropic
    workspace: Workspace  # its Databricks API


@dataclass
class TwoServers:
    a: Server
    b: Server
    store_id: str  # a Memory Stores store on both (B's database is a copy of A's)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoServers]:
    where = tmp_path_factory.mktemp("workspaces")
    a = ServerProcess(db=where / "a.db", port=free_port())
    b = ServerProcess(db=where / "b.db", port=free_port())
    started: list[Server] = []
    try:
        a.start()
        started.append(serve(a))
        store = started[0].sdk.beta.memory_stores.create(name="copied")
        with sqlite3.connect(a.db) as source, sqlite3.connect(b.db) as copy:
            source.backup(copy)  # the database copied elsewhere, as a live server has it
        b.start()
        started.append(serve(b))
        yield TwoServers(started[0], started[1], store.id)
    finally:
        for server in started:
            server.sdk.close()
            server.workspace.http.close()
        a.stop()
        b.stop()


def serve(process: ServerProcess) -> Server:
    sdk = anthropic.Anthropic(api_key=process.api_key, base_url=process.base_url)
    return Server(process, sdk, Workspace(process))


@pytest.fixture
def makers(servers: TwoServers, tmp_path: Path) -> Iterator[tuple[MountMaker, MountMaker]]:
    """Mounts of A and of B that share one cache directory (``tmp_path/cache``)."""
    made = tuple(
        MountMaker(
            server.sdk,
            server.process.client_env(),
            tmp_path,
            prefix=name,
            extra_args=tuple(slow_uploads(tmp_path)),
        )
        for name, server in (("a", servers.a), ("b", servers.b))
    )
    try:
        yield made[0], made[1]
    finally:
        for maker in made:
            maker.close()


def slow_uploads(tmp_path: Path) -> list[str]:
    """Mount options: one cache directory for every mount of a test, and saves that wait in
    the journal (30 s) long enough to be killed there."""
    return ["--cache-dir", str(tmp_path / "cache"), "--update-delay", "30"]


def not_replayed(mounted: MountedStore) -> list[dict[str, object]]:
    waiting: list[dict[str, object]] = mounted.status()["uploads"]["not_replayed"]
    return waiting


def test_a_memory_stores_journal_waits_for_its_own_server(
    servers: TwoServers, makers: tuple[MountMaker, MountMaker], tmp_path: Path
) -> None:
    on_a = makers[0](store_id=servers.store_id)
    (on_a.path / "private.md").write_text("for A only\n")
    on_a.kill()  # the save is in A's journal, not uploaded

    on_b = makers[1](store_id=servers.store_id)  # a read-write mount replays before it serves
    on_b.pass_marker()
    assert "/private.md" not in on_b.paths()
    [waiting] = not_replayed(on_b)
    a_url = servers.a.process.base_url
    assert waiting["workspace"] == {"api": "memory-stores", "base_url": a_url}
    assert waiting["records"] == 1
    said = memfs("status", str(on_b.path), env=on_b.env).stdout
    assert f"waits for a mount of {a_url} (memory-stores)" in said, said
    assert on_b.umount().returncode == 0
    assert journal_records(tmp_path / "cache") == 1  # left in place

    assert on_a.mount().returncode == 0
    on_a.wait_content("/private.md", "for A only\n")
    assert not_replayed(on_a) == [] and journal_records(tmp_path / "cache") == 0
    assert "/private.md" not in on_b.paths()


def test_a_databricks_journal_waits_for_its_own_workspace(
    servers: TwoServers, servers_env: dict[str, dict[str, str]], tmp_path: Path
) -> None:
    store = f"agent-memory-{uuid.uuid4().hex[:8]}"  # the same id on both workspaces
    for server in (servers.a, servers.b):
        answer = server.workspace.http.post(
            "/api/2.0/agents/memory-stores", params={"managed_memory_store_id": store}, json={}
        )
        assert answer.status_code == 200, answer.text
    mounts: list[MountedStore] = []

    def mount(name: str) -> MountedStore:
        point = tmp_path / name
        point.mkdir(exist_ok=True)
        mounted = MountedStore(
            path=point,
            store_id=store,
            store_name=store,
            sdk=servers.a.sdk,  # unused: the checks speak the Databricks API
            env=servers_env[name],
            log_file=tmp_path / f"{name}.log",
            extra_args=["--api", "databricks", "--actor", ACTOR, *slow_uploads(tmp_path)],
        )
        mounts.append(mounted)
        result = mounted.mount()
        assert result.returncode == 0, result.stderr
        return mounted

    try:
        on_a = mount("a")
        (on_a.path / "private.md").write_text("for A only\n")
        on_a.kill()

        on_b = mount("b")
        (on_b.path / "marker.md").write_text("marker\n")
        on_b.settle()
        assert servers.b.workspace.content(store, "/marker.md") == "marker\n"
        assert servers.b.workspace.content(store, "/private.md") is None
        [waiting] = not_replayed(on_b)
        a_url = servers.a.process.base_url
        assert waiting["workspace"] == {"api": "databricks", "base_url": a_url}
        assert on_b.umount().returncode == 0

        assert on_a.mount().returncode == 0
        wait_for(lambda: servers.a.workspace.content(store, "/private.md") == "for A only\n")
        assert servers.b.workspace.content(store, "/private.md") is None
    finally:
        for mounted in mounts:
            mounted.cleanup()
    for mounted in mounts:
        assert "Traceback" not in mounted.log(), mounted.log()


@pytest.fixture
def servers_env(servers: TwoServers, tmp_path: Path) -> dict[str, dict[str, str]]:
    """The environment of a Databricks mount of A (``a``) and of B (``b``)."""
    return {
        "a": databricks_env(servers.a.process, tmp_path),
        "b": databricks_env(servers.b.process, tmp_path),
    }


def test_a_journal_of_an_earlier_memfs_is_replayed_only_when_asked(
    servers: TwoServers, makers: tuple[MountMaker, MountMaker], tmp_path: Path
) -> None:
    store = servers.a.sdk.beta.memory_stores.create(name=f"legacy-{uuid.uuid4().hex[:8]}")
    cache = tmp_path / "cache"
    legacy = Journal.open(cache, store.id)  # where an earlier memfs kept it, no workspace
    legacy.put(
        Record(
            name="legacy",
            op="put",
            path="/legacy.md",
            data=b"from an earlier memfs\n",
            written_at=datetime.now(UTC).isoformat(),
        )
    )
    legacy.close()

    mounted = makers[0](store_id=store.id)
    mounted.pass_marker()
    assert "/legacy.md" not in mounted.paths()
    [waiting] = not_replayed(mounted)
    assert waiting["workspace"] is None and waiting["records"] == 1
    assert "--replay-legacy-journal" in str(waiting["why"])
    said = [line for line in mounted.log().splitlines() if "recorded no workspace" in line]
    assert len(said) == 1, mounted.log()
    assert mounted.umount().returncode == 0
    assert journal_records(cache) == 1

    assert mounted.mount("--replay-legacy-journal").returncode == 0
    mounted.wait_content("/legacy.md", "from an earlier memfs\n")
    assert not_replayed(mounted) == []
    assert mounted.umount().returncode == 0
    assert journal_records(cache) == 0
