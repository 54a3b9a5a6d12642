"""Lost answers (docs/writeback.md, invariants 4 and 5): the server applied a create, update or
delete but its answer never came (the client raised a transient error). The queue retries, and
the retry must recognise the change as its own: no duplicate memory, no spurious conflict."""

from __future__ import annotations

import os
from pathlib import Path

from trio.testing import MockClock

from kit.fake_store import FakeStore, unavailable
from memfs.contract.errors import ApiConnectionError, PathConflictError
from memfs.core.model.inodes import ROOT_INODE

from .helpers import replay, running_core


async def test_a_create_whose_answer_was_lost_is_not_made_twice(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    store.lose_answer("create")
    async with running_core(store, cache_dir) as core:
        vfs = core.vfs
        fh, attr = await vfs.create(ROOT_INODE, "new.md", os.O_WRONLY | os.O_CREAT)
        await vfs.write(fh, 0, b"once\n")
        await vfs.fsync(fh)  # retried within fsync's patience: success, not a conflict
        await vfs.release(fh)
        node = vfs.parts.state.table.get(attr.ino)
        memory = store.at("/new.md")
        assert memory is not None and node is not None and node.memory_id == memory.id
        assert vfs.parts.durable.conflict_count == 0 and core.records() == []
    assert store.contents() == {"/new.md": "once\n"}
    assert store.calls["create"] == 2
    assert [type(e) for _, e in store.raised] == [ApiConnectionError, PathConflictError]
    assert store.calls["find"] == 0  # the conflict names the memory: one read, no listing


async def test_a_lost_create_is_recognised_by_its_path_when_the_api_names_no_memory(
    autojump_clock: MockClock, cache_dir: Path
) -> None:
    store = FakeStore(names_conflicts=False)
    store.lose_answer("create")
    async with running_core(store, cache_dir) as core:
        await core.save("new.md", b"once\n")
        await core.vfs.fsync_dir()
        assert core.vfs.parts.durable.conflict_count == 0 and core.records() == []
    assert store.contents() == {"/new.md": "once\n"}
    assert store.calls["find"] == 1


async def test_an_update_whose_answer_was_lost_is_not_a_conflict(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    memory = store.seed("/a.md", "base\n")
    store.lose_answer("update", error=unavailable)
    async with running_core(store, cache_dir) as core:
        vfs = core.vfs
        ino = await core.ino("a.md")
        fh, _ = await vfs.open(ino, os.O_WRONLY | os.O_TRUNC)
        await vfs.write(fh, 0, b"edited\n")
        await vfs.fsync(fh)
        await vfs.release(fh)
        assert vfs.parts.durable.conflict_count == 0 and core.records() == []
        assert core.conflict_copies("a") == {}
        assert await core.read("a.md") == b"edited\n"
    assert store.calls["update"] == 2
    assert store.contents() == {"/a.md": "edited\n"}
    assert [v.operation for v in store.versions if v.memory_id == memory.id] == [
        "created",
        "modified",
    ]


async def test_a_delete_whose_answer_was_lost_is_done(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    memory = store.seed("/d.md", "x\n")
    store.lose_answer("delete")
    async with running_core(store, cache_dir) as core:
        vfs = core.vfs
        await vfs.unlink(ROOT_INODE, "d.md")
        await vfs.fsync_dir()  # no error: the retry's 404 means it is done
        assert memory.id in vfs.parts.state.tombstones
        assert vfs.parts.state.pending_deletes == {} and vfs.parts.state.failed_uploads == {}
        assert core.records() == []
    assert store.calls["delete"] == 2
    assert store.contents() == {}


async def test_a_move_whose_answer_was_lost_keeps_the_identity(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    memory = store.seed("/m.md", "x\n")
    store.lose_answer("update")
    async with running_core(store, cache_dir) as core:
        await core.vfs.rename(ROOT_INODE, "m.md", ROOT_INODE, "n.md")
        await core.vfs.fsync_dir()
        assert core.records() == [] and core.vfs.parts.durable.conflict_count == 0
    assert store.calls["update"] == 2
    assert store.contents() == {"/n.md": "x\n"}
    assert store.head("/n.md").id == memory.id


async def test_a_conflict_copy_whose_answer_was_lost_is_made_once(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    memory = store.seed("/c.md", "base\n")
    async with running_core(store, cache_dir) as core:
        await core.save("c.md", b"mine\n")
        store.edit(memory.id, content="theirs\n")
        store.lose_answer("create")
        await core.vfs.parts.writeback.flush(await core.ino("c.md"))
        await core.vfs.fsync_dir()  # the conflict was heard above: only the copy is left
        assert core.records() == []
        [info] = core.vfs.parts.durable.conflicts
        assert info.saved
    assert list(core.conflict_copies("c").values()) == ["mine\n"]
    assert len(store.contents()) == 2


async def test_a_replayed_create_whose_answer_is_lost_again_is_made_once(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    async with running_core(store, cache_dir, queue=False) as core:
        await core.save("n.md", b"ours\n")
    store.lose_answer("create")
    async with running_core(store, cache_dir) as core:
        assert await replay(core) == 1
        assert core.records() == [] and core.vfs.parts.durable.conflict_count == 0
    assert store.contents() == {"/n.md": "ours\n"}
