"""``memory_history``, ``memory_restore`` and ``memory_search`` on a Memory Stores store, and a
read-only store: which tools it is offered, and that each write is refused with nothing
changed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kit.hosted_like import hosted_like_client
from kit.servers import ServerProcess
from memfs.api import StoreClient
from memfs.api.store import MemoryStoresAPI, memory_stores_capabilities
from memfs.mcp.backend import StoreInfo
from memfs.mcp.store_backend import StoreBackend

from .conftest import Tools, connected
from .test_http import key_of, ms_url, over_http

MEMORY_STORES_TOOLS = ["memory", "memory_history", "memory_restore", "memory_search"]


async def test_history_newest_first_and_restore_even_after_a_delete(
    open_ms: Callable[..., Any], client: StoreClient, ms_store: str
) -> None:
    async with open_ms() as backend, connected(backend) as tools:
        assert await tools.names() == MEMORY_STORES_TOOLS
        await tools.memory("create", path="/memories/plan.md", file_text="v1\n")
        await tools.memory("str_replace", path="/memories/plan.md", old_str="v1", new_str="v2")
        history = (await tools.ok("memory_history", path="/memories/plan.md")).splitlines()
        assert history[0] == (
            "Versions of /memories/plan.md, newest first (id, time, operation, author, size, path):"
        )
        rows = [row.split("\t") for row in history[1:]]
        assert [(r[2], r[4], r[5]) for r in rows] == [
            ("modified", "3 bytes", "/memories/plan.md"),
            ("created", "3 bytes", "/memories/plan.md"),
        ]
        assert all(r[3].startswith("api ") for r in rows)  # who wrote it: our API key
        first = rows[1][0]
        one = await tools.ok("memory_history", path="/memories/plan.md", limit=1)
        assert len(one.splitlines()) == 2
        assert await tools.ok("memory_restore", path="/memories/plan.md", version_id=first) == (
            f"Restored /memories/plan.md from version {first}: written as a new version."
        )
        found = await client.find_memory(ms_store, "/plan.md")
        assert found is not None
        assert (await client.get_memory(ms_store, found.id)).content == "v1\n"
        assert await tools.ok("memory_restore", path="/memories/plan.md", version_id=first) == (
            f"/memories/plan.md already holds the content of version {first}; nothing changed."
        )
        # deleted: its history is still found by path, and a restore creates it again
        await tools.memory("delete", path="/memories/plan.md")
        history = (await tools.ok("memory_history", path="/memories/plan.md")).splitlines()
        assert [row.split("\t")[2] for row in history[1:]] == [
            "deleted",
            "modified",
            "modified",
            "created",
        ]
        assert await tools.ok("memory_restore", path="/memories/plan.md", version_id=first) == (
            f"Restored /memories/plan.md from version {first}: the memory was created again."
        )
        assert "v1" in await tools.memory("view", path="/memories/plan.md")
        # refusals
        deletion = history[1].split("\t")[0]
        assert await tools.refused(
            "memory_restore", path="/memories/plan.md", version_id=deletion
        ) == (
            f"Version {deletion} of /memories/plan.md holds no content (a deletion, or "
            "redacted): nothing to restore."
        )
        await tools.memory("create", path="/memories/other.md", file_text="o")
        assert (
            await tools.refused("memory_restore", path="/memories/other.md", version_id=first)
            == f"Version {first} is not a version of /memories/other.md."
        )
        assert (
            await tools.refused(
                "memory_restore", path="/memories/plan.md", version_id="memver_nope"
            )
            == "No version memver_nope in this store."
        )
        assert await tools.refused("memory_history", path="/memories/never.md") == (
            "The path /memories/never.md has no history: no memory was ever there."
        )
        assert await tools.refused("memory_history", path="/memories/../x") == (
            "Path /memories/../x would escape /memories directory"
        )
        assert await tools.refused("memory_history", path="/memories/plan.md", limit=0) == (
            "Invalid `limit` parameter: 0. It should be a whole number from 1 to 100."
        )


async def test_search_ranks_with_paths_the_memory_tool_takes(open_ms: Callable[..., Any]) -> None:
    async with open_ms() as backend, connected(backend) as tools:
        await tools.memory(
            "create", path="/memories/garden.md", file_text="# Garden\ntomatoes need sun\n"
        )
        await tools.memory("create", path="/memories/cooking.md", file_text="tomato sauce\n")
        await tools.memory("create", path="/memories/work.md", file_text="the report\n")
        answer = (await tools.ok("memory_search", query="tomatoes sun")).splitlines()
        assert answer[0] == (
            "2 memories match 'tomatoes sun', best first (path, relevance, best line):"
        )
        rows = [row.split("\t") for row in answer[1:]]
        assert [r[0] for r in rows] == ["/memories/garden.md", "/memories/cooking.md"]
        assert rows[0][1] == "100" and 1 <= int(rows[1][1]) < 100
        assert rows[0][2] == "tomatoes need sun"
        assert len((await tools.ok("memory_search", query="tomato", limit=1)).splitlines()) == 2
        assert await tools.ok("memory_search", query="zebra") == "No memory matches 'zebra'."
        assert await tools.refused("memory_search", query=" ... ") == (
            "The query has no word to look for."
        )


async def test_read_only_offers_no_writing_tool_and_refuses_every_write(
    open_ms: Callable[..., Any], client: StoreClient, ms_store: str
) -> None:
    created = await client.create_memory(ms_store, "/a.md", "keep\n")
    async with open_ms(read_only=True) as backend, connected(backend) as tools:
        assert await tools.names() == ["memory", "memory_history", "memory_search"]
        assert "keep" in await tools.memory("view", path="/memories/a.md")
        for command, arguments in (
            ("create", {"path": "/memories/b.md", "file_text": "x"}),
            ("str_replace", {"path": "/memories/a.md", "old_str": "keep", "new_str": "x"}),
            ("insert", {"path": "/memories/a.md", "insert_line": 0, "insert_text": "x"}),
            ("delete", {"path": "/memories/a.md"}),
            ("rename", {"old_path": "/memories/a.md", "new_path": "/memories/b.md"}),
        ):
            assert await tools.refused("memory", command=command, **arguments) == (
                f"The memory store is read-only: `{command}` was refused and nothing changed."
            )
        history = (await tools.ok("memory_history", path="/memories/a.md")).splitlines()
        version = history[1].split("\t")[0]
        assert (
            await tools.refused("memory_restore", path="/memories/a.md", version_id=version)
            == "The memory store is read-only: `memory_restore` was refused and nothing changed."
        )
    memories = [m async for m in client.list_memories(ms_store)]
    assert [(m.path, m.id) for m in memories] == [("/a.md", created.id)]
    assert (await client.get_memory(ms_store, created.id)).content == "keep\n"


async def test_without_server_search_a_local_index_answers_and_keeps_up(
    server: Any, ms_store: str
) -> None:
    async with hosted_like_client(server) as (client, transport):
        capabilities = await memory_stores_capabilities(client)
        info = StoreInfo("memory-stores", "hosted-like", False, True, False, True)
        backend = StoreBackend(MemoryStoresAPI(client, ms_store, capabilities), info)
        async with connected(backend) as tools:
            await tools.memory("create", path="/memories/garden.md", file_text="tomatoes\n")
            answer = await tools.ok("memory_search", query="tomatoes")
            assert answer.splitlines()[1].startswith("/memories/garden.md\t")
            await tools.memory("create", path="/memories/sauce.md", file_text="tomatoes, basil\n")
            answer = await tools.ok("memory_search", query="basil")
            assert [row.split("\t")[0] for row in answer.splitlines()[1:]] == ["/memories/sauce.md"]
        assert transport.capability_checks >= 1
        routes = client.stats.snapshot()["by_route"]
        assert not any("memfs/search" in route for route in routes)


async def shows_a_version_and_what_changed(tools: Tools) -> None:
    """``memory_history`` with ``version_id``: that version's content; with ``compare_to``
    too: the diff to another version or to the current content; the plain list unchanged."""
    await tools.memory("create", path="/memories/plan.md", file_text="one\ntwo\nthree\n")
    await tools.memory("str_replace", path="/memories/plan.md", old_str="two", new_str="2")
    await tools.memory("str_replace", path="/memories/plan.md", old_str="three", new_str="3")
    listed = (await tools.ok("memory_history", path="/memories/plan.md")).splitlines()
    newest, middle, first = (row.split("\t")[0] for row in listed[1:])
    shown = await tools.ok("memory_history", path="/memories/plan.md", version_id=first)
    assert shown.splitlines()[0].startswith(f"Version {first} of /memories/plan.md (created ")
    assert shown.splitlines()[1:] == ["     1\tone", "     2\ttwo", "     3\tthree", "     4\t"]
    diff = await tools.ok(
        "memory_history", path="/memories/plan.md", version_id=first, compare_to=middle
    )
    assert diff.splitlines() == [
        f"--- /memories/plan.md @ {first}",
        f"+++ /memories/plan.md @ {middle}",
        "@@ -1,3 +1,3 @@",
        " one",
        "-two",
        "+2",
        " three",
    ]
    to_now = await tools.ok(
        "memory_history", path="/memories/plan.md", version_id=middle, compare_to="current"
    )
    assert to_now.splitlines()[1:] == [
        "+++ /memories/plan.md (current)",
        "@@ -1,3 +1,3 @@",
        " one",
        " 2",
        "-three",
        "+3",
    ]
    assert await tools.ok(
        "memory_history", path="/memories/plan.md", version_id=newest, compare_to="current"
    ) == (
        f"No difference: /memories/plan.md @ {newest} and /memories/plan.md (current) hold "
        "the same content."
    )
    assert await tools.refused("memory_history", path="/memories/plan.md", compare_to=first) == (
        "`compare_to` needs `version_id`: the version to compare it with."
    )
    await tools.memory("create", path="/memories/other.md", file_text="o")
    assert await tools.refused("memory_history", path="/memories/other.md", version_id=first) == (
        f"Version {first} is not a version of /memories/other.md."
    )
    await tools.memory("delete", path="/memories/plan.md")
    history = (await tools.ok("memory_history", path="/memories/plan.md")).splitlines()
    deletion = history[1].split("\t")[0]
    assert await tools.refused("memory_history", path="/memories/plan.md", version_id=deletion) == (
        f"Version {deletion} of /memories/plan.md holds no content (a deletion, or redacted): "
        "nothing to show."
    )
    assert await tools.refused(
        "memory_history", path="/memories/plan.md", version_id=first, compare_to="current"
    ) == ("/memories/plan.md does not exist now: nothing current to compare with.")


async def test_history_shows_a_version_and_diffs(open_ms: Callable[..., Any]) -> None:
    async with open_ms() as backend, connected(backend) as tools:
        await shows_a_version_and_what_changed(tools)


async def test_history_shows_a_version_and_diffs_over_http(
    server: ServerProcess, ms_store: str
) -> None:
    async with over_http(ms_url(server, ms_store), key_of(server)) as tools:
        await shows_a_version_and_what_changed(tools)
