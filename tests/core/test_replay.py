"""Replay of the journal after a crash (docs/writeback.md, "Crash and restart"): one core
acknowledges changes and dies before uploading them; a fresh core over the same journal
directory uploads them with their preconditions, never overwrites a change made elsewhere
meanwhile, and never repeats what the server already has."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import trio
from trio.testing import MockClock

from kit.fake_store import FakeStore
from kit.waiting import wait_until
from memfs.contract.models import sha256_hex
from memfs.contract.store_api import Capabilities
from memfs.core.build import build_core
from memfs.core.model.inodes import ROOT_INODE
from memfs.core.ops.descriptions import DESCRIPTION
from memfs.writeback.journal import Journal, Record

from .helpers import CONFIG, replay, running_core

CONFLICT_COPY = re.compile(r"^/a\.conflict-\d{8}T\d{6}Z\.md$")


async def test_create_update_delete_and_move_are_replayed_by_the_next_core(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    edited = store.seed("/edited.md", "before\n")
    doomed = store.seed("/doomed.md", "bye\n")
    moving = store.seed("/moving.md", "travels\n")
    async with running_core(store, cache_dir, queue=False) as core:
        await core.save("new.md", b"fresh\n")
        await core.save("edited.md", b"after\n")
        await core.vfs.unlink(ROOT_INODE, "doomed.md")
        await core.vfs.rename(ROOT_INODE, "moving.md", ROOT_INODE, "moved.md")
        records = {(r.op, r.path or r.remote_path): r for r in core.records()}
    # the daemon died: nothing reached the server, everything acknowledged is on disk
    assert set(records) == {
        ("put", "/new.md"),
        ("put", "/edited.md"),
        ("delete", "/doomed.md"),
        ("put", "/moved.md"),
    }
    assert records["put", "/new.md"].memory_id is None
    assert records["put", "/edited.md"].base_sha == edited.content_sha256
    assert records["delete", "/doomed.md"].base_sha == doomed.content_sha256
    assert records["put", "/moved.md"].remote_path == "/moving.md"
    assert records["put", "/moved.md"].data is None  # a move carries no content
    assert store.calls["create"] == store.calls["update"] == store.calls["delete"] == 0

    async with running_core(store, cache_dir) as core:
        assert await replay(core) == 4
        assert core.vfs.parts.durable.replayed == 4
        assert core.records() == []
        assert core.vfs.parts.durable.conflict_count == 0
    assert store.contents() == {
        "/new.md": "fresh\n",
        "/edited.md": "after\n",
        "/moved.md": "travels\n",
    }
    assert store.head("/moved.md").id == moving.id  # a move keeps the memory's identity
    assert store.head("/edited.md").id == edited.id
    # each with the precondition of what its writer saw; a move replaces no content
    assert (
        "update",
        {
            "memory_id": edited.id,
            "content": "after\n",
            "path": None,
            "expected_sha256": edited.content_sha256,
        },
    ) in store.writes
    assert (
        "update",
        {
            "memory_id": moving.id,
            "content": None,
            "path": "/moved.md",
            "expected_sha256": None,
        },
    ) in store.writes
    assert (
        "delete",
        {
            "memory_id": doomed.id,
            "expected_sha256": doomed.content_sha256,
        },
    ) in store.writes
    assert not os.listdir(cache_dir / store.store_id)  # the slot is removed when empty


async def test_a_replayed_save_that_meets_a_changed_head_becomes_a_conflict_copy(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    memory = store.seed("/a.md", "base\n")
    async with running_core(store, cache_dir, queue=False) as core:
        await core.save("a.md", b"mine\n")
    store.edit(memory.id, content="theirs\n")  # another writer, while this mount was dead

    async with running_core(store, cache_dir) as core:
        assert await replay(core) == 1
        copies = core.conflict_copies("a")
        assert core.vfs.parts.durable.conflict_count == 1
        [info] = core.vfs.parts.durable.conflicts
        assert (info.path, info.memory_id, info.saved) == ("/a.md", memory.id, True)
        assert core.records() == []
    # the head is the other writer's, never overwritten; ours is beside it
    assert store.head("/a.md").id == memory.id
    assert store.head("/a.md").content == "theirs\n"
    assert [CONFLICT_COPY.match(p) is not None for p in copies] == [True]
    assert list(copies.values()) == ["mine\n"]
    assert sum(1 for op, _ in store.writes if op == "update") == 1


@pytest.mark.parametrize("content", ["ours\n", ""])
async def test_a_replayed_create_whose_answer_was_lost_is_not_made_twice(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path, content: str
) -> None:
    async with running_core(store, cache_dir, queue=False) as core:
        await core.save("n.md", content.encode())
    store.seed("/n.md", content)  # the server applied it; the daemon died before the answer

    async with running_core(store, cache_dir) as core:
        assert await replay(core) == 1
        assert core.vfs.parts.durable.conflict_count == 0
        assert core.records() == []
    assert store.contents() == {"/n.md": content}
    assert store.writes == [("create", {"path": "/n.md", "content": content})]
    assert store.calls["find"] == 0  # the conflict names the memory: one read, no listing


async def test_a_replayed_new_file_is_created_with_its_description(
    autojump_clock: MockClock, cache_dir: Path
) -> None:
    """A new file given a description (``user.description``) before the daemon died: the next
    core creates the memory with both, as the upload it replaces would have."""
    store = FakeStore(capabilities=Capabilities(descriptions=True, max_description_bytes=4096))
    async with running_core(store, cache_dir, queue=False) as core:
        ino = await core.save("n.md", b"fresh\n")
        await core.vfs.descriptions.set(ino, DESCRIPTION, b"what it is for")
        [record] = core.records()
        assert (record.memory_id, record.description) == (None, "what it is for")

    async with running_core(store, cache_dir) as core:
        assert await replay(core) == 1
        assert core.records() == []
    assert store.contents() == {"/n.md": "fresh\n"}
    assert store.head("/n.md").description == "what it is for"


async def test_a_replayed_create_whose_path_another_writer_took_keeps_both(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    async with running_core(store, cache_dir, queue=False) as core:
        await core.save("a.md", b"ours\n")
    theirs = store.seed("/a.md", "theirs\n")

    async with running_core(store, cache_dir) as core:
        assert await replay(core) == 1
        copies = core.conflict_copies("a")
        assert core.vfs.parts.durable.conflict_count == 1
        [info] = core.vfs.parts.durable.conflicts
        assert (info.path, info.memory_id, info.saved) == ("/a.md", None, True)
        assert info.saved_as in copies
    assert store.at("/a.md") == theirs
    assert list(copies.values()) == ["ours\n"]


async def test_a_replayed_delete_of_a_memory_already_gone_is_done(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    memory = store.seed("/d.md", "x\n")
    async with running_core(store, cache_dir, queue=False) as core:
        await core.vfs.unlink(ROOT_INODE, "d.md")
    store.remove(memory.id)

    async with running_core(store, cache_dir) as core:
        assert await replay(core) == 1
        assert core.records() == []
        assert core.vfs.parts.durable.failed == {}
        assert core.vfs.parts.durable.replayed == 1
    assert store.contents() == {}


async def test_a_replayed_delete_of_a_memory_changed_elsewhere_deletes_nothing(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    memory = store.seed("/d.md", "x\n")
    async with running_core(store, cache_dir, queue=False) as core:
        await core.vfs.unlink(ROOT_INODE, "d.md")
    store.edit(memory.id, content="kept by another writer\n")

    async with running_core(store, cache_dir) as core:
        assert await replay(core) == 1
        assert core.records() == []  # nothing to retry: the other writer's change stands
        assert core.vfs.parts.durable.conflict_count == 0
    assert store.contents() == {"/d.md": "kept by another writer\n"}


async def test_a_replayed_save_of_a_memory_deleted_elsewhere_creates_it_again(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    memory = store.seed("/a.md", "base\n")
    async with running_core(store, cache_dir, queue=False) as core:
        await core.save("a.md", b"still wanted\n")
    store.remove(memory.id)

    async with running_core(store, cache_dir) as core:
        assert await replay(core) == 1
        assert core.records() == []
        assert core.vfs.parts.durable.conflict_count == 0
    assert store.contents() == {"/a.md": "still wanted\n"}
    assert store.head("/a.md").id != memory.id


async def test_a_memory_deleted_elsewhere_is_created_again_with_its_description(
    autojump_clock: MockClock, cache_dir: Path
) -> None:
    """A save and a description waiting in the journal for a memory deleted elsewhere: the
    memory made again carries both (the description was dropped before)."""
    store = FakeStore(capabilities=Capabilities(descriptions=True, max_description_bytes=4096))
    memory = store.seed("/a.md", "base\n")
    async with running_core(store, cache_dir, queue=False) as core:
        ino = await core.save("a.md", b"still wanted\n")
        await core.vfs.descriptions.set(ino, DESCRIPTION, b"what it is for")
        [record] = core.records()
        assert (record.memory_id, record.description) == (memory.id, "what it is for")
    store.remove(memory.id)

    async with running_core(store, cache_dir) as core:
        assert await replay(core) == 1
        assert core.records() == []
    assert store.contents() == {"/a.md": "still wanted\n"}
    assert store.head("/a.md").description == "what it is for"


@pytest.mark.parametrize("content", ["still wanted\n", ""])
async def test_a_replayed_save_of_a_deleted_memory_is_created_once_despite_a_lost_answer(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path, content: str
) -> None:
    memory = store.seed("/a.md", "base\n")
    async with running_core(store, cache_dir, queue=False) as core:
        await core.save("a.md", content.encode())
    store.remove(memory.id)
    store.lose_answer("create")

    async with running_core(store, cache_dir) as core:
        assert await replay(core) == 1
        assert core.vfs.parts.durable.conflict_count == 0
    assert store.contents() == {"/a.md": content}
    assert store.calls["create"] == 2 and store.calls["find"] == 0


async def test_a_replayed_save_of_a_deleted_memory_whose_path_was_taken_keeps_both(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    memory = store.seed("/a.md", "base\n")
    async with running_core(store, cache_dir, queue=False) as core:
        await core.save("a.md", b"mine\n")
    store.remove(memory.id)
    store.seed("/a.md", "someone else's\n")

    async with running_core(store, cache_dir) as core:
        assert await replay(core) == 1
        assert list(core.conflict_copies("a").values()) == ["mine\n"]
    assert store.head("/a.md").content == "someone else's\n"


async def test_a_replayed_move_onto_a_taken_path_is_dropped_and_loses_nothing(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    moving = store.seed("/m.md", "mine\n")
    async with running_core(store, cache_dir, queue=False) as core:
        await core.vfs.rename(ROOT_INODE, "m.md", ROOT_INODE, "n.md")
    store.seed("/n.md", "theirs\n")

    async with running_core(store, cache_dir) as core:
        assert await replay(core) == 1
        assert core.records() == []
        assert core.vfs.parts.durable.conflict_count == 0
    # the memory stays where it was, with its content; the other writer's file is untouched
    assert store.contents() == {"/m.md": "mine\n", "/n.md": "theirs\n"}
    assert store.head("/m.md").id == moving.id


async def test_a_replayed_move_with_new_content_onto_a_taken_path_saves_a_copy(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    store.seed("/m.md", "old\n")
    async with running_core(store, cache_dir, queue=False) as core:
        await core.save("m.md", b"edited\n")
        await core.vfs.rename(ROOT_INODE, "m.md", ROOT_INODE, "a.md")
        [record] = core.records()
        assert (record.path, record.remote_path, record.data) == ("/a.md", "/m.md", b"edited\n")
    store.seed("/a.md", "theirs\n")

    async with running_core(store, cache_dir) as core:
        assert await replay(core) == 1
        assert list(core.conflict_copies("a").values()) == ["edited\n"]
        [info] = core.vfs.parts.durable.conflicts
        assert (info.path, info.memory_id) == ("/a.md", store.head("/m.md").id)
    assert store.contents()["/m.md"] == "old\n"
    assert store.contents()["/a.md"] == "theirs\n"


async def test_a_replayed_save_already_on_the_server_changes_nothing(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    """The daemon died after the server applied the update and before the record was
    dropped: the replay is a no-op, not a conflict."""
    memory = store.seed("/a.md", "base\n")
    async with running_core(store, cache_dir, queue=False) as core:
        await core.save("a.md", b"new\n")
    store.edit(memory.id, content="new\n")
    versions = len(store.versions)

    async with running_core(store, cache_dir) as core:
        assert await replay(core) == 1
        assert core.vfs.parts.durable.conflict_count == 0
    assert store.contents() == {"/a.md": "new\n"}
    assert len(store.versions) == versions


async def test_a_record_without_content_change_sends_nothing(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    """A record whose content is the base (a save that put back what the server has)."""
    memory = store.seed("/a.md", "same\n")
    async with running_core(store, cache_dir, queue=False) as core:
        await core.save("a.md", b"same\n")
        [record] = core.records()
        assert record.base_sha == sha256_hex("same\n") and record.data == b"same\n"

    async with running_core(store, cache_dir) as core:
        assert await replay(core) == 1
        assert core.records() == []
    assert store.writes == []
    assert store.at("/a.md") == memory


async def test_a_record_without_a_base_never_replaces_the_head(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    """A record an older memfs wrote for a save after a conflict (no precondition): its
    content becomes a conflict copy."""
    memory = store.seed("/old.md", "the head\n")
    journal = Journal.open(cache_dir, store.store_id)
    journal.put(
        Record(
            name="older-n5",
            op="put",
            path="/old.md",
            memory_id=memory.id,
            remote_path="/old.md",
            data=b"written blind\n",
        )
    )
    journal.close()

    async with running_core(store, cache_dir) as core:
        assert await replay(core) == 1
        [info] = core.vfs.parts.durable.conflicts
        assert (info.path, info.memory_id, info.saved) == ("/old.md", memory.id, True)
        assert core.records() == []
    assert store.at("/old.md") == memory
    assert list(core.conflict_copies("old").values()) == ["written blind\n"]
    assert [op for op, _ in store.writes] == ["create"]


async def test_records_are_replayed_in_the_background_at_once_and_named_while_they_wait(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    async with running_core(store, cache_dir, queue=False) as core:
        await core.save("n.md", b"x\n")
        [record] = core.records()
    asked_at: list[float] = []
    # what `memfs status` shows while the record waits, looked at when the retry is asked (the
    # backoff is random, and may end before any poll would look)
    waiting: list[tuple[dict[str, tuple[str, str]], list[dict[str, str | None]]]] = []

    def first_create(_: FakeStore) -> None:
        asked_at.append(trio.current_time())
        store.before_next(
            "create", lambda _: waiting.append((dict(durable.retrying), durable.not_uploaded()))
        )

    store.before_next("create", first_create)
    store.fail_next("create")

    async with running_core(store, cache_dir) as core:
        durable = core.vfs.parts.durable
        loaded_at = trio.current_time()
        assert durable.load() == 1
        key = ("replay", record.name)
        assert durable.path_of(key) == "/n.md"
        assert durable.path_of(("replay", "no-such-record")) is None
        await wait_until(lambda: waiting)
        assert asked_at == [loaded_at]  # due at once, not after a delay
        retrying, [entry] = waiting[0]
        assert retrying == {
            record.name: ("/n.md", "ApiConnectionError: " + ("connection refused (fake)"))
        }
        assert entry["why"] == retrying[record.name][1]
        await wait_until(lambda: core.records() == [])
        assert durable.retrying == {} and durable.replayed == 1
        assert durable.path_of(key) is None  # done: forgotten
    assert store.contents() == {"/n.md": "x\n"}


async def test_a_core_without_a_journal_replays_and_reports_nothing(
    autojump_clock: MockClock, store: FakeStore
) -> None:
    vfs = build_core(store, CONFIG)
    fh, _ = await vfs.create(ROOT_INODE, "n.md", os.O_WRONLY | os.O_CREAT)
    await vfs.write(fh, 0, b"x\n")
    await vfs.flush(fh)
    assert vfs.parts.writeback.pending((await vfs.lookup(ROOT_INODE, "n.md")).ino)
    assert vfs.load_journal() == 0
    assert vfs.parts.durable.not_uploaded() == []
    assert vfs.parts.durable.hand_over() is None


async def test_the_report_names_each_record_left_by_an_earlier_mount(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    journal = Journal.open(cache_dir, store.store_id)
    for record in [
        Record(name="a", op="put", path="/p.md", remote_path="/old.md", data=b"x"),
        Record(name="b", op="delete", memory_id="mem_1", remote_path="/gone.md"),
        Record(name="c", op="delete", memory_id="mem_2"),
        Record(name="d", op="delete"),
    ]:
        journal.put(record)
    journal.close()
    async with running_core(store, cache_dir, queue=False) as core:
        entries = core.vfs.parts.durable.not_uploaded()
        kept_in = str(core.journal.directory)
    assert entries == [
        {"op": "put", "path": "/p.md", "why": "not uploaded yet", "kept_in": kept_in},
        {"op": "delete", "path": "/gone.md", "why": "not uploaded yet", "kept_in": kept_in},
        {"op": "delete", "path": "mem_2", "why": "not uploaded yet", "kept_in": kept_in},
        {"op": "delete", "path": "?", "why": "not uploaded yet", "kept_in": kept_in},
    ]
