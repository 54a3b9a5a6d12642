"""The MCP tools ``memfs server`` serves over streamable HTTP, driven by the official client's
streamable HTTP transport against a real server process (the session's, and one on PostgreSQL):
both APIs, the server's own authentication, Host/Origin checks, read-only, and two agents (one
over stdio with ``memfs mcp``, one over HTTP) editing one memory at once losing no edit reported
as done."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import METHOD_NOT_FOUND

from kit.databricks import ACTOR, Workspace
from kit.servers import ServerProcess, free_port
from memfs.api import StoreClient
from memfs.api.config import ClientConfig, Secret
from memfs.server.mcp.endpoint import allowed_host_names

from .conftest import LINES, Tools, edit_lines, refuses_a_move_into_itself
from .test_stdio import memfs_mcp

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
MCP_HEADERS = {"accept": "application/json, text/event-stream"}


def ms_url(server: ServerProcess, store_id: str, query: str = "") -> str:
    return f"{server.base_url}/v1/memory_stores/{store_id}/mcp{query}"


def dbx_url(server: ServerProcess, store: str, query: str) -> str:
    return f"{server.base_url}/api/2.0/agents/memory-stores/{store}/mcp?{query}"


@asynccontextmanager
async def over_http(url: str, headers: dict[str, str]) -> AsyncIterator[Tools]:
    http = create_mcp_http_client(headers=headers)
    async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        yield Tools(client)


def key_of(server: ServerProcess) -> dict[str, str]:
    return {"x-api-key": server.api_key}


async def test_memory_stores_over_http(
    server: ServerProcess, client: StoreClient, ms_store: str
) -> None:
    async with over_http(ms_url(server, ms_store), key_of(server)) as tools:
        assert "Memory store mcp-" in (tools.client.instructions or "")
        assert await tools.names() == [
            "memory",
            "memory_history",
            "memory_restore",
            "memory_search",
        ]
        created = await tools.memory("create", path="/memories/a.md", file_text="one\ntwo\n")
        assert created == "File created successfully at: /memories/a.md"
        edited = await tools.memory(
            "str_replace", path="/memories/a.md", old_str="two", new_str="2"
        )
        assert edited.startswith("The memory file has been edited.")
        viewed = await tools.memory("view", path="/memories/a.md")
        assert "     1\tone\n     2\t2\n" in viewed
        history = await tools.ok("memory_history", path="/memories/a.md")
        assert "modified" in history and "created" in history
        found = await tools.ok("memory_search", query="one")
        assert "/memories/a.md" in found
    memory = await client.find_memory(ms_store, "/a.md")
    assert memory is not None
    assert (await client.get_memory(ms_store, memory.id)).content == "one\n2\n"


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_resources_and_prompt_over_http_without_subscriptions(
    server: ServerProcess, client: StoreClient, ms_store: str, workspace: Workspace
) -> None:
    """Memories are resources over HTTP too (both APIs), with the prompt; stateless HTTP has no
    session to push to, so no subscription is offered and resources/subscribe is refused."""
    await client.create_memory(ms_store, "/odd/what? #1.md", "hostile name\n")
    async with over_http(ms_url(server, ms_store), key_of(server)) as tools:
        offered = tools.client.server_capabilities.resources
        assert offered is not None and not offered.subscribe and not offered.list_changed
        listed = await tools.client.list_resources()
        assert [r.uri for r in listed.resources] == ["memfs://memories/odd/what%3F%20%231.md"]
        read = await tools.client.read_resource(listed.resources[0].uri)
        assert read.contents[0].text == "hostile name\n"  # type: ignore[union-attr]
        prompt = await tools.client.get_prompt("memory_store")
        assert "- Access: read-write" in prompt.messages[0].content.text  # type: ignore[union-attr]
        with pytest.raises(MCPError) as refused:
            await tools.client.subscribe_resource(listed.resources[0].uri)
        assert refused.value.code == METHOD_NOT_FOUND
    store = workspace.create_store()
    workspace.put(store, "/fact.md", "water boils at 100 C")
    workspace.put(store, "/fact.md", "in session s1", session="s1")
    url = dbx_url(server, store, f"actor_id={ACTOR}&session_id=s1&read_only=true")
    async with over_http(url, key_of(server)) as tools:
        read = await tools.client.read_resource("memfs://memories/fact.md")
        assert read.contents[0].text == "in session s1"  # type: ignore[union-attr]
        prompt = await tools.client.get_prompt("memory_store")
        text = prompt.messages[0].content.text  # type: ignore[union-attr]
        assert f"(actor {ACTOR}, session s1)" in text and "- Access: read-only" in text


async def test_databricks_over_http_is_one_actors_session(
    server: ServerProcess, workspace: Workspace
) -> None:
    store = workspace.create_store()
    workspace.put(store, "/fact.md", "water boils at 100 C")
    workspace.put(store, "/fact.md", "in session s1", session="s1")
    bearer = {"authorization": f"Bearer {server.api_key}"}
    async with over_http(dbx_url(server, store, f"actor_id={ACTOR}"), bearer) as tools:
        names = await tools.names()
        assert {"save_memory", "list_memories", "forget_memory", "search_memory"} <= set(names)
        assert "memory_history" not in names
        assert "water boils" in await tools.memory("view", path="/memories/fact.md")
        await tools.memory("str_replace", path="/memories/fact.md", old_str="100", new_str="99")
        await tools.ok("save_memory", path="/new.md", content="x", description="d")
    query = f"actor_id={ACTOR}&session_id=s1"
    async with over_http(dbx_url(server, store, query), bearer) as tools:
        assert "in session s1" in await tools.memory("view", path="/memories/fact.md")
        listed = await tools.ok("list_memories")
        assert "/fact.md" in listed and "/new.md" not in listed
    assert workspace.content(store, "/fact.md") == "water boils at 99 C"
    assert workspace.content(store, "/fact.md", session="s1") == "in session s1"
    assert workspace.entries(store)[(None, "/new.md")]["description"] == "d"


async def test_a_move_into_its_own_subtree_is_refused_over_http(
    server: ServerProcess, ms_store: str
) -> None:
    async with over_http(ms_url(server, ms_store), key_of(server)) as tools:
        await refuses_a_move_into_itself(tools)


async def test_read_only_offers_no_writing_tool_and_refuses_writes(
    server: ServerProcess, client: StoreClient, ms_store: str
) -> None:
    await client.create_memory(ms_store, "/kept.md", "kept\n")
    url = ms_url(server, ms_store, "?read_only=true")
    async with over_http(url, key_of(server)) as tools:
        assert await tools.names() == ["memory", "memory_history", "memory_search"]
        refused = await tools.refused(
            "memory", command="create", path="/memories/b.md", file_text="b"
        )
        assert "read-only" in refused
        refused = await tools.refused("memory", command="delete", path="/memories/kept.md")
        assert "read-only" in refused
    assert await client.find_memory(ms_store, "/kept.md") is not None
    assert await client.find_memory(ms_store, "/b.md") is None


async def test_the_servers_input_rules_hold_for_tool_calls(
    server: ServerProcess, client: StoreClient, ms_store: str, workspace: Workspace
) -> None:
    """The storage leaves paths, sizes and NUL to the HTTP layer: the MCP backend applies the
    same rules, so a tool call cannot store what a REST request could not (a one-line tool
    error, nothing written). A Memory Stores content may hold NUL (REST stores it too);
    Databricks refuses it."""
    too_big = "x" * 102_401
    async with over_http(ms_url(server, ms_store), key_of(server)) as tools:
        refused = await tools.refused(
            "memory", command="create", path="/memories/big.md", file_text=too_big
        )
        assert refused.startswith("The store refused it: content: 102401 bytes"), refused
    assert await client.find_memory(ms_store, "/big.md") is None
    store = workspace.create_store()
    query = f"actor_id={ACTOR}"
    async with over_http(dbx_url(server, store, query), key_of(server)) as tools:
        refused = await tools.refused("save_memory", path="/n.md", content="a\x00b")
        assert "NUL" in refused
        refused = await tools.refused("search_memory", query="water\x00")
        assert "NUL" in refused
    assert workspace.entries(store) == {}


async def test_refusals_before_any_tool(server: ServerProcess, ms_store: str) -> None:
    """No key: 401 as on every route; a foreign Host or Origin (DNS rebinding): 421 and 403;
    GET and DELETE: 405 (stateless); a store that does not exist: 404; the Databricks route
    without actor_id: 400."""
    url = ms_url(server, ms_store)
    async with httpx.AsyncClient(timeout=10) as http:
        answer = await http.post(url, json=INITIALIZE, headers=MCP_HEADERS)
        assert answer.status_code == 401
        assert answer.json()["error"]["type"] == "authentication_error"
        keyed = {**MCP_HEADERS, **key_of(server)}
        answer = await http.post(url, json=INITIALIZE, headers={**keyed, "host": "evil.example"})
        assert answer.status_code == 421, answer.text
        elsewhere = ms_url(server, "memstore_nosuchstore")  # refused before the store is sought
        answer = await http.post(
            elsewhere, json=INITIALIZE, headers={**keyed, "host": "evil.example"}
        )
        assert answer.status_code == 421, answer.text
        evil = {**keyed, "origin": "http://evil.example"}
        assert (await http.post(url, json=INITIALIZE, headers=evil)).status_code == 403
        local = {**keyed, "origin": f"http://localhost:{server.port}"}
        answer = await http.post(url, json=INITIALIZE, headers=local)  # the same request, allowed
        assert answer.status_code == 200, answer.text
        assert answer.json()["result"]["serverInfo"]["name"] == "memfs"
        assert "mcp-session-id" not in answer.headers  # stateless
        for method in ("GET", "DELETE"):  # no stream held open, no session to end
            answer = await http.request(method, url, headers=keyed)
            assert answer.status_code == 405, (method, answer.text)
        missing = ms_url(server, "memstore_nosuchstore")
        assert (await http.post(missing, json=INITIALIZE, headers=keyed)).status_code == 404
        no_actor = f"{server.base_url}/api/2.0/agents/memory-stores/some-store/mcp"
        answer = await http.post(no_actor, json=INITIALIZE, headers=keyed)
        assert answer.status_code == 400
        assert "actor_id" in answer.json()["message"]


async def test_a_scope_parameter_given_twice_is_refused_naming_it(
    server: ServerProcess, ms_store: str, workspace: Workspace
) -> None:
    """``?read_only=true&read_only=false`` answered the last: a wrapper's appended (or
    prepended) ``read_only=true`` let writes through, a second ``actor_id`` acted as another
    actor. Each repeat is a 400 naming the parameter, before any tool."""
    keyed = {**MCP_HEADERS, **key_of(server)}
    store = workspace.create_store()
    cases = [
        (ms_url(server, ms_store, "?read_only=true&read_only=false"), "read_only"),
        (ms_url(server, ms_store, "?read_only=false&read_only=true"), "read_only"),
        (dbx_url(server, store, f"actor_id={ACTOR}&read_only=1&read_only=0"), "read_only"),
        (dbx_url(server, store, f"actor_id={ACTOR}&actor_id=alice"), "actor_id"),
        (dbx_url(server, store, f"actor_id={ACTOR}&session_id=s1&session_id=s2"), "session_id"),
    ]
    async with httpx.AsyncClient(timeout=10) as http:
        for url, name in cases:
            answer = await http.post(url, json=INITIALIZE, headers=keyed)
            assert answer.status_code == 400, (url, answer.text)
            body = answer.json()
            message = body["error"]["message"] if "/v1/" in url else body["message"]
            assert message == f"{name}: given 2 times; send it once", url
        once = await http.post(
            dbx_url(server, store, f"actor_id={ACTOR}&session_id=s1&read_only=true"),
            json=INITIALIZE,
            headers=keyed,
        )
        assert once.status_code == 200, once.text


async def test_stdio_and_http_clients_editing_one_memory_lose_no_reported_edit(
    server: ServerProcess, client: StoreClient, ms_store: str, tmp_path: Path
) -> None:
    """As tests/mcp_tools/test_concurrency.py's two clients, one of them over HTTP (the server's
    backend, its precondition in the storage transaction) and one ``memfs mcp`` over stdio."""
    text = "".join(f"{writer}-{i} todo\n" for i in range(LINES) for writer in "ab")
    memory = await client.create_memory(ms_store, "/shared.md", text)
    outcomes: dict[str, bool] = {}

    async def over_stdio() -> None:
        errors = tmp_path / "stderr"
        async with memfs_mcp(server.client_env(), ms_store, errlog=errors) as mcp:
            await edit_lines(Tools(mcp), "b", outcomes)

    async def http_writer() -> None:
        async with over_http(ms_url(server, ms_store), key_of(server)) as tools:
            await edit_lines(tools, "a", outcomes)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(http_writer)
        nursery.start_soon(over_stdio)
    final = (await client.get_memory(ms_store, memory.id)).content or ""
    for line, done in outcomes.items():
        assert f"{line} {'done' if done else 'todo'}\n" in final, (line, done, final)
    assert len(outcomes) == 2 * LINES
    assert sum(outcomes.values()) >= LINES


async def test_two_http_clients_on_databricks_lose_no_reported_edit(
    server: ServerProcess, workspace: Workspace
) -> None:
    """Databricks has no precondition on the wire: the server's backend compares the content in
    the write's transaction, so two agents editing one entry at once lose no reported edit."""
    store = workspace.create_store()
    workspace.put(
        store, "/shared.md", "".join(f"{w}-{i} todo\n" for i in range(LINES) for w in "ab")
    )
    outcomes: dict[str, bool] = {}

    async def writer(name: str) -> None:
        url = dbx_url(server, store, f"actor_id={ACTOR}")
        async with over_http(url, key_of(server)) as tools:
            await edit_lines(tools, name, outcomes)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer, "a")
        nursery.start_soon(writer, "b")
    final = workspace.content(store, "/shared.md") or ""
    for line, done in outcomes.items():
        assert f"{line} {'done' if done else 'todo'}\n" in final, (line, done, final)
    assert len(outcomes) == 2 * LINES
    assert sum(outcomes.values()) >= LINES


@pytest.fixture
def pg_server(pg_url: str, tmp_path: Path) -> Iterator[ServerProcess]:
    with ServerProcess(db=tmp_path / "unused.db", port=free_port(), db_url=pg_url) as proc:
        yield proc


async def test_both_apis_over_http_on_postgres(pg_server: ServerProcess) -> None:
    config = ClientConfig(api_key=Secret(pg_server.api_key), base_url=pg_server.base_url)
    async with StoreClient(config) as admin:
        store = await admin.create_store("on postgres")
        async with over_http(ms_url(pg_server, store.id), key_of(pg_server)) as tools:
            await tools.memory("create", path="/memories/p.md", file_text="pg\n")
            await tools.memory("str_replace", path="/memories/p.md", old_str="pg", new_str="PG")
            await tools.memory("rename", old_path="/memories/p.md", new_path="/memories/q.md")
        moved = await admin.find_memory(store.id, "/q.md")
        assert moved is not None
        assert (await admin.get_memory(store.id, moved.id)).content == "PG\n"
    with Workspace(pg_server) as workspace:
        dbx = workspace.create_store()
        query = f"actor_id={ACTOR}"
        async with over_http(dbx_url(pg_server, dbx, query), key_of(pg_server)) as tools:
            await tools.memory("create", path="/memories/d.md", file_text="one\n")
            await tools.memory("rename", old_path="/memories/d.md", new_path="/memories/e.md")
            await tools.memory("insert", path="/memories/e.md", insert_line=1, insert_text="two")
            found: Any = await tools.ok("search_memory", query="one")
            assert "/e.md" in found
        assert workspace.content(dbx, "/e.md") == "one\ntwo\n"
        assert workspace.content(dbx, "/d.md") is None


def test_the_names_a_server_may_be_reached_by() -> None:
    loopback = ["127.0.0.1", "localhost", "[::1]"]
    assert allowed_host_names("127.0.0.1") == loopback
    assert allowed_host_names("0.0.0.0", ["memory.example.com"]) == [
        *loopback,
        "memory.example.com",
    ]
    assert allowed_host_names("::") == loopback
    assert allowed_host_names("10.1.2.3") == ["10.1.2.3"]  # not localhost: another machine's
    assert allowed_host_names("[fd00::7]", [" ", "m.example"]) == ["[fd00::7]", "m.example"]
