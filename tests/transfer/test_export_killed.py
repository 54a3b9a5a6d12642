"""``memfs export --git`` killed (SIGKILL) while it lists the versions, on a server made slow by
its fault middleware: nothing half-made is left (no commit, no git process), and the next run
ends with the commits of one uninterrupted run, and without the files the killed run wrote
ahead for memories deleted in between."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from faults.helpers import FaultyServer, faulty_server_in

from kit.export_runs import git, memfs
from kit.waiting import wait_for
from memfs.api import StoreClient
from memfs.api.config import ClientConfig, Secret

VERSIONS_ROUTE = 'route="/v1/memory_stores/{store_id}/memory_versions"'


@pytest.fixture
def slow_server(tmp_path: Path) -> Iterator[FaultyServer]:
    with faulty_server_in(tmp_path) as proc:
        yield proc


def listings(server: FaultyServer) -> int:
    text = httpx.get(server.base_url + "/metrics").text  # never slowed by faults
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith("memfs_server_requests_total{") and VERSIONS_ROUTE in line
    )


def git_processes_in(root: Path) -> list[int]:
    """Processes (ours: fast-import, cat-file...) working in ``root``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/cwd") == str(root):
                found.append(int(pid))
        except OSError:
            continue
    return found


async def test_killed_while_listing_then_run_again(
    slow_server: FaultyServer, tmp_path: Path
) -> None:
    config = ClientConfig(api_key=Secret(slow_server.api_key), base_url=slow_server.base_url)
    async with StoreClient(config) as client:
        store = await client.create_store(f"export-{uuid.uuid4().hex[:8]}")
        memory = await client.create_memory(store.id, "/a", "0")
        for n in range(1, 60):  # 3 pages of versions
            await client.update_memory(store.id, memory.id, content=str(n))
        doomed = await client.create_memory(store.id, "/b", "on the first page")
    root = tmp_path / "killed"
    slow_server.set_faults("latency=0.5")
    before = listings(slow_server)
    proc = subprocess.Popen(
        [sys.executable, "-m", "memfs", "export", store.id, str(root), "--git"],
        env=slow_server.client_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: listings(slow_server) > before, timeout=30)  # a page in, more to come
        wait_for((root / "b").exists, timeout=30)  # written ahead, from the first page
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    wait_for(lambda: not git_processes_in(root), timeout=10)  # fast-import saw its input end
    with pytest.raises(subprocess.CalledProcessError):
        git(root, "rev-parse", "--verify", "-q", "refs/heads/main")  # no commit half-made
    slow_server.set_faults("none")
    async with StoreClient(config) as client:
        await client.delete_memory(store.id, doomed.id)
    memfs(slow_server, "export", store.id, str(root), "--git")
    assert not (root / "b").exists()  # the killed run's, unchanged since: removed
    assert sorted(os.listdir(root / ".memfs")) == ["exported.json", "store.json"]
    whole = tmp_path / "whole"
    memfs(slow_server, "export", store.id, str(whole), "--git")
    log = git(root, "log", "--format=%H %T")
    assert log == git(whole, "log", "--format=%H %T") and len(log.splitlines()) == 62
    assert (root / "a").read_text() == "59" and git(root, "status", "--porcelain") == ""
