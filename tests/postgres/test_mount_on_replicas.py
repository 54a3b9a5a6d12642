"""A change committed through one replica reaches a mount attached to another, fast (of either
API: a Databricks store's too).

Three ``memfs server`` replicas share one PostgreSQL database. A mount talks to replica B and
follows the server's change stream (``--change-feed auto``); writes go through replica A with the
official SDK. Each change must show in the mount — the kernel's cached copy included — well
under a second, because LISTEN/NOTIFY carries it from A to B and the stream pushes it to the
mount, which invalidates the kernel's copy.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import anthropic
import pytest
from databricks.sdk import WorkspaceClient
from databricks.sdk.service.agentkit import ManagedMemoryEntry

from kit.databricks import ACTOR, Workspace, databricks_env
from kit.mounts import MountedStore, MountMaker
from kit.servers import ServerProcess
from kit.waiting import wait_for

pytestmark = pytest.mark.fuse


@pytest.fixture
def mounted_on_replica_b(
    replicas: list[ServerProcess], tmp_path: Path
) -> Iterator[tuple[MountedStore, anthropic.Anthropic]]:
    writer = anthropic.Anthropic(
        api_key=replicas[0].api_key, base_url=replicas[0].base_url, max_retries=1
    )
    reader = anthropic.Anthropic(
        api_key=replicas[1].api_key, base_url=replicas[1].base_url, max_retries=1
    )
    env = replicas[1].client_env()
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg-cache")
    maker = MountMaker(
        reader, env, tmp_path, prefix="replicas", extra_args=("--change-feed", "auto")
    )
    try:
        yield maker(memories={"/live.md": "v0\n"}), writer
    finally:
        maker.close()
        writer.close()
        reader.close()


def test_write_on_replica_a_shows_in_a_mount_on_replica_b(
    mounted_on_replica_b: tuple[MountedStore, anthropic.Anthropic],
) -> None:
    mounted, writer = mounted_on_replica_b
    live = mounted.path / "live.md"
    assert live.read_text() == "v0\n"  # now in the kernel's page cache
    memory_id = mounted.memories()["/live.md"].id
    delays = []
    for n in range(1, 11):
        writer.beta.memory_stores.memories.update(
            memory_id, memory_store_id=mounted.store_id, content=f"v{n}\n"
        )
        started = time.monotonic()
        wait_for(lambda n=n: live.read_text() == f"v{n}\n", timeout=5, interval=0.01)
        delays.append(time.monotonic() - started)
    # A new memory appears in its directory listing too.
    writer.beta.memory_stores.memories.create(mounted.store_id, path="/fresh.md", content="new\n")
    started = time.monotonic()
    wait_for(lambda: "fresh.md" in {p.name for p in mounted.path.iterdir()}, timeout=5)
    delays.append(time.monotonic() - started)
    assert max(delays) < 1.0, f"visibility delays (s): {delays}"
    assert statistics.median(delays) < 0.5, f"visibility delays (s): {delays}"


def test_a_databricks_write_on_replica_a_shows_in_a_mount_on_replica_b(
    replicas: list[ServerProcess], tmp_path: Path
) -> None:
    """The mount on B follows B's Databricks change stream (polls an hour apart): an entry
    written through A with databricks-sdk shows at once (LISTEN/NOTIFY from A to B)."""
    store = Workspace(replicas[1]).create_store()
    point = tmp_path / "dbx"
    point.mkdir()
    reader = anthropic.Anthropic(api_key=replicas[1].api_key, base_url=replicas[1].base_url)
    mounted = MountedStore(
        path=point,
        store_id=store,
        store_name=store,
        sdk=reader,
        env=databricks_env(replicas[1], tmp_path),
        log_file=tmp_path / "dbx.log",
        extra_args=["--api", "databricks", "--actor", ACTOR, "--poll-interval", "3600"],
    )
    try:
        result = mounted.mount("--idle-poll-interval", "3600")
        assert result.returncode == 0, result.stderr
        assert mounted.status()["change_feed"]["state"] == "connected"
        writer = WorkspaceClient(host=replicas[0].base_url, token=replicas[0].api_key)
        writer.agent_kit.create_memory(
            f"memory-stores/{store}",
            ManagedMemoryEntry(actor_id=ACTOR, path="/from-a.md", content="written on A\n"),
        )
        wait_for(lambda: (point / "from-a.md").exists(), timeout=5)
        assert (point / "from-a.md").read_text() == "written on A\n"
    finally:
        mounted.cleanup()
        reader.close()
