"""The ``memory`` tool on a Memory Stores store: every command and message of the contract
(docs/mcp.md: the SDK's ``BetaLocalFilesystemMemoryTool``, word for word),
paths that escape, and the no-lost-update rule against a real concurrent writer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memfs.api import StoreClient
from memfs.mcp.backend import StoredMemory

from .conftest import Racing, connected, refuses_a_move_into_itself

TODO = "- [ ] milk\n- [ ] eggs\n- [ ] bread\n"


async def test_every_command_and_its_success_message(
    open_ms: Callable[..., Any], client: StoreClient, ms_store: str
) -> None:
    async with open_ms() as backend, connected(backend) as tools:
        view = await tools.memory("view", path="/memories")
        assert view == (
            "Here're the files and directories up to 2 levels deep in /memories, excluding "
            "hidden items:\n0B\t/memories"
        )
        assert (
            await tools.memory("create", path="/memories/notes/todo.md", file_text=TODO)
            == "File created successfully at: /memories/notes/todo.md"
        )
        await tools.memory("create", path="/memories/a/b/c/deep.md", file_text="x")
        await tools.memory("create", path="/memories/.hidden/h.md", file_text="h")
        await tools.memory("create", path="/memories/top.md", file_text="top\n")
        assert await tools.memory("view", path="/memories") == (
            "Here're the files and directories up to 2 levels deep in /memories, excluding "
            "hidden items:\n"
            "40B\t/memories\n"
            "1B\t/memories/a/\n"
            "1B\t/memories/a/b/\n"
            "34B\t/memories/notes/\n"
            "34B\t/memories/notes/todo.md\n"
            "4B\t/memories/top.md"
        )
        assert await tools.memory("view", path="/memories/notes/todo.md") == (
            "Here's the content of /memories/notes/todo.md with line numbers:\n"
            "     1\t- [ ] milk\n     2\t- [ ] eggs\n     3\t- [ ] bread\n     4\t"
        )
        assert await tools.memory("view", path="/memories/notes/todo.md", view_range=[2, -1]) == (
            "Here's the content of /memories/notes/todo.md with line numbers:\n"
            "     2\t- [ ] eggs\n     3\t- [ ] bread\n     4\t"
        )
        assert await tools.memory(
            "str_replace", path="/memories/notes/todo.md", old_str="[ ] eggs", new_str="[x] eggs"
        ) == (
            "The memory file has been edited. Here is the snippet showing the change (with line "
            "numbers):\n     1\t- [ ] milk\n     2\t- [x] eggs\n     3\t- [ ] bread\n     4\t"
        )
        assert (
            await tools.memory(
                "insert", path="/memories/notes/todo.md", insert_line=0, insert_text="# Todo\n"
            )
            == "The file /memories/notes/todo.md has been edited."
        )
        before = await client.find_memory(ms_store, "/notes/todo.md")
        assert (
            await tools.memory(
                "rename", old_path="/memories/notes/todo.md", new_path="/memories/done/todo.md"
            )
            == "Successfully renamed /memories/notes/todo.md to /memories/done/todo.md"
        )
        after = await client.find_memory(ms_store, "/done/todo.md")
        assert before is not None and after is not None and after.id == before.id  # kept
        memory = await client.get_memory(ms_store, after.id)
        assert memory.content == "# Todo\n- [ ] milk\n- [x] eggs\n- [ ] bread\n"
        await tools.memory("rename", old_path="/memories/a", new_path="/memories/z")
        assert await client.find_memory(ms_store, "/z/b/c/deep.md") is not None
        assert (
            await tools.memory("delete", path="/memories/done/todo.md")
            == "Successfully deleted /memories/done/todo.md"
        )
        assert (
            await tools.memory("delete", path="/memories/z") == "Successfully deleted /memories/z"
        )
        assert await client.find_memory(ms_store, "/done/todo.md") is None
        assert await client.find_memory(ms_store, "/z/b/c/deep.md") is None
        assert await client.find_memory(ms_store, "/top.md") is not None


async def test_every_refusal_of_the_contract(open_ms: Callable[..., Any]) -> None:
    async with open_ms() as backend, connected(backend) as tools:
        await tools.memory("create", path="/memories/a.md", file_text="one\ntwo\none\n")
        await tools.memory("create", path="/memories/dir/b.md", file_text="b")
        cases: list[tuple[dict[str, Any], str]] = [
            (
                {"command": "view", "path": "/etc/passwd"},
                "Path must start with /memories, got: /etc/passwd",
            ),
            (
                {"command": "view", "path": "/memoriesx/a"},
                "Path must start with /memories, got: /memoriesx/a",
            ),
            (
                {"command": "view", "path": "/memories/../etc"},
                "Path /memories/../etc would escape /memories directory",
            ),
            (
                {"command": "create", "path": "/memories/dir/../../x", "file_text": ""},
                "Path /memories/dir/../../x would escape /memories directory",
            ),
            (
                {"command": "view", "path": "/memories/nope.md"},
                "The path /memories/nope.md does not exist. Please provide a valid path.",
            ),
            (
                {"command": "create", "path": "/memories/a.md", "file_text": "x"},
                "File /memories/a.md already exists",
            ),
            (
                {"command": "create", "path": "/memories/dir", "file_text": "x"},
                "File /memories/dir already exists",
            ),
            (
                {
                    "command": "str_replace",
                    "path": "/memories/a.md",
                    "old_str": "three",
                    "new_str": "3",
                },
                "No replacement was performed, old_str `three` did not appear verbatim in "
                "/memories/a.md.",
            ),
            (
                {
                    "command": "str_replace",
                    "path": "/memories/a.md",
                    "old_str": "one",
                    "new_str": "1",
                },
                "No replacement was performed. Multiple occurrences of old_str `one` in lines: "
                "1, 3. Please ensure it is unique",
            ),
            (
                {
                    "command": "str_replace",
                    "path": "/memories/nope.md",
                    "old_str": "a",
                    "new_str": "b",
                },
                "The path /memories/nope.md does not exist. Please provide a valid path.",
            ),
            (
                {"command": "str_replace", "path": "/memories/dir", "old_str": "a", "new_str": "b"},
                "The path /memories/dir is not a file.",
            ),
            (
                {
                    "command": "insert",
                    "path": "/memories/a.md",
                    "insert_line": 4,
                    "insert_text": "x",
                },
                "Invalid `insert_line` parameter: 4. It should be within the range [0, 3].",
            ),
            (
                {
                    "command": "insert",
                    "path": "/memories/a.md",
                    "insert_line": -1,
                    "insert_text": "x",
                },
                "Invalid `insert_line` parameter: -1. It should be within the range [0, 3].",
            ),
            (
                {"command": "delete", "path": "/memories"},
                "Cannot delete the /memories directory itself",
            ),
            (
                {"command": "delete", "path": "/memories/"},
                "Cannot delete the /memories directory itself",
            ),
            (
                {"command": "delete", "path": "/memories/nope.md"},
                "The path /memories/nope.md does not exist",
            ),
            (
                {
                    "command": "rename",
                    "old_path": "/memories/a.md",
                    "new_path": "/memories/dir/b.md",
                },
                "The destination /memories/dir/b.md already exists",
            ),
            (
                {"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/dir"},
                "The destination /memories/dir already exists",
            ),
            (
                {"command": "rename", "old_path": "/memories", "new_path": "/memories/x"},
                "Cannot rename the /memories directory itself",
            ),
            (
                {"command": "rename", "old_path": "/memories/nope", "new_path": "/memories/x"},
                "The path /memories/nope does not exist",
            ),
            ({"command": "chmod", "path": "/memories/a.md"}, "Unknown command: chmod"),
            ({"command": "view"}, "Missing parameter `path` for command `view`"),
        ]
        for arguments, message in cases:
            assert await tools.refused("memory", **arguments) == message, arguments
        # nothing of it changed the store
        assert await tools.memory("view", path="/memories/a.md") == (
            "Here's the content of /memories/a.md with line numbers:\n"
            "     1\tone\n     2\ttwo\n     3\tone\n     4\t"
        )
        assert [m.path for m in await backend.list_below("/")] == ["/a.md", "/dir/b.md"]
        bad = await tools.refused(
            "memory", command="create", path="/memories/a\x07.md", file_text=""
        )
        assert bad.startswith("Path /memories/a\x07.md is not a valid memory path: ")


async def test_a_move_into_its_own_subtree_is_refused(open_ms: Callable[..., Any]) -> None:
    async with open_ms() as backend, connected(backend) as tools:
        await refuses_a_move_into_itself(tools)


async def test_a_concurrent_edit_is_never_lost(
    open_ms: Callable[..., Any], client: StoreClient, ms_store: str
) -> None:
    async def other_writer(content: str) -> Any:
        async def race(memory: StoredMemory) -> None:
            await client.update_memory(ms_store, memory.id, content=content)

        return race

    async with open_ms() as opened:
        backend = Racing(opened)
        async with connected(backend) as tools:
            await tools.memory("create", path="/memories/list.md", file_text="alpha\nbeta\ngamma\n")
            # str_replace: the other writer changed another line; the edit still applies once
            backend.races.append(await other_writer("alpha\nbeta\ngamma\ndelta\n"))
            await tools.memory(
                "str_replace", path="/memories/list.md", old_str="beta", new_str="BETA"
            )
            assert backend.races == []
            found = await client.find_memory(ms_store, "/list.md")
            assert found is not None
            stored = await client.get_memory(ms_store, found.id)
            assert stored.content == "alpha\nBETA\ngamma\ndelta\n"  # both edits kept
            # str_replace: the other writer made old_str ambiguous: a conflict, nothing written
            backend.races.append(await other_writer("alpha\nBETA\nBETA\n"))
            conflict = await tools.refused(
                "memory",
                command="str_replace",
                path="/memories/list.md",
                old_str="BETA",
                new_str="b",
            )
            assert conflict == (
                "No replacement was performed: /memories/list.md was changed by another writer "
                "after it was read, and old_str `BETA` now appears 2 times. It now holds:\n"
                "     1\talpha\n     2\tBETA\n     3\tBETA\n     4\t"
            )
            assert (await client.get_memory(ms_store, found.id)).content == "alpha\nBETA\nBETA\n"
            # insert: the other writer appended; the lines before the insertion are unchanged
            backend.races.append(await other_writer("alpha\nBETA\nBETA\nomega\n"))
            await tools.memory("insert", path="/memories/list.md", insert_line=1, insert_text="one")
            assert (await client.get_memory(ms_store, found.id)).content == (
                "alpha\none\nBETA\nBETA\nomega\n"
            )
            # insert: the other writer rewrote the place of the insertion: a conflict
            backend.races.append(await other_writer("x\ny\n"))
            conflict = await tools.refused(
                "memory", command="insert", path="/memories/list.md", insert_line=2, insert_text="z"
            )
            assert conflict.startswith(
                "No insertion was performed: /memories/list.md was changed by another writer "
                "after it was read, and line 2 no longer marks one place in it. It now holds:\n"
            )
            assert (await client.get_memory(ms_store, found.id)).content == "x\ny\n"
            # delete: a file changed after it was read is kept, and the answer shows it
            backend.races.append(await other_writer("keep me\n"))
            conflict = await tools.refused("memory", command="delete", path="/memories/list.md")
            assert conflict == (
                "/memories/list.md was not deleted: another writer changed it after it was read. "
                "It now holds:\n     1\tkeep me\n     2\t"
            )
            assert (await client.get_memory(ms_store, found.id)).content == "keep me\n"

            # deleted by the other writer between the read and the write
            async def deleter(memory: StoredMemory) -> None:
                await client.delete_memory(ms_store, memory.id)

            backend.races.append(deleter)
            gone = await tools.refused(
                "memory",
                command="str_replace",
                path="/memories/list.md",
                old_str="keep",
                new_str="k",
            )
            assert gone == (
                "The file /memories/list.md no longer exists (may have been deleted or renamed "
                "concurrently)."
            )
