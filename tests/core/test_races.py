"""State read before an ``await`` is checked again after it (the concurrency rule of
``memfs.core``): each test lets a change made elsewhere, or another operation, run in the middle
of one, deterministically (a ``FakeStore`` hook runs inside the request the operation awaits).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from trio.testing import MockClock

from kit.fake_store import FakeStore
from memfs.contract.errors import NoEntryError
from memfs.core.model.inodes import ROOT_INODE
from memfs.core.ops.vfs import Vfs

from .helpers import CONFIG, running_core

TWO_FILES = {"/a.md": "A\n", "/b.md": "B\n"}


def elsewhere(vfs: Vfs, memory_id: str, path: str | None = None) -> Callable[[FakeStore], None]:
    """A hook: another writer moves ``memory_id`` to ``path`` (None: deletes it), and the change
    feed reports it to ``vfs``."""

    def hook(store: FakeStore) -> None:
        if path is None:
            store.remove(memory_id)
        else:
            store.edit(memory_id, path=path)
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
        store.before_next("list_directory_page", elsewhere(vfs, gone.id))
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
        assert vfs.pending_uploads == 0 and core.records() == []
        assert store.contents() == {"/b.md": "A\n"}


async def test_a_rename_over_a_file_moved_elsewhere_meanwhile_leaves_it_alone(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    # mv a.md b.md loads a.md's content first (it travels without its memory); the change feed
    # moves b.md to c.md meanwhile: the rename is onto a free name now, and c.md is not touched
    target = {path: store.seed(path, content) for path, content in TWO_FILES.items()}["/b.md"]
    async with running_core(store, cache_dir) as core:
        for name in ("a.md", "b.md"):
            await core.ino(name)  # known: the kernel looked them up
        store.before_next("read", elsewhere(core.vfs, target.id, "/c.md"))
        await core.vfs.rename(ROOT_INODE, "a.md", ROOT_INODE, "b.md")
        await core.vfs.fsync_dir()
        assert store.contents() == {"/b.md": "A\n", "/c.md": "B\n"}
        assert store.head("/c.md").id == target.id
        assert await core.read("c.md") == b"B\n" and await core.read("b.md") == b"A\n"


async def test_an_unlink_of_an_open_file_moved_elsewhere_meanwhile_leaves_it_alone(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    # rm of a file a reader holds open loads its content first (the reader keeps it); the
    # change feed moves the file to c.md meanwhile: rm a.md does not delete c.md
    moved = store.seed("/a.md", "A\n")
    no_cache = dataclasses.replace(CONFIG, cache_bytes=0)  # the load is a request
    async with running_core(store, cache_dir, config=no_cache) as core:
        vfs = core.vfs
        fh, _ = await vfs.open(await core.ino("a.md"), os.O_RDONLY)
        store.before_next("read", elsewhere(vfs, moved.id, "/c.md"))
        with pytest.raises(NoEntryError):
            await vfs.unlink(ROOT_INODE, "a.md")
        await vfs.release(fh)
        await vfs.fsync_dir()
        assert store.contents() == {"/c.md": "A\n"}


async def test_a_new_file_renamed_over_a_memory_while_its_create_runs_keeps_that_memory(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    # cp x new.md; (a second later, while new.md is being created) mv new.md t.md: t.md keeps
    # its memory (and history), with the new content; the memory made for new.md is deleted
    target = store.seed("/t.md", "T\n")
    async with running_core(store, cache_dir, queue=False) as core:
        await core.ino("t.md")
        await core.save("new.md", b"N\n")
        gate = store.hold_next("create")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(core.vfs.fsync_dir)
            await store.wait_calls("create", 1)
            await core.vfs.rename(ROOT_INODE, "new.md", ROOT_INODE, "t.md")
            gate.set()
        await core.vfs.fsync_dir()
        assert store.contents() == {"/t.md": "N\n"}
        assert store.head("/t.md").id == target.id
        assert core.records() == [] and await core.read("t.md") == b"N\n"


async def test_a_directory_rename_while_the_deferred_deletes_below_it_run(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    # mv d e runs the deletes queued below d first; while it waits for one, the queue runs the
    # other (its grace window ended): the rename goes on without it
    for name in ("a.md", "b.md", "c.md"):
        store.seed(f"/d/{name}", f"{name}\n")
    async with running_core(store, cache_dir) as core:
        d = await core.ino("d")
        await core.vfs.unlink(d, "a.md")
        await core.vfs.unlink(d, "b.md")
        gate = store.hold_next("delete")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(core.vfs.rename, ROOT_INODE, "d", ROOT_INODE, "e")
            await store.wait_calls("delete", 2)  # the rename's, held; the queue's, done
            gate.set()
        assert store.contents() == {"/e/c.md": "c.md\n"}
        assert await core.read("c.md", await core.ino("e")) == b"c.md\n"


async def test_an_append_racing_a_remote_delete_creates_the_file_anew(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    # echo more >> a.md opens it with O_CREAT and loads its content; the change feed deletes it
    # meanwhile: O_CREAT makes the file anew (was ENOENT)
    gone = store.seed("/a.md", "A\n")
    append = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    async with running_core(store, cache_dir) as core:
        await core.ino("a.md")
        store.before_next("read", elsewhere(core.vfs, gone.id))
        fh, _ = await core.vfs.create(ROOT_INODE, "a.md", append)
        await core.vfs.write(fh, 0, b"more\n")
        await core.vfs.release(fh)  # (its close: the commit)
        await core.vfs.fsync_dir()
        assert store.contents() == {"/a.md": "more\n"}
