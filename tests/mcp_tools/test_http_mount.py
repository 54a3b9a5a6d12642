"""An edit through ``memfs server``'s MCP endpoint reaches a mount of the same store (its change
stream) within 0.5 s of the tool's answer, and an edit in the mount is what the next ``view``
shows (issue 22, *Done when*)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import trio

from kit.mounts import MountedStore
from kit.servers import ServerProcess
from kit.waiting import wait_for

from .test_http import key_of, ms_url, over_http

VISIBLE_WITHIN = 0.5  # seconds from the tool's answer to the mount's file (issue 22's goal)


async def test_an_edit_over_http_is_seen_in_a_mount_and_back(
    server: ServerProcess, mount_factory: Callable[..., MountedStore]
) -> None:
    mounted: Any = await trio.to_thread.run_sync(
        lambda: mount_factory(memories={"/note.md": "one\n"})
    )
    note = mounted.path / "note.md"
    assert await trio.to_thread.run_sync(note.read_text) == "one\n"
    async with over_http(ms_url(server, mounted.store_id), key_of(server)) as tools:
        await tools.memory("str_replace", path="/memories/note.md", old_str="one", new_str="two")
        answered = time.monotonic()

        def seen() -> float:  # the file polled every 5 ms, as a reader would see it
            wait_for(lambda: note.read_text() == "two\n", interval=0.005)
            return time.monotonic() - answered

        took = await trio.to_thread.run_sync(seen)
        assert took < VISIBLE_WITHIN, f"the edit was seen in the mount after {took:.3f} s"

        def edit_in_the_mount() -> None:
            note.write_text("three\n")
            mounted.settle()  # uploaded

        await trio.to_thread.run_sync(edit_in_the_mount)
        viewed = await tools.memory("view", path="/memories/note.md")
        assert "     1\tthree\n" in viewed, viewed
