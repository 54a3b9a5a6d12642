"""The write-back queue of a core on the fake store (docs/writeback.md, "States of a file"):
when uploads run, transient failures retried for the mount's life, permanent ones reported to
fsync and close with their errno and kept in the journal, a full store that waits for room, and
a store deleted while mounted whose pending changes are handed over as plain files."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
import trio
from trio.testing import MockClock

from kit.fake_store import FakeStore, unavailable
from kit.waiting import wait_until
from memfs.contract.errors import (
    ApiConnectionError,
    BadRequestError,
    NoSpaceError,
    RemoteUnavailableError,
    StoreFullError,
    StoreGoneError,
    errno_for,
)
from memfs.contract.store_api import Capabilities
from memfs.core.model.inodes import ROOT_INODE

from .helpers import CONFIG, running_core


async def test_saves_collapse_into_one_upload_after_the_delay(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    asked_at: list[float] = []
    store.before_next("create", lambda _: asked_at.append(trio.current_time()))
    async with running_core(store, cache_dir) as core:
        start = trio.current_time()
        for n in range(3):
            await core.save("n.md", f"take {n}\n".encode())
        assert core.journal.writes == 3  # every close is durable at once
        await store.wait_calls("create", 1)
        await wait_until(lambda: core.records() == [])
        assert asked_at[0] >= start + CONFIG.new_file_delay  # left alone that long first
        await core.save("n.md", b"take 3\n")
        await core.save("n.md", b"take 4\n")
        await store.wait_calls("update", 1)
        await wait_until(lambda: core.records() == [])
        await core.vfs.fsync_dir()
    assert store.calls["create"] == store.calls["update"] == 1
    assert store.contents() == {"/n.md": "take 4\n"}


async def test_a_commit_already_journaled_is_not_written_again(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    async with running_core(store, cache_dir, queue=False) as core:
        vfs = core.vfs
        fh, attr = await vfs.create(ROOT_INODE, "n.md", os.O_WRONLY | os.O_CREAT)
        await vfs.write(fh, 0, b"x\n")
        await vfs.flush(fh)
        await vfs.flush(fh)
        vfs.parts.writeback.schedule(attr.ino, 0)
        assert core.journal.writes == 1
        await vfs.write(fh, 2, b"y\n")
        await vfs.flush(fh)
        await vfs.release(fh)
        assert core.journal.writes == 2
        [record] = core.records()
        assert record.data == b"x\ny\n"


async def test_transient_failures_are_retried_in_the_background(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    store.fail_next("create", times=3, error=unavailable)
    async with running_core(store, cache_dir) as core:
        durable = core.vfs.parts.durable
        ino = await core.save("n.md", b"eventually\n")
        await wait_until(lambda: durable.retrying)
        [(name, (path, why))] = durable.retrying.items()
        assert name == f"{durable.life}-n{ino}"  # the record's name: this daemon's, this inode's
        assert path == "/n.md" and why.startswith("InternalServerError: 503")
        [entry] = durable.not_uploaded()
        assert entry == {
            "op": "put",
            "path": "/n.md",
            "why": why,
            "kept_in": str(core.journal.directory),
        }
        await store.wait_calls("create", 4)
        await wait_until(lambda: core.records() == [])
        assert durable.retrying == {} and durable.failed == {}
    assert store.contents() == {"/n.md": "eventually\n"}


async def test_fsync_gives_up_with_eio_and_the_change_stays_queued(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    store.fail_next("create", times=1000)
    async with running_core(store, cache_dir) as core:
        vfs = core.vfs
        fh, _ = await vfs.create(ROOT_INODE, "n.md", os.O_WRONLY | os.O_CREAT)
        await vfs.write(fh, 0, b"later\n")
        start = trio.current_time()
        with pytest.raises(RemoteUnavailableError) as raised:
            await vfs.fsync(fh)
        assert errno_for(raised.value) == errno.EIO
        assert trio.current_time() - start >= CONFIG.fsync_timeout
        await vfs.release(fh)
        assert [r.path for r in core.records()] == ["/n.md"]
        store.heal()  # the server is back: the queue gets it there on its own
        await wait_until(lambda: store.at("/n.md"), timeout=120)
        await wait_until(lambda: core.records() == [])
    assert store.contents() == {"/n.md": "later\n"}


async def test_a_permanent_failure_is_reported_to_fsync_and_close_and_kept(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    def refused() -> BaseException:
        return BadRequestError("path: not allowed here")

    store.fail_next("create", error=refused)
    async with running_core(store, cache_dir) as core:
        vfs = core.vfs
        # fsync: the upload runs now, its refusal is the answer
        fh, _ = await vfs.create(ROOT_INODE, "f.md", os.O_WRONLY | os.O_CREAT)
        await vfs.write(fh, 0, b"fsynced\n")
        with pytest.raises(BadRequestError) as raised:
            await vfs.fsync(fh)
        assert errno_for(raised.value) == errno.EINVAL
        await vfs.release(fh)  # commits again: a new attempt, which gets through
        await vfs.fsync_dir()
        assert store.contents() == {"/f.md": "fsynced\n"}
        store.fail_next("create", error=refused)

        # close: the upload runs later, in the background; the next close hears it
        fh, attr = await vfs.create(ROOT_INODE, "n.md", os.O_WRONLY | os.O_CREAT)
        await vfs.write(fh, 0, b"closed\n")
        await vfs.flush(fh)
        await wait_until(lambda: any(p == "/n.md" for p, _ in vfs.parts.durable.failed.values()))
        [(name, (path, why))] = vfs.parts.durable.failed.items()
        assert (name, path) == (vfs.parts.durable.name_of(attr.ino), "/n.md")
        assert why == "BadRequestError: 400 invalid_request_error: path: not allowed here"
        [entry] = vfs.parts.durable.not_uploaded()
        assert (entry["op"], entry["path"], entry["why"]) == ("put", "/n.md", why)
        assert [r.name for r in core.records()] == [name]  # kept for the next mount
        with pytest.raises(BadRequestError):
            await vfs.fsync_dir()  # the file's content is not on the server
        with pytest.raises(BadRequestError) as raised:
            await vfs.flush(fh)  # a close of the open that wrote it
        assert errno_for(raised.value) == errno.EINVAL
        await vfs.flush(fh)  # heard once
        await vfs.release(fh)
        await vfs.fsync_dir()  # those closes committed it again: the retry gets through
        assert vfs.parts.durable.failed == {} and core.records() == []
    assert store.contents() == {"/f.md": "fsynced\n", "/n.md": "closed\n"}


async def test_a_full_store_waits_for_room_and_uploads_once_there_is_some(
    autojump_clock: MockClock, cache_dir: Path
) -> None:
    store = FakeStore(capabilities=Capabilities(max_memories=2))
    store.seed("/one.md", "1\n")
    store.seed("/two.md", "2\n")
    async with running_core(store, cache_dir) as core:
        vfs = core.vfs
        fh, attr = await vfs.create(ROOT_INODE, "new.md", os.O_WRONLY | os.O_CREAT)
        await vfs.write(fh, 0, b"waiting\n")
        with pytest.raises(StoreFullError) as raised:
            await vfs.fsync(fh)
        assert errno_for(raised.value) == errno.ENOSPC
        await vfs.release(fh)  # commits it again: refused again
        await store.wait_calls("create", 2)
        await wait_until(lambda: vfs.waiting_for_room)
        assert vfs.waiting_for_room == {attr.ino}
        assert not vfs.parts.writeback.pending(attr.ino)  # not retried in a loop: it waits
        assert [r.path for r in core.records()] == ["/new.md"]  # kept meanwhile
        with pytest.raises(NoSpaceError) as no_space:
            await vfs.fsync_dir()  # tries again: still full
        assert errno_for(no_space.value) == errno.ENOSPC
        creates = store.calls["create"]
        assert creates == 3
        # room appears: this mount's own delete makes it
        await vfs.unlink(ROOT_INODE, "one.md")
        await store.wait_calls("create", creates + 1)
        await wait_until(lambda: core.records() == [])
        assert vfs.waiting_for_room == set()
        await vfs.fsync_dir()
    assert store.contents() == {"/two.md": "2\n", "/new.md": "waiting\n"}
    assert [v.operation for v in store.versions if v.path == "/new.md"] == ["created"]


async def test_room_made_elsewhere_is_used_by_the_next_directory_fsync(
    autojump_clock: MockClock, cache_dir: Path
) -> None:
    store = FakeStore(capabilities=Capabilities(max_memories=1))
    other = store.seed("/other.md", "x\n")
    async with running_core(store, cache_dir) as core:
        await core.save("new.md", b"waiting\n")
        with pytest.raises(NoSpaceError):
            await core.vfs.fsync_dir()
        store.remove(other.id)
        await core.vfs.fsync_dir()
        assert core.records() == []
    assert store.contents() == {"/new.md": "waiting\n"}


async def test_a_deleted_store_hands_the_pending_changes_over_as_files(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    store.seed("/moving.md", "travels\n")
    store.seed("/doomed.md", "bye\n")
    async with running_core(store, cache_dir, queue=False) as core:
        vfs = core.vfs
        assert await core.read("moving.md") == b"travels\n"  # its content is cached
        await vfs.rename(ROOT_INODE, "moving.md", ROOT_INODE, "moved.md")
        await vfs.unlink(ROOT_INODE, "doomed.md")
        new = await core.save("new.md", b"fresh\n")
        store.delete_store()
        with pytest.raises(StoreGoneError) as raised:
            await vfs.parts.writeback.flush(
                new
            )  # its 404 is the store's own: nothing is tried more
        assert errno_for(raised.value) == errno.ENODEV
        assert vfs.gone_since is not None
        errors = await vfs.flush_all()
        assert len(errors) == 2 and all(isinstance(e, StoreGoneError) for e in errors)
        assert store.calls["delete"] == store.calls["update"] == 0
        with pytest.raises(StoreGoneError):
            await core.save("later.md", b"refused\n")
        handed = vfs.hand_over()
        assert handed is not None
        directory, lines = handed
        assert core.records() == []
        assert vfs.parts.durable.failed == {} and vfs.parts.durable.retrying == {}
        assert vfs.hand_over() is None  # nothing left
    assert directory.parent == cache_dir / store.store_id
    assert (directory / "new.md").read_bytes() == b"fresh\n"
    assert (directory / "moved.md").read_bytes() == b"travels\n"
    assert sorted(lines) == sorted(
        [
            f"/new.md -> {directory / 'new.md'}",
            f"/moved.md -> {directory / 'moved.md'}",
            "delete of /doomed.md: not done",
        ]
    )


async def test_handing_over_forgets_every_record_and_its_state(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    """Records of an earlier daemon, one retrying, one failed, one never tried: all handed
    over, none left to replay or to report."""
    async with running_core(store, cache_dir, queue=False) as core:
        await core.save("old.md", b"from the last daemon\n")
    store.seed("/m.md", "moving\n")
    async with running_core(store, cache_dir, queue=False) as core:
        vfs, durable = core.vfs, core.vfs.parts.durable
        assert durable.load() == 1  # queued, not run yet
        assert await core.read("m.md") == b"moving\n"
        await vfs.rename(ROOT_INODE, "m.md", ROOT_INODE, "n.md")
        moved = await core.ino("n.md")
        store.fail_next("update")
        with pytest.raises(ApiConnectionError):
            await vfs.parts.writeback.flush(moved)
        new = await core.save("new.md", b"fresh\n")
        store.delete_store()
        with pytest.raises(StoreGoneError):
            await vfs.parts.writeback.flush(new)
        assert len(durable.retrying) == len(durable.failed) == 1
        handed = durable.hand_over()
        assert handed is not None
        directory, lines = handed
        assert durable.retrying == {} and durable.failed == {} and core.records() == []
        assert durable.not_uploaded() == []
    assert sorted(p.name for p in directory.iterdir()) == ["n.md", "new.md", "old.md"]
    assert (directory / "old.md").read_bytes() == b"from the last daemon\n"
    assert len(lines) == 3


async def test_a_patient_flush_raises_a_permanent_failure(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    """``flush(key, patience=...)``: "the last error is raised" (what fsync relies on for keys
    that have no open file to hear it: a replay refused for good)."""
    async with running_core(store, cache_dir, queue=False) as core:
        await core.save("n.md", b"x\n")
        [record] = core.records()

    def refused() -> BaseException:
        return BadRequestError("path: not allowed here")

    store.fail_next("create", error=refused)
    async with running_core(store, cache_dir, queue=False) as core:
        core.vfs.load_journal()
        with pytest.raises(BadRequestError):
            await core.vfs.parts.writeback.flush(("replay", record.name), patience=5.0)
