"""What the import tests share: ``memfs import`` run as a user runs it (a subprocess on the real
server), the store read back over plain HTTP, and the server's request counts (``/metrics``)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import httpx

from kit.servers import ServerProcess

HEADERS_VERSION = {"anthropic-version": "2023-06-01"}
MEMORIES = "/v1/memory_stores/{store_id}/memories"
MEMORY = "/v1/memory_stores/{store_id}/memories/{memory_id}"


@dataclass
class Run:
    """One ``memfs import``: exit status, the ``ACTION PATH [REASON]`` lines, the summary."""

    status: int
    lines: list[tuple[str, ...]]
    summary: str
    stderr: str

    def paths(self, action: str) -> list[str]:
        return [line[1] for line in self.lines if line[0] == action]

    def reason(self, path: str) -> str:
        found = [line for line in self.lines if line[1] == path]
        assert len(found) == 1, (path, self.lines)
        return found[0][2] if len(found[0]) > 2 else ""


def memfs_import(env: dict[str, str], *args: str | Path, secrets: tuple[str, ...] = ()) -> Run:
    """``memfs import ARGS`` in a subprocess; no traceback, no secret in its output."""
    proc = subprocess.run(
        [sys.executable, "-m", "memfs", "import", *map(str, args)],
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    out, err = proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")
    assert "Traceback" not in err, err
    for secret in secrets:
        assert secret not in out and secret not in err
    lines = out.splitlines() or [err.strip()]  # a failure before any line: its message
    return Run(proc.returncode, [tuple(line.split("\t")) for line in lines[:-1]], lines[-1], err)


def contents(server: ServerProcess, store_id: str) -> dict[str, str]:
    """Every memory of the store: path -> content (over plain HTTP, pages of 20)."""
    found: dict[str, str] = {}
    page: str | None = None
    with httpx.Client(base_url=server.base_url, headers=headers(server)) as http:
        while True:
            params = {"view": "full", "limit": "20", **({"page": page} if page else {})}
            answer = http.get(MEMORIES.format(store_id=store_id), params=params)
            assert answer.status_code == 200, answer.text
            body = answer.json()
            for memory in body["data"]:
                found[memory["path"]] = memory["content"]
            page = body.get("next_page")
            if not page:
                return found


def create_store(server: ServerProcess, name: str) -> str:
    with httpx.Client(base_url=server.base_url, headers=headers(server)) as http:
        answer = http.post("/v1/memory_stores", json={"name": name})
        assert answer.status_code == 200, answer.text
        return str(answer.json()["id"])


def headers(server: ServerProcess) -> dict[str, str]:
    return {"x-api-key": server.api_key, **HEADERS_VERSION}


_REQUESTS = re.compile(
    r'memfs_server_requests_total\{method="(\w+)",route="([^"]+)",status="(\d+)"\} (\d+)'
)


def requests(server: ServerProcess) -> Counter[tuple[str, str]]:
    """Requests the server answered so far, by (method, route template)."""
    counts: Counter[tuple[str, str]] = Counter()
    for method, route, _status, count in _REQUESTS.findall(
        httpx.get(server.base_url + "/metrics").text
    ):
        counts[(method, route)] += int(count)
    return counts


def writes(before: Counter[tuple[str, str]], after: Counter[tuple[str, str]]) -> int:
    """Memory writes (POST, PATCH, DELETE of memories or entries) between two counts."""
    return sum(
        after[key] - before[key]
        for key in after
        if key[0] in ("POST", "PATCH", "DELETE")
        and ("/memories" in key[1] or "/entries" in key[1])
        and ":search" not in key[1]
    )


def write_tree(root: Path, files: dict[str, str | bytes]) -> None:
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
