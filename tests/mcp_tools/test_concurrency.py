"""Two MCP clients (each with its own connection to the server, as two agents would be) editing
different lines of one memory at the same time lose no edit reported as done; and a store that
stops answering, or a bug in a tool, is a one-line tool error, never a crash of the MCP
server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from kit.servers import ServerProcess
from memfs.api import StoreClient
from memfs.api.config import ClientConfig, Secret
from memfs.mcp.backend import Match
from memfs.mcp.store_backend import StoreBackend, open_memory_stores

from .conftest import LINES, connected, edit_lines


async def test_two_clients_editing_different_lines_lose_no_reported_edit(
    open_ms: Callable[..., Any], client: StoreClient, ms_store: str
) -> None:
    text = "".join(f"{writer}-{i} todo\n" for i in range(LINES) for writer in "ab")
    memory = await client.create_memory(ms_store, "/shared.md", text)
    outcomes: dict[str, bool] = {}

    async def writer(name: str) -> None:
        async with open_ms() as backend, connected(backend) as tools:
            await edit_lines(tools, name, outcomes)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer, "a")
        nursery.start_soon(writer, "b")
    final = (await client.get_memory(ms_store, memory.id)).content or ""
    for line, done in outcomes.items():
        assert f"{line} {'done' if done else 'todo'}\n" in final, (line, done, final)
    assert len(outcomes) == 2 * LINES
    assert sum(outcomes.values()) >= LINES  # most edits went through (re-applied on a race)


async def test_a_store_that_stops_answering_is_a_tool_error(
    fresh_server: ServerProcess, monkeypatch: Any
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", fresh_server.api_key)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fresh_server.base_url)
    config = ClientConfig(api_key=Secret(fresh_server.api_key), base_url=fresh_server.base_url)
    async with StoreClient(config) as admin:
        store = await admin.create_store("goes away")
    async with (
        open_memory_stores(store.id, read_only=False) as backend,
        connected(backend) as tools,
    ):
        await tools.memory("create", path="/memories/a.md", file_text="a")
        fresh_server.stop()
        answer = await tools.refused("memory", command="view", path="/memories/a.md")
        assert answer.startswith("The store did not answer: "), answer
        assert len(answer.splitlines()) == 1
        assert fresh_server.api_key not in answer
        assert await tools.refused("no_such_tool") == "Unknown tool: no_such_tool"


async def test_a_bug_in_a_tool_is_an_internal_error_and_the_server_goes_on(
    open_ms: Callable[..., Any], caplog: Any
) -> None:
    class Buggy(StoreBackend):
        async def search(self, query: str, limit: int) -> list[Match]:
            raise RuntimeError("a bug, with a detail the model must not see")

    async with open_ms() as opened, connected(Buggy(opened.store, opened.info)) as tools:
        answer = await tools.refused("memory_search", query="anything")
        assert answer == "Internal error in memory_search; see the server's log."
        await tools.memory("create", path="/memories/a.md", file_text="still serving")
        assert "still serving" in await tools.memory("view", path="/memories/a.md")
    assert "a bug, with a detail" in caplog.text  # logged with its traceback
