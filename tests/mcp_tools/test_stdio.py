"""``memfs mcp STORE`` as an agent's host runs it: a subprocess speaking MCP on stdio, driven
by the official client (the ``initialize`` handshake, the tool list, one call), for both
APIs; and its usage errors, one line each."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from support.databricks import ACTOR, Workspace, databricks_env
from support.servers import ServerProcess

from memfs.api import StoreClient

WORKTREE = str(Path(__file__).resolve().parents[2])


@asynccontextmanager
async def memfs_mcp(
    env: dict[str, str], *args: str, errlog: Path, message_handler: Any = None
) -> AsyncIterator[Client]:
    env = {**env, "PYTHONPATH": WORKTREE}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memfs", "mcp", *args], env=env
    )
    with errlog.open("w") as log:
        async with Client(
            stdio_client(params, errlog=log), mode="legacy", message_handler=message_handler
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
        tools = sorted(tool.name for tool in (await mcp.list_tools()).tools)
        assert tools == ["memory", "memory_history", "memory_restore", "memory_search"]
        result = await mcp.call_tool("memory", {"command": "view", "path": "/memories/hello.md"})
        assert result.content[0].text == (  # type: ignore[union-attr]
            "Here's the content of /memories/hello.md with line numbers:\n"
            "     1\thello over stdio\n     2\t"
        )
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
