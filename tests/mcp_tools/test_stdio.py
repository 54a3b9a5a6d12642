"""``memfs mcp STORE`` as an agent's host runs it: a subprocess speaking MCP on stdio, driven
by the official client (the ``initialize`` handshake, the tool list, one call), for both
APIs; and its usage errors, one line each."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_types.version import LATEST_MODERN_VERSION

from kit.databricks import ACTOR, Workspace, databricks_env
from kit.servers import ServerProcess
from memfs.api import StoreClient
from memfs.mcp.catalogue import MEMORY_SCHEMA

from .conftest import Tools, refuses_a_move_into_itself

WORKTREE = str(Path(__file__).resolve().parents[2])


@asynccontextmanager
async def memfs_mcp(
    env: dict[str, str],
    *args: str,
    errlog: Path,
    message_handler: Any = None,
    mode: str = "legacy",
) -> AsyncIterator[Client]:
    env = {**env, "PYTHONPATH": WORKTREE}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memfs", "mcp", *args], env=env
    )
    with errlog.open("w") as log:
        async with Client(
            stdio_client(params, errlog=log),
            mode=mode,
            message_handler=message_handler,
        ) as client:
            yield client


async def test_memory_stores_over_stdio(
    server: ServerProcess, client: StoreClient, tmp_path: Path
) -> None:
    store = await client.create_store("stdio store")
    await client.create_memory(store.id, "/hello.md", "hello over stdio\n")
    errors = tmp_path / "stderr"
    async with memfs_mcp(server.client_env(), store.id, errlog=errors) as mcp:
        assert mcp.server_info is not None and mcp.server_info.name == "memfs"
        assert "Memory store stdio store, read-write." in (mcp.instructions or "")
        listed = {tool.name: tool for tool in (await mcp.list_tools()).tools}
        assert sorted(listed) == ["memory", "memory_history", "memory_restore", "memory_search"]
        assert dict(listed["memory"].input_schema) == MEMORY_SCHEMA  # what each command needs
        result = await mcp.call_tool("memory", {"command": "view", "path": "/memories/hello.md"})
        assert result.content[0].text == (  # type: ignore[union-attr]
            "Here's the content of /memories/hello.md with line numbers:\n"
            "     1\thello over stdio\n     2\t"
        )
    assert errors.read_text() == ""


async def test_a_move_into_its_own_subtree_is_refused_over_stdio(
    server: ServerProcess, client: StoreClient, tmp_path: Path
) -> None:
    store = await client.create_store("stdio rename store")
    errors = tmp_path / "stderr"
    async with memfs_mcp(server.client_env(), store.id, errlog=errors) as mcp:
        await refuses_a_move_into_itself(Tools(mcp))
    assert errors.read_text() == ""


async def test_databricks_over_stdio(server: ServerProcess, tmp_path: Path) -> None:
    with Workspace(server) as workspace:
        store = workspace.create_store()
        workspace.put(store, "/fact.md", "water boils at 100 C")
        errors = tmp_path / "stderr"
        env = databricks_env(server, tmp_path)
        async with memfs_mcp(
            env, store, "--api", "databricks", "--actor", ACTOR, errlog=errors
        ) as mcp:
            tools = sorted(tool.name for tool in (await mcp.list_tools()).tools)
            assert "save_memory" in tools and "memory_history" not in tools
            result = await mcp.call_tool("list_memories", {})
            assert result.content[0].text == (  # type: ignore[union-attr]
                "1 memories (path, size, description):\n/fact.md\t20 bytes"
            )
            saved = await mcp.call_tool("save_memory", {"path": "/new.md", "content": "x"})
            assert not saved.is_error
        assert workspace.content(store, "/new.md") == "x"


def test_usage_errors_are_one_line(server: ServerProcess) -> None:
    env = {**server.client_env(), "PYTHONPATH": WORKTREE}
    for args, message, code in (
        (["store", "--actor", "a"], "memfs mcp: --actor needs --api databricks\n", 2),
        (
            ["s", "--api", "databricks"],
            "memfs mcp: --api databricks needs --actor ACTOR (whose entries to serve)\n",
            2,
        ),
        (["memstore_nope"], None, 3),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "memfs", "mcp", *args],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == code, done.stderr
        assert done.stdout == ""
        assert len(done.stderr.splitlines()) == 1, done.stderr
        if message is not None:
            assert done.stderr == message


@pytest.mark.parametrize("mode", ["auto", LATEST_MODERN_VERSION])
async def test_a_2026_client_over_stdio(
    server: ServerProcess, client: StoreClient, tmp_path: Path, mode: str
) -> None:
    """A client that opens with the 2026-07-28 envelope (``server/discover``, or a request)
    sends no ``initialize``: its first line goes to the SDK as it came."""
    store = await client.create_store("stdio 2026")
    await client.create_memory(store.id, "/a.md", "a\n")
    errors = tmp_path / "stderr"
    async with memfs_mcp(server.client_env(), store.id, errlog=errors, mode=mode) as mcp:
        assert mcp.protocol_version == LATEST_MODERN_VERSION
        result = await mcp.call_tool("memory", {"command": "view", "path": "/memories/a.md"})
        assert "     1\ta" in result.content[0].text  # type: ignore[union-attr]
    assert errors.read_text() == ""


def test_initialize_is_answered_once_and_first(server: ServerProcess, tmp_path: Path) -> None:
    """Over a bare pipe: the initialize answer comes before the client sends anything else
    (answered before the SDK is imported, ``--debug`` says), and the SDK, given the rest,
    answers every later request once, and never initialize again."""
    store = subprocess.run(
        [sys.executable, "-m", "memfs", "stores", "create", "pipe", "--json"],
        env={**server.client_env(), "PYTHONPATH": WORKTREE},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    errors = tmp_path / "stderr"
    with errors.open("wb") as errlog:
        proc = subprocess.Popen(
            [sys.executable, "-m", "memfs", "mcp", json.loads(store.stdout)["id"], "--debug"],
            env={**server.client_env(), "PYTHONPATH": WORKTREE},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errlog,
        )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": CLIENT}
        send(proc, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        first = json.loads(proc.stdout.readline())
        assert first["id"] == 0 and first["result"]["protocolVersion"] == "2025-06-18", first
        send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        send(proc, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        send(proc, {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": params})
        send(proc, {"jsonrpc": "2.0", "id": 3, "method": "ping"})
        rest = [json.loads(proc.stdout.readline()) for _ in range(3)]
        proc.stdin.close()  # (the SDK drops what is in flight when stdin ends: not before)
        assert proc.stdout.read() == b""
        assert proc.wait(timeout=60) == 0, errors.read_text()
    finally:
        proc.kill()
        proc.wait()
    rest.sort(key=lambda answer: answer["id"])  # answered concurrently
    assert [answer["id"] for answer in rest] == [1, 2, 3], rest
    assert {tool["name"] for tool in rest[0]["result"]["tools"]} >= {"memory"}
    assert rest[1]["result"] == first["result"]  # the SDK's answer to a second initialize
    assert "initialize answered before the SDK was loaded" in errors.read_text()


CLIENT = {"name": "pipe-test", "version": "1"}


def send(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def capabilities_asked(server: ServerProcess) -> int:
    """``GET /v1/memfs/capabilities`` answered by the server so far (its /metrics)."""
    with urllib.request.urlopen(server.base_url + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    prefix = 'memfs_server_requests_total{method="GET",route="/v1/memfs/capabilities"'
    return sum(int(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix))


async def test_the_servers_capabilities_are_asked_once(
    server: ServerProcess, client: StoreClient, tmp_path: Path
) -> None:
    """Once for the limits, the change stream (subscriptions) and search together."""
    store = await client.create_store("asked once")
    await client.create_memory(store.id, "/a.md", "apples\n")
    before = capabilities_asked(server)
    errors = tmp_path / "stderr"
    async with memfs_mcp(server.client_env(), store.id, errlog=errors) as mcp:
        assert mcp.server_capabilities.resources and mcp.server_capabilities.resources.subscribe
        await mcp.list_resources()  # opens the change stream
        found = await mcp.call_tool("memory_search", {"query": "apples"})
        assert "/memories/a.md" in found.content[0].text  # type: ignore[union-attr]
    assert capabilities_asked(server) - before == 1
