"""What the tools' input schemas tell a model before its first call: which arguments each
``memory`` command needs (validated with ``jsonschema``, as a client would, in a form the
Anthropic API accepts: nothing of ``oneOf``/``anyOf``/``allOf`` at the top), a description on
every argument of every tool, and how to search; the same schemas in process and over the
reference server's HTTP endpoint, for both APIs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jsonschema import Draft202012Validator

from kit.databricks import ACTOR, Workspace
from kit.servers import ServerProcess
from memfs.mcp import memory_tool

from .conftest import connected
from .test_databricks import DATABRICKS_TOOLS
from .test_history_search import MEMORY_STORES_TOOLS
from .test_http import dbx_url, key_of, ms_url, over_http

MINIMAL_CALLS: dict[str, dict[str, Any]] = {
    "view": {"path": "/memories"},
    "create": {"path": "/memories/a.md", "file_text": "a"},
    "str_replace": {"path": "/memories/a.md", "old_str": "a", "new_str": "b"},
    "insert": {"path": "/memories/a.md", "insert_line": 0, "insert_text": "c"},
    "delete": {"path": "/memories/a.md"},
    "rename": {"old_path": "/memories/a.md", "new_path": "/memories/b.md"},
}


async def listed_tools(tools: Any) -> dict[str, dict[str, Any]]:
    """Each listed tool's description and input schema, as a client receives them."""
    listed = (await tools.client.list_tools()).tools
    return {
        tool.name: {"description": tool.description, "schema": dict(tool.input_schema)}
        for tool in listed
    }


async def test_the_memory_schema_says_what_each_command_needs(
    open_ms: Callable[..., Any],
) -> None:
    async with open_ms() as backend, connected(backend) as tools:
        schema = (await listed_tools(tools))["memory"]["schema"]
    Draft202012Validator.check_schema(schema)
    # the Anthropic API refuses these at the top: Claude Code would fail every request
    assert not {"oneOf", "anyOf", "allOf"} & set(schema)
    validator = Draft202012Validator(schema)
    assert set(MINIMAL_CALLS) == set(memory_tool.COMMANDS)
    for command, arguments in MINIMAL_CALLS.items():
        call = {"command": command, **arguments}
        assert validator.is_valid(call), (command, list(validator.iter_errors(call)))
        for name in arguments:
            missing = {k: v for k, v in call.items() if k != name}
            assert not validator.is_valid(missing), f"{command} without {name} passed"
    view = {"command": "view", "path": "/memories/a.md", "view_range": [1, -1]}
    assert validator.is_valid(view)
    assert not validator.is_valid({"command": "view", "path": "/m", "view_range": [1]})
    assert not validator.is_valid({"command": "copy", "path": "/memories/a.md"})
    assert not validator.is_valid({"path": "/memories/a.md"})
    assert not validator.is_valid({"command": "delete", "path": "/memories/a", "force": True})


def assert_described(tools: dict[str, dict[str, Any]]) -> None:
    for name, tool in tools.items():
        assert tool["description"], name
        for argument, schema in tool["schema"]["properties"].items():
            assert schema.get("description"), f"{name}.{argument} has no description"


def assert_search_says_how(search: dict[str, Any]) -> None:
    words = search["description"]
    assert "keywords" in words  # how to phrase a query
    assert "10 matches unless limit says otherwise" in words  # the default limit
    assert "100 for the best, the others a percentage of its score" in words  # a score
    assert search["schema"]["properties"]["limit"]["default"] == 10


async def test_every_argument_of_every_memory_stores_tool_is_described(
    open_ms: Callable[..., Any],
) -> None:
    async with open_ms() as backend, connected(backend) as tools:
        ms = await listed_tools(tools)
    assert sorted(ms) == MEMORY_STORES_TOOLS
    assert_described(ms)
    assert_search_says_how(ms["memory_search"])
    assert ms["memory_history"]["schema"]["properties"]["limit"]["default"] == 10


async def test_every_argument_of_every_databricks_tool_is_described(
    open_dbx: Callable[..., Any],
) -> None:
    async with open_dbx() as backend, connected(backend) as tools:
        dbx = await listed_tools(tools)
    assert sorted(dbx) == DATABRICKS_TOOLS
    assert_described(dbx)
    assert_search_says_how(dbx["memory_search"])
    assert_search_says_how(dbx["search_memory"])


async def test_the_http_endpoint_lists_the_same_tools(
    server: ServerProcess, ms_store: str, workspace: Workspace, open_ms: Callable[..., Any]
) -> None:
    async with open_ms() as backend, connected(backend) as tools:
        in_process = await listed_tools(tools)
    async with over_http(ms_url(server, ms_store), key_of(server)) as tools:
        assert await listed_tools(tools) == in_process
    url = dbx_url(server, workspace.create_store(), f"actor_id={ACTOR}")
    async with over_http(url, {"authorization": f"Bearer {server.api_key}"}) as tools:
        dbx = await listed_tools(tools)
    assert dbx["memory"] == in_process["memory"]
    assert_described(dbx)
