"""The MCP tools against the real reference server over HTTP, through the official ``mcp``
client connected in process (memory streams, the JSON-RPC handshake of stdio): a fresh store
per test on the session's server, opened as ``memfs mcp`` opens it (``memfs.mcp.store_backend``).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from kit.databricks import ACTOR, Workspace, databricks_env
from kit.servers import ServerProcess
from memfs.api import StoreClient
from memfs.mcp.app import build_server
from memfs.mcp.backend import MemoryBackend, StoredMemory
from memfs.mcp.store_backend import StoreBackend, open_databricks, open_memory_stores


class Racing(StoreBackend):
    """The real backend, with another writer's change made right after the next read of a
    memory: what a concurrent writer between the tool's read and its write looks like, made
    at the one moment that matters (``race``: awaited once, given what was read)."""

    def __init__(self, inner: StoreBackend) -> None:
        super().__init__(inner.store, inner.info)
        self.races: list[Callable[[StoredMemory], Awaitable[None]]] = []

    async def read(self, path: str) -> StoredMemory | None:
        memory = await super().read(path)
        if memory is not None and self.races:
            await self.races.pop(0)(memory)
        return memory


class Tools:
    """An MCP client session on one store's tools; ``call`` returns (text, is_error)."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def call(self, name: str, **arguments: Any) -> tuple[str, bool]:
        result = await self.client.call_tool(name, arguments)
        assert len(result.content) == 1
        text = result.content[0].text  # type: ignore[union-attr]
        return text, bool(result.is_error)

    async def ok(self, name: str, **arguments: Any) -> str:
        text, error = await self.call(name, **arguments)
        assert not error, text
        return text

    async def refused(self, name: str, **arguments: Any) -> str:
        text, error = await self.call(name, **arguments)
        assert error, text
        return text

    async def memory(self, command: str, **arguments: Any) -> str:
        return await self.ok("memory", command=command, **arguments)

    async def names(self) -> list[str]:
        return sorted(tool.name for tool in (await self.client.list_tools()).tools)


LINES = 8  # per writer, in the tests of two writers editing one memory


async def edit_lines(tools: Tools, name: str, outcomes: dict[str, bool]) -> None:
    """Writer ``name``'s edits of /memories/shared.md (its lines ``name-i todo`` to ``done``),
    one call each; ``outcomes[name-i]``: reported done. A refusal must be the conflict's."""
    for i in range(LINES):
        answer, error = await tools.call(
            "memory",
            command="str_replace",
            path="/memories/shared.md",
            old_str=f"{name}-{i} todo",
            new_str=f"{name}-{i} done",
        )
        assert not error or "was changed by another writer" in answer, answer
        outcomes[f"{name}-{i}"] = not error


async def refuses_a_move_into_itself(tools: Tools) -> None:
    """``rename`` of a directory (or a file) into its own subtree fails as the SDKs'
    ``rename(2)`` does, and moves nothing."""
    await tools.memory("create", path="/memories/notes/a.md", file_text="a\n")
    for old, new in (
        ("/memories/notes", "/memories/notes/sub"),
        ("/memories/notes/", "/memories/notes/sub/deeper"),
        ("/memories/notes/a.md", "/memories/notes/a.md/b.md"),
    ):
        refused = await tools.refused("memory", command="rename", old_path=old, new_path=new)
        assert refused == f"[Errno 22] Invalid argument: '{old}' -> '{new}'"
    listed = await tools.memory("view", path="/memories")
    assert listed.splitlines()[1:] == [
        "2B\t/memories",
        "2B\t/memories/notes/",
        "2B\t/memories/notes/a.md",
    ]
    # a sibling that only starts with the same name is not inside it
    renamed = await tools.memory("rename", old_path="/memories/notes", new_path="/memories/notes2")
    assert renamed == "Successfully renamed /memories/notes to /memories/notes2"


@asynccontextmanager
async def connected(backend: MemoryBackend) -> AsyncIterator[Tools]:
    async with Client(build_server(backend), mode="legacy", raise_exceptions=True) as client:
        yield Tools(client)


@pytest.fixture
async def ms_store(client: StoreClient) -> str:
    """A fresh Memory Stores store on the session's server."""
    store = await client.create_store(f"mcp-{uuid.uuid4().hex[:8]}", description="for tests")
    return store.id


@pytest.fixture
def anthropic_env(server: ServerProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", server.api_key)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)


@pytest.fixture
def open_ms(ms_store: str, anthropic_env: None) -> Callable[..., Any]:
    """``open_ms(read_only=False)``: the store's backend, opened as ``memfs mcp`` does."""

    def opener(*, read_only: bool = False) -> Any:
        return open_memory_stores(ms_store, read_only=read_only)

    return opener


@pytest.fixture
def workspace(server: ServerProcess) -> Iterator[Workspace]:
    with Workspace(server) as ws:
        yield ws


@pytest.fixture
def dbx_store(
    server: ServerProcess, workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """A fresh Databricks store; the environment of a client of the server's Databricks API."""
    for name, value in databricks_env(server, tmp_path).items():
        monkeypatch.setenv(name, value)
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return workspace.create_store()


@pytest.fixture
def open_dbx(dbx_store: str) -> Callable[..., Any]:
    def opener(*, read_only: bool = False, session: str | None = None) -> Any:
        return open_databricks(dbx_store, ACTOR, session, read_only=read_only)

    return opener
