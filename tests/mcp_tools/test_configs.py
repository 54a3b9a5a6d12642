"""The client configurations of docs/mcp.md are valid JSON. Those that start ``memfs mcp`` (stdio)
pass arguments its parser accepts (and no usage error) and keep keys out of ``args``; those that
reach ``memfs server`` over HTTP name its MCP routes (Databricks: with an actor), take the key
from an environment reference only, and, with the references filled in, reach the session
server's tools."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from starlette.routing import compile_path

from kit.databricks import Workspace
from kit.servers import ServerProcess
from memfs.api import StoreClient
from memfs.cli import build_parser
from memfs.commands.mcp import usage_error
from memfs.server.mcp.endpoint import DATABRICKS_MCP_PATH, MEMORY_STORES_MCP_PATH

from .test_http import INITIALIZE, MCP_HEADERS

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"
# ${VAR} (Claude Code) or ${env:VAR} (Cursor), alone or after "Bearer "
KEY_REFERENCE = re.compile(r"^(Bearer )?\$\{(env:)?[A-Z_]+\}$")


def documented_servers() -> list[dict[str, Any]]:
    blocks = re.findall(r"```json\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    return [server for block in blocks for server in json.loads(block)["mcpServers"].values()]


def test_every_stdio_configuration_starts_a_valid_memfs_mcp() -> None:
    servers = [server for server in documented_servers() if "command" in server]
    assert len(servers) == 4
    apis = set()
    for server in servers:
        assert server["command"] == "memfs"
        args = build_parser().parse_args(server["args"])
        assert args.command == "mcp"
        assert usage_error(args) is None, server["args"]
        apis.add(args.api)
        env = server.get("env", {})
        assert all(isinstance(value, str) for value in env.values())
        secrets = [value for name, value in env.items() if name.endswith(("_KEY", "_TOKEN"))]
        assert not any(secret in arg for secret in secrets for arg in server["args"])
    assert apis == {"memory-stores", "databricks"}


async def test_every_http_configuration_reaches_the_servers_tools(
    server: ServerProcess, client: StoreClient, workspace: Workspace
) -> None:
    servers = [server for server in documented_servers() if "url" in server]
    assert len(servers) == 2
    routes = {
        name: compile_path(template)[0]
        for name, template in (("ms", MEMORY_STORES_MCP_PATH), ("dbx", DATABRICKS_MCP_PATH))
    }
    stores = {
        "ms": (await client.create_store("from the docs")).id,
        "dbx": workspace.create_store(),
    }
    reached = set()
    async with httpx.AsyncClient(timeout=10) as http:
        for documented in servers:
            url = urlsplit(documented["url"])
            api = next(name for name, route in routes.items() if route.match(url.path))
            if api == "dbx":
                assert parse_qs(url.query)["actor_id"]
            headers = documented["headers"]
            assert all(KEY_REFERENCE.match(value) for value in headers.values()), headers
            filled = {
                name: re.sub(r"\$\{[^}]*\}", server.api_key, value)
                for name, value in headers.items()
            }
            path = re.sub(r"/memory(_|-)stores/[^/]+/mcp", rf"/memory\1stores/{stores[api]}/mcp",
                          url.path)  # fmt: skip
            answer = await http.post(
                f"{server.base_url}{path}?{url.query}",
                json=INITIALIZE,
                headers={**MCP_HEADERS, **filled},
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["result"]["serverInfo"]["name"] == "memfs"
            reached.add(api)
    assert reached == {"ms", "dbx"}
