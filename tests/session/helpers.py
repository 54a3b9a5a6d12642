"""Helpers for session tests: the real server's API, running ``memfs session``, mounts."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from memfs.paths import slug

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
