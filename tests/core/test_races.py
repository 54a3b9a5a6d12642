"""State read before an ``await`` is checked again after it (the concurrency rule of
``memfs.core``): each test lets a change made elsewhere, or another operation, run in the middle
of one, deterministically (a ``FakeStore`` hook runs inside the request the operation awaits).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from support.fake_store import FakeStore
from trio.testing import MockClock

from memfs.core.inodes import ROOT_INODE
from memfs.core.vfs import Vfs
from memfs.errors import NoEntryError

from .helpers import running_core


def deleted_elsewhere(vfs: Vfs, memory_id: str) -> Callable[[FakeStore], None]:
    """Another writer deletes ``memory_id`` and the change feed reports it to ``vfs``."""

    def hook(store: FakeStore) -> None:
        store.remove(memory_id)
        vfs.apply_versions([store.versions[-1]])

    return hook


async def test_a_read_racing_a_remote_delete_is_enoent(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    # The soak's EIO: the second read in a directory waits for a bulk fetch of it; the change
    # feed deletes the memory meanwhile, and the read went on with a memory id of None.
    store.seed("/d/a.md", "A\n")
    gone = store.seed("/d/b.md", "B\n")
    async with running_core(store, cache_dir) as core:
        vfs = core.vfs
        d = await core.ino("d")
        b = await core.ino("b.md", d)
        assert await core.read("a.md", d) == b"A\n"  # a first miss: one retrieve
        store.before_next("list_directory_page", deleted_elsewhere(vfs, gone.id))
        with pytest.raises(NoEntryError):
            await vfs.open(b, os.O_RDONLY)  # a second miss: the directory's bulk fetch
        assert store.calls["list_directory_page"] == 3  # the listings of / and /d, the bulk fetch
        assert [op for op, _ in store.raised] == []  # no retrieve of a memory id of None


async def test_a_rename_made_while_a_flush_uploads_the_file_is_flushed_too(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    # The create answers for the old path; the rename made meanwhile queues the file again.
    # A flush (directory fsync, unmount) runs it again instead of leaving it queued.
    async with running_core(store, cache_dir, queue=False) as core:
        vfs = core.vfs
        await core.save("a.md", b"A\n")
        gate = store.hold_next("create")
        errors: list[BaseException] = []

        async def flush() -> None:
            errors.extend(await vfs.flush_all())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(flush)
            await store.wait_calls("create", 1)
            await vfs.rename(ROOT_INODE, "a.md", ROOT_INODE, "b.md")
            gate.set()
        assert errors == []
        assert len(vfs.writeback) == 0 and core.records() == []
        assert store.contents() == {"/b.md": "A\n"}
