"""``memfs mcp STORE --print-config``: ready configurations of Claude Code, Cursor and Claude
Desktop, over stdio and (memfs server) HTTP, with no secret in them. Each stdio block, its
variables expanded as Claude Code and Cursor expand them, starts a ``memfs mcp`` the official
client reaches; each HTTP block reaches the server's tools; both APIs, read-only kept."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from kit.databricks import ACTOR, Workspace, databricks_env
from kit.servers import ServerProcess
from memfs.api import StoreClient
from memfs.cli import build_parser
from memfs.commands.mcp import usage_error

from .test_databricks import DATABRICKS_TOOLS
from .test_history_search import MEMORY_STORES_TOOLS
from .test_http import over_http
from .test_stdio import WORKTREE

STDIO_TITLES = ["Claude Code, stdio", "Cursor, stdio", "Claude Desktop, stdio"]
HTTP_TITLES = ["Claude Code, HTTP (memfs server)", "Cursor, HTTP (memfs server)"]
REFERENCE = re.compile(r"\$\{(?:env:)?([A-Z_]+)\}")  # Claude Code's ${VAR}, Cursor's ${env:VAR}


def print_config(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memfs", "mcp", *args, "--print-config"],
        env={**env, "PYTHONPATH": WORKTREE},
        capture_output=True,
        text=True,
        timeout=60,
    )


def printed(env: dict[str, str], secret: str, *args: str) -> dict[str, tuple[str, Any]]:
    """Title -> (its comment lines, its one server object) of each printed configuration."""
    done = print_config(env, *args)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert secret not in done.stdout
    found = {}
    for block in done.stdout.strip().split("\n\n"):
        comments = [line[2:] for line in block.splitlines() if line.startswith("# ")]
        document = json.loads("\n".join(ln for ln in block.splitlines() if not ln.startswith("#")))
        (server,) = document["mcpServers"].values()
        found[comments[0].split(":")[0]] = ("\n".join(comments), server)
    return found


def expanded(values: dict[str, str], env: dict[str, str]) -> dict[str, str]:
    """``values`` with their references filled in from ``env``, as the client would."""
    return {name: REFERENCE.sub(lambda m: env[m[1]], value) for name, value in values.items()}


def check_stdio_args(server: dict[str, Any]) -> None:
    args = server["args"][server["args"].index("mcp") :]
    parsed = build_parser().parse_args(args)
    assert parsed.command == "mcp" and usage_error(parsed) is None, args


async def tools_over_stdio(server: dict[str, Any], env: dict[str, str]) -> list[str]:
    filled = {**expanded(server.get("env", {}), env), "PYTHONPATH": WORKTREE}
    params = StdioServerParameters(command=server["command"], args=server["args"], env=filled)
    async with Client(stdio_client(params), mode="legacy") as client:
        return sorted(tool.name for tool in (await client.list_tools()).tools)


async def tools_over_http(server: dict[str, Any], env: dict[str, str]) -> list[str]:
    async with over_http(server["url"], expanded(server["headers"], env)) as tools:
        return await tools.names()


async def test_memory_stores_configurations_are_ready(
    server: ServerProcess, client: StoreClient
) -> None:
    store = await client.create_store("Team Notes")
    env = server.client_env()
    found = printed(env, server.api_key, "Team Notes")
    assert list(found) == STDIO_TITLES + HTTP_TITLES
    for title in STDIO_TITLES:
        check_stdio_args(found[title][1])
        assert store.id in found[title][1]["args"]
    code, cursor = found["Claude Code, stdio"][1], found["Cursor, stdio"][1]
    assert code["env"]["ANTHROPIC_API_KEY"] == "${ANTHROPIC_API_KEY}"
    assert cursor["env"]["ANTHROPIC_API_KEY"] == "${env:ANTHROPIC_API_KEY}"
    assert code["env"]["ANTHROPIC_BASE_URL"] == server.base_url
    note, desktop = found["Claude Desktop, stdio"]
    assert "--api-key-file" in desktop["args"] and '"$ANTHROPIC_API_KEY"' in note
    assert await tools_over_stdio(code, env) == MEMORY_STORES_TOOLS
    assert await tools_over_stdio(cursor, env) == MEMORY_STORES_TOOLS
    for title in HTTP_TITLES:
        http = found[title][1]
        assert http["url"] == f"{server.base_url}/v1/memory_stores/{store.id}/mcp"
        assert await tools_over_http(http, env) == MEMORY_STORES_TOOLS
    assert found["Claude Code, HTTP (memfs server)"][1]["type"] == "http"
    # read-only: kept in every block
    read_only = printed(env, server.api_key, store.id, "--read-only")
    assert all("--read-only" in read_only[t][1]["args"] for t in STDIO_TITLES)
    http = read_only["Cursor, HTTP (memfs server)"][1]
    assert await tools_over_http(http, env) == ["memory", "memory_history", "memory_search"]


async def test_databricks_configurations_are_ready(server: ServerProcess, tmp_path: Path) -> None:
    with Workspace(server) as workspace:
        store = workspace.create_store()
        env = databricks_env(server, tmp_path)
        found = printed(env, server.api_key, store, "--api", "databricks", "--actor", ACTOR)
        assert list(found) == STDIO_TITLES + HTTP_TITLES
        for title in STDIO_TITLES:
            check_stdio_args(found[title][1])
        code = found["Claude Code, stdio"][1]
        assert code["env"] == {
            "DATABRICKS_HOST": server.base_url,
            "DATABRICKS_TOKEN": "${DATABRICKS_TOKEN}",
        }
        note, desktop = found["Claude Desktop, stdio"]
        assert "--profile" in desktop["args"] and "$DATABRICKS_TOKEN" in note
        assert await tools_over_stdio(code, env) == DATABRICKS_TOOLS
        http = found["Claude Code, HTTP (memfs server)"][1]
        assert f"actor_id={ACTOR}" in http["url"]
        assert http["headers"] == {"Authorization": "Bearer ${DATABRICKS_TOKEN}"}
        assert await tools_over_http(http, env) == DATABRICKS_TOOLS


def test_an_unknown_store_prints_no_configuration(server: ServerProcess) -> None:
    done = print_config(server.client_env(), "No Such Store")
    assert done.returncode == 3 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1


async def test_a_key_file_stays_a_file_and_http_names_a_variable(
    server: ServerProcess, client: StoreClient, tmp_path: Path
) -> None:
    store = await client.create_store("keyed")
    key_file = tmp_path / "key"
    key_file.write_text(server.api_key)
    key_file.chmod(0o600)
    env = {k: v for k, v in server.client_env().items() if k != "ANTHROPIC_API_KEY"}
    found = printed(env, server.api_key, store.id, "--api-key-file", str(key_file))
    for title in STDIO_TITLES:
        _, stdio = found[title]
        assert stdio["args"][-2:] == ["--api-key-file", str(key_file)]
        assert stdio["env"] == {"ANTHROPIC_BASE_URL": server.base_url}
    assert await tools_over_stdio(found["Claude Code, stdio"][1], env) == MEMORY_STORES_TOOLS
    note, http = found["Claude Code, HTTP (memfs server)"]
    assert http["headers"] == {"x-api-key": "${MEMFS_API_KEY}"}
    assert f"set MEMFS_API_KEY to the key in {key_file}" in note
    filled = {**env, "MEMFS_API_KEY": server.api_key}
    assert await tools_over_http(http, filled) == MEMORY_STORES_TOOLS
