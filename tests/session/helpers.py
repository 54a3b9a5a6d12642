"""Helpers for session tests: the real server's API, running ``memfs session``, mounts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from memfs.contract.paths import slug

HEADERS = {"anthropic-version": "2023-06-01", "anthropic-beta": "agent-memory-2026-07-22"}


@dataclass
class Api:
    """A thin synchronous view of the real server, for arranging and checking test data."""

    server: Any

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        headers = {**HEADERS, "x-api-key": self.server.api_key}
        response = httpx.request(
            method, self.server.base_url + path, headers=headers, timeout=10, **kwargs
        )
        assert response.status_code < 400, response.text
        return response.json()

    def create_store(self, name: str, description: str = "") -> dict[str, Any]:
        return self.call(  # type: ignore[no-any-return]
            "POST", "/v1/memory_stores", json={"name": name, "description": description}
        )

    def archive(self, store_id: str) -> None:
        self.call("POST", f"/v1/memory_stores/{store_id}/archive")

    def memories(self, store_id: str) -> dict[str, dict[str, Any]]:
        data = self.call(
            "GET", f"/v1/memory_stores/{store_id}/memories", params={"view": "full", "limit": 20}
        )
        return {m["path"]: m for m in data["data"] if m["type"] == "memory"}

    def create_memory(self, store_id: str, path: str, content: str) -> None:
        self.call(
            "POST",
            f"/v1/memory_stores/{store_id}/memories",
            json={"path": path, "content": content},
        )

    def versions(self, store_id: str) -> list[dict[str, Any]]:
        data = self.call(
            "GET", f"/v1/memory_stores/{store_id}/memory_versions", params={"limit": 100}
        )
        return data["data"]  # type: ignore[no-any-return]


def unique(name: str) -> str:
    """A store name unique to this test, whose slug is predictable: ``name-<hex>``."""
    return f"{name} {uuid.uuid4().hex[:8]}"


def slug_of(name: str) -> str:
    return slug(name)


def write_config(path: Path, resources: list[dict[str, Any]] | dict[str, Any]) -> Path:
    path.write_text(json.dumps(resources))
    return path


def run_memfs(
    args: list[str], env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memfs", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def mounts_under(root: Path) -> list[str]:
    """Mount points at or below ``root`` according to the kernel."""
    prefix = str(root)
    found = []
    with open("/proc/self/mounts", encoding="utf-8") as table:
        for line in table:
            point = line.split()[1].replace("\\040", " ")
            if point == prefix or point.startswith(prefix + "/"):
                found.append(point)
    return found


def force_unmount(root: Path) -> None:
    for point in mounts_under(root):
        subprocess.run(["fusermount3", "-uz", point], capture_output=True, check=False)


def both_apis_env(server: Any, tmp_path: Path) -> dict[str, str]:
    """Both APIs' credentials for ``server`` (which serves both), as their users set them;
    nothing of the machine's; the session's state and journals under ``tmp_path``."""
    env = server.client_env()
    env.update(
        DATABRICKS_HOST=server.base_url,
        DATABRICKS_TOKEN=server.api_key,
        HOME=str(tmp_path / "home"),  # no ~/.databrickscfg of the machine's
        MEMFS_STATE_DIR=str(tmp_path / "state"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
    )
    return env


def session_status(root: Path, env: dict[str, str]) -> dict[str, Any]:
    """``memfs session status --json`` of the running session at ``root``."""
    done = run_memfs(["session", "status", "--root", str(root), "--json"], env)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (``/proc``)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii") as stat:
                fields = stat.read().rpartition(")")[2].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def processes_naming(path: Path) -> list[int]:
    """The processes whose command line names ``path`` or a path below it (a session's, and
    the mount daemons an earlier memfs started for it, each with its mount point)."""
    prefix = str(path).encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                argv = cmdline.read().split(b"\0")
        except OSError:
            continue  # gone meanwhile
        if any(arg == prefix or arg.startswith(prefix + b"/") for arg in argv):
            found.append(int(entry))
    return found


def fsync_write(path: Path, content: str) -> None:
    """Write ``path`` and return once the store has it (fsync waits for the upload)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, content.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def stop_and_unmount(root: Path, env: dict[str, str]) -> None:
    """Teardown: stop the session at ``root`` if one is recorded, then detach whatever is left."""
    state_dir = Path(env["MEMFS_STATE_DIR"])
    if state_dir.exists() and any(state_dir.glob("*.json")):
        run_memfs(["session", "stop", "--root", str(root)], env, timeout=90)
    force_unmount(root)
