"""What the write-back journal records (docs/writeback.md, invariant 1): one record per pending
change, named after the daemon's life and the change's key, describing exactly the state the
queue will upload; nothing for what is never uploaded."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import trio
from trio.testing import MockClock

from kit.fake_store import FakeStore
from memfs.contract.errors import NotUtf8Error
from memfs.core.build import build_core
from memfs.core.model.inodes import ROOT_INODE
from memfs.core.ops.durable import DROP_FLUSH_DELAY

from .helpers import CONFIG, running_core


async def test_records_are_named_after_the_daemon_life_and_the_key(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    memory = store.seed("/d.md", "x\n")
    async with running_core(store, cache_dir, queue=False) as core:
        durable = core.vfs.parts.durable
        # the life: this daemon's start in milliseconds, so two daemons never share a name
        assert abs(int(durable.life, 16) - time.time() * 1000) < 60_000
        ino = await core.save("n.md", b"n\n")
        await core.vfs.unlink(ROOT_INODE, "d.md")
        names = {r.name for r in core.records()}
        assert names == {f"{durable.life}-n{ino}", f"{durable.life}-d-{memory.id}"}
        assert durable.name_of(("replay", "older-n7")) == "older-n7"
        assert durable.describe(("delete", memory.id)) == "delete /d.md"
        assert durable.path_of(ino) == "/n.md"
        assert durable.path_of(10_000) is None
        assert durable.path_of(("conflict", 1)) is None
        assert durable.path_of(("delete", "mem_unknown")) is None
        assert durable.path_of(("other", 1)) is None
        assert durable.describe(10_000) == f"{durable.life}-n10000"
        assert durable.untouched == 0 and durable.replayed == 0


async def test_a_delete_is_described_by_the_path_the_server_has(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    memory = store.seed("/m.md", "x\n")
    async with running_core(store, cache_dir, queue=False) as core:
        await core.vfs.rename(ROOT_INODE, "m.md", ROOT_INODE, "n.md")
        await core.vfs.unlink(ROOT_INODE, "n.md")  # before the move was uploaded
        [record] = core.records()
        assert (record.op, record.memory_id, record.remote_path) == ("delete", memory.id, "/m.md")
        assert core.vfs.parts.durable.path_of(("delete", memory.id)) == "delete /m.md"


async def test_a_new_empty_file_is_recorded_empty(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    async with running_core(store, cache_dir, queue=False) as core:
        fh, attr = await core.vfs.create(ROOT_INODE, "n.md", os.O_WRONLY | os.O_CREAT)
        await core.vfs.flush(fh)
        [record] = core.records()
        assert (record.name, record.memory_id, record.data) == (
            core.vfs.parts.durable.name_of(attr.ino),
            None,
            b"",
        )
        await core.vfs.release(fh)


def test_a_read_only_mount_reports_the_records_it_leaves(store: FakeStore) -> None:
    vfs = build_core(store, CONFIG, untouched=2)
    assert vfs.parts.durable.untouched == 2


async def test_nothing_is_recorded_for_what_is_never_uploaded(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    async with running_core(store, cache_dir, queue=False) as core:
        vfs = core.vfs
        swap = await core.save(".notes.md.swp", b"editor scratch\n")  # a local-only name
        directory = (await vfs.mkdir(ROOT_INODE, "dir")).ino
        gone = await core.save("gone.md", b"x\n")
        await vfs.unlink(ROOT_INODE, "gone.md")
        for key in (swap, directory, gone, 10_000):
            vfs.parts.writeback.schedule(
                key, 0
            )  # queued anyway: the queue runs it, and it is a no-op
        assert core.records() == []
        assert core.journal.writes == 1  # gone.md's own, dropped at its unlink


async def test_a_move_of_a_clean_file_records_no_content(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    store.seed("/m.md", "server content\n")
    async with running_core(store, cache_dir, queue=False) as core:
        vfs = core.vfs
        fh, _ = await vfs.open(await core.ino("m.md"), os.O_RDWR)  # loads the content
        await vfs.rename(ROOT_INODE, "m.md", ROOT_INODE, "n.md")
        [record] = core.records()
        assert (record.path, record.remote_path, record.data) == ("/n.md", "/m.md", None)
        await vfs.release(fh)


async def test_a_refused_content_leaves_the_move_recorded_without_it(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    memory = store.seed("/m.md", "text\n")
    async with running_core(store, cache_dir, queue=False) as core:
        vfs = core.vfs
        await vfs.rename(ROOT_INODE, "m.md", ROOT_INODE, "n.md")
        fh, _ = await vfs.open(await core.ino("n.md"), os.O_WRONLY | os.O_TRUNC)
        await vfs.write(fh, 0, b"\xff\xfe not UTF-8")
        with pytest.raises(NotUtf8Error):
            await vfs.flush(fh)
        [record] = core.records()  # the move still goes, the content never does
        assert (record.op, record.memory_id, record.path, record.data) == (
            "put",
            memory.id,
            "/n.md",
            None,
        )
        # a new file whose content is refused is not recorded at all
        fh2, _ = await vfs.create(ROOT_INODE, "new.md", os.O_WRONLY | os.O_CREAT)
        await vfs.write(fh2, 0, b"\xff")
        with pytest.raises(NotUtf8Error):
            await vfs.flush(fh2)
        vfs.parts.writeback.schedule((await core.ino("new.md")), 0)
        assert [r.path for r in core.records()] == ["/n.md"]
        # reported apart, for the status and the unmount report
        assert vfs.parts.durable.refusals.status()["files"] == ["/n.md", "/new.md"]
        await vfs.release(fh)
        await vfs.release(fh2)


async def test_a_delete_undone_and_done_again_is_recorded_again(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    """Rule 3: a file re-created in time takes its memory back (the delete is cancelled and
    its record dropped); unlinked again, the same delete must be on disk again."""
    memory = store.seed("/d.md", "x\n")
    async with running_core(store, cache_dir, queue=False) as core:
        vfs = core.vfs
        await vfs.unlink(ROOT_INODE, "d.md")
        [first] = core.records()
        fh, _ = await vfs.create(ROOT_INODE, "d.md", os.O_WRONLY | os.O_CREAT)
        assert vfs.parts.state.table.by_id.get(memory.id) is not None  # adopted
        assert core.records() == []
        await vfs.release(fh)
        await vfs.unlink(ROOT_INODE, "d.md")
        [again] = core.records()
        assert (again.name, again.op, again.base_sha) == (first.name, "delete", first.base_sha)


async def test_an_uploads_drop_waits_for_a_flush_and_a_cancels_is_flushed_at_once(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    """One ``fdatasync`` a commit: the drop of what the server has rides on the next flush (or
    ``DropFlusher``'s, ``DROP_FLUSH_DELAY`` later); the drop of a change superseded here (a
    replay would undo the unlink) is flushed before the unlink returns."""
    async with running_core(store, cache_dir) as core:
        journal, durable = core.journal, core.vfs.parts.durable
        await core.save("b.md", b"b\n")  # waits for its upload: recorded, flushed
        uploaded = await core.save("c.md", b"c\n")
        await core.vfs.parts.writeback.flush(uploaded)
        assert [r.path for r in core.records()] == ["/b.md"] and journal.unflushed
        await core.vfs.unlink(ROOT_INODE, "b.md")  # before its upload: cancelled
        assert core.records() == [] and not journal.unflushed
        assert "/b.md" not in store.contents()
        uploaded = await core.save("d.md", b"d\n")
        await core.vfs.parts.writeback.flush(uploaded)
        assert journal.unflushed
        async with trio.open_nursery() as nursery:
            await nursery.start(durable.flusher.run)
            await trio.sleep(DROP_FLUSH_DELAY * 0.9)
            assert journal.unflushed
            await trio.sleep(DROP_FLUSH_DELAY * 0.2)
            assert not journal.unflushed
            nursery.cancel_scope.cancel()
