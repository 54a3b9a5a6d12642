"""The tools of a Databricks Agent Memory store (the reference server's Databricks API over
HTTP): the memory tool on the actor's entries, the four tools its docs ask users to write,
scoped to the actor (and session) fixed at start, the no-lost-update rule, read-only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kit.databricks import Workspace
from memfs.mcp.backend import StoredMemory

from .conftest import Racing, connected

DATABRICKS_TOOLS = [
    "forget_memory",
    "list_memories",
    "memory",
    "memory_search",
    "save_memory",
    "search_memory",
]


async def test_the_memory_tool_on_an_actors_entries(
    open_dbx: Callable[..., Any], dbx_store: str, workspace: Workspace
) -> None:
    workspace.put(dbx_store, "/other.md", "not mine\n", actor="someone-else")
    workspace.put(dbx_store, "/in-session.md", "session\n", session="s1")
    async with open_dbx() as backend, connected(backend) as tools:
        assert await tools.names() == DATABRICKS_TOOLS
        await tools.memory("create", path="/memories/notes/a.md", file_text="one\ntwo\n")
        assert await tools.memory("view", path="/memories") == (
            "Here're the files and directories up to 2 levels deep in /memories, excluding "
            "hidden items:\n8B\t/memories\n8B\t/memories/notes/\n8B\t/memories/notes/a.md"
        )
        await tools.memory("str_replace", path="/memories/notes/a.md", old_str="two", new_str="2")
        await tools.memory("insert", path="/memories/notes/a.md", insert_line=2, insert_text="3")
        assert (
            await tools.memory("rename", old_path="/memories/notes/a.md", new_path="/memories/b.md")
            == "Successfully renamed /memories/notes/a.md to /memories/b.md"
        )
        assert workspace.content(dbx_store, "/b.md") == "one\n2\n3\n"
        assert workspace.content(dbx_store, "/notes/a.md") is None
        assert await tools.refused("memory", command="view", path="/memories/other.md") == (
            "The path /memories/other.md does not exist. Please provide a valid path."
        )
        await tools.memory("delete", path="/memories/b.md")
        assert workspace.content(dbx_store, "/b.md") is None
    assert workspace.content(dbx_store, "/in-session.md", session="s1") == "session\n"


async def test_save_list_search_forget(
    open_dbx: Callable[..., Any], dbx_store: str, workspace: Workspace
) -> None:
    workspace.put(dbx_store, "/theirs.md", "tomatoes too\n", actor="someone-else")
    async with open_dbx() as backend, connected(backend) as tools:
        assert await tools.ok("list_memories") == "No memories saved yet."
        assert (
            await tools.ok(
                "save_memory", path="/prefs.md", content="likes tomatoes", description="tastes"
            )
            == "Saved /prefs.md (new)."
        )
        assert (
            await tools.ok("save_memory", path="/prefs.md", content="hates olives", append=True)
            == "Saved /prefs.md (appended)."
        )
        assert (
            await tools.ok("save_memory", path="/prefs.md", content="hates olives", append=True)
            == "/prefs.md already holds that; nothing changed."
        )
        entry = workspace.entries(dbx_store)[(None, "/prefs.md")]
        assert entry["content"] == "likes tomatoes\nhates olives"
        assert entry["description"] == "tastes"
        await tools.ok("save_memory", path="/facts/sky.md", content="the sky is blue")
        assert await tools.ok("list_memories") == (
            "2 memories (path, size, description):\n"
            "/facts/sky.md\t15 bytes\n"
            "/prefs.md\t27 bytes\ttastes"
        )
        found = (await tools.ok("search_memory", query="tomatoes")).splitlines()
        assert [row.split("\t")[0] for row in found[1:]] == ["/prefs.md"]  # the actor's only
        assert found[1].split("\t")[2] == "likes tomatoes"
        assert (
            await tools.ok("save_memory", path="/facts/sky.md", content="the sky is grey")
            == "Saved /facts/sky.md (replaced)."
        )
        assert workspace.content(dbx_store, "/facts/sky.md") == "the sky is grey"
        assert await tools.ok("forget_memory", path="/facts/sky.md") == "Forgot /facts/sky.md."
        assert await tools.refused("forget_memory", path="/facts/sky.md") == (
            "No memory at /facts/sky.md."
        )
        assert (await tools.refused("save_memory", path="notes", content="x")).startswith(
            "Invalid path notes: "
        )
        assert workspace.content(dbx_store, "/facts/sky.md") is None
    assert workspace.content(dbx_store, "/theirs.md") is None  # not ACTOR's: never touched
    assert workspace.entries(dbx_store, actor="someone-else")[(None, "/theirs.md")]


async def test_a_session_sees_and_writes_its_own_entries(
    open_dbx: Callable[..., Any], dbx_store: str, workspace: Workspace
) -> None:
    workspace.put(dbx_store, "/shared.md", "session-less\n")
    async with open_dbx(session="s9") as backend, connected(backend) as tools:
        assert await tools.ok("list_memories") == "No memories saved yet."
        await tools.ok("save_memory", path="/shared.md", content="in s9")
    assert workspace.content(dbx_store, "/shared.md", session="s9") == "in s9"
    assert workspace.content(dbx_store, "/shared.md") == "session-less\n"


async def test_concurrent_writers_on_databricks(
    open_dbx: Callable[..., Any], dbx_store: str, workspace: Workspace
) -> None:
    def other_writer(content: str) -> Any:
        async def race(memory: StoredMemory) -> None:
            entry = workspace.entries(dbx_store)[(None, memory.path)]
            workspace.patch(dbx_store, entry, content)

        return race

    async with open_dbx() as opened:
        backend = Racing(opened)
        async with connected(backend) as tools:
            await tools.ok("save_memory", path="/log.md", content="a\nb\n")
            backend.races.append(other_writer("a\nb\nc\n"))
            await tools.memory("str_replace", path="/memories/log.md", old_str="a", new_str="A")
            assert workspace.content(dbx_store, "/log.md") == "A\nb\nc\n"
            backend.races.append(other_writer("A\nb\nc\nd"))
            await tools.ok("save_memory", path="/log.md", content="e", append=True)
            assert workspace.content(dbx_store, "/log.md") == "A\nb\nc\nd\ne"
            backend.races.append(other_writer("theirs"))
            conflict = await tools.refused("save_memory", path="/log.md", content="mine")
            assert conflict == (
                "/log.md was not saved: another writer changed it after it was read; it now "
                "holds:\ntheirs"
            )
            assert workspace.content(dbx_store, "/log.md") == "theirs"


async def test_read_only_databricks(
    open_dbx: Callable[..., Any], dbx_store: str, workspace: Workspace
) -> None:
    workspace.put(dbx_store, "/a.md", "keep\n")
    async with open_dbx(read_only=True) as backend, connected(backend) as tools:
        assert await tools.names() == ["list_memories", "memory", "memory_search", "search_memory"]
        assert await tools.refused("save_memory", path="/a.md", content="x") == (
            "The memory store is read-only: `save_memory` was refused and nothing changed."
        )
        assert await tools.refused("forget_memory", path="/a.md") == (
            "The memory store is read-only: `forget_memory` was refused and nothing changed."
        )
        assert await tools.refused("memory", command="delete", path="/memories/a.md") == (
            "The memory store is read-only: `delete` was refused and nothing changed."
        )
    assert workspace.content(dbx_store, "/a.md") == "keep\n"
