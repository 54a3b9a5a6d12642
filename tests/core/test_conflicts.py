"""Conflict copies (docs/writeback.md, "Conflicts"): whoever loses a race keeps the winner as
the head; the local content is saved as ``<stem>.conflict-<UTC time>[.<ext>]`` beside it, through
the queue and the journal like any other change, and the writer hears ESTALE once."""

from __future__ import annotations

import errno
import os
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import trio
from trio.testing import MockClock

from kit.fake_store import FakeStore, unavailable
from kit.waiting import wait_until
from memfs.contract import paths
from memfs.contract.errors import NoSpaceError, RemoteConflictError, errno_for
from memfs.contract.models import sha256_hex
from memfs.contract.store_api import Capabilities
from memfs.core.model.budget import NODE_BYTES
from memfs.core.model.inodes import ROOT_INODE
from memfs.core.ops.durable import MAX_CONFLICTS_KEPT, conflict_path
from memfs.mount import status, status_text
from memfs.mount.report import render_report, unmount_report

from .helpers import replay, running_core

WHEN = datetime(2026, 11, 30, 9, 15, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("path", "attempt", "copy"),
    [
        ("/a/notes.md", 0, "/a/notes.conflict-20261130T091500Z.md"),
        ("/a/notes.md", 1, "/a/notes.conflict-20261130T091500Z-2.md"),
        ("/a/notes.md", 4, "/a/notes.conflict-20261130T091500Z-5.md"),
        ("/Makefile", 0, "/Makefile.conflict-20261130T091500Z"),
        ("/.bashrc", 0, "/.bashrc.conflict-20261130T091500Z"),
        ("/x/a.tar.gz", 0, "/x/a.tar.conflict-20261130T091500Z.gz"),
    ],
)
def test_conflict_copy_names(path: str, attempt: int, copy: str) -> None:
    assert conflict_path(path, WHEN, attempt) == copy


@pytest.mark.parametrize(
    ("path", "copy"),
    [
        ("/cafe\u0301.md", "/caf\u00e9.conflict-20261130T091500Z.md"),
        ("/a\x01b.md", "/a_b.conflict-20261130T091500Z.md"),
        ("/d/" + "x" * 297 + ".md", "/d/" + "x" * 222 + ".conflict-20261130T091500Z.md"),
        ("/" + "/".join("abcdefghijklmnopqrst") + "/u.md", "/u.conflict-20261130T091500Z.md"),
        ("/re\u0301sume\u0301/n.md", "/n.conflict-20261130T091500Z.md"),
    ],
    ids=["nfd", "control", "long", "deep", "nfd-directory"],
)
def test_a_conflict_copy_of_an_entry_outside_the_path_rules_gets_a_path_the_store_takes(
    path: str, copy: str
) -> None:
    """An entry an older server stored outside today's rules (docs/semantics.md, "Databricks
    stores") loses a race: its copy is named so that the server takes it (beside it, else in the
    root), retried names included."""
    assert conflict_path(path, WHEN) == copy
    assert paths.is_valid_file_path(copy)
    assert paths.is_valid_file_path(conflict_path(path, WHEN, 8))


@pytest.fixture
def far_from_utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The machine's local time zone is not UTC (the names and times must not care)."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_a_conflict_copy_is_named_after_the_current_utc_time(far_from_utc: None) -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    name = conflict_path("/n.md")
    after = datetime.now(UTC)
    stamp = re.fullmatch(r"/n\.conflict-(\d{8}T\d{6}Z)\.md", name)
    assert stamp is not None
    when = datetime.strptime(stamp[1], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    assert before <= when <= after


async def test_each_conflict_is_recorded_with_its_copy_and_utc_time(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path, far_from_utc: None
) -> None:
    first = store.seed("/a.md", "a\n")
    second = store.seed("/b.md", "b\n")
    async with running_core(store, cache_dir, queue=False) as core:
        durable = core.vfs.parts.durable
        before = datetime.now(UTC)
        durable.save_conflict("/a.md", first.id, b"local a\n")
        durable.save_conflict("/b.md", second.id, b"local b\n")
        records = {r.name: r for r in core.records()}
        # both copies wait, each under its own key and record
        assert set(records) == {f"{durable.life}-c-1", f"{durable.life}-c-2"}
        assert core.vfs.parts.writeback.keys() == [("conflict", 1), ("conflict", 2)]
        infos = durable.conflicts
        assert [(i.path, i.memory_id, i.saved) for i in infos] == [
            ("/a.md", first.id, False),
            ("/b.md", second.id, False),
        ]
        assert [i.saved_as for i in infos] == [r.path for r in records.values()]
        for info in infos:
            at = datetime.fromisoformat(info.at)
            assert at.utcoffset() == timedelta(0) and before <= at <= datetime.now(UTC)
        assert await core.vfs.flush_all() == []
        assert [i.saved for i in infos] == [True, True]
        assert [store.contents()[i.saved_as] for i in infos] == ["local a\n", "local b\n"]


async def test_a_save_that_lost_the_race_keeps_the_winner_and_copies_ours(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    memory = store.seed("/c.md", "base\n")
    async with running_core(store, cache_dir) as core:
        vfs = core.vfs
        ino = await core.ino("c.md")
        fh, _ = await vfs.open(ino, os.O_WRONLY | os.O_TRUNC)
        await vfs.write(fh, 0, b"mine\n")
        store.edit(memory.id, content="theirs\n")  # another writer got there first
        with pytest.raises(RemoteConflictError) as raised:
            await vfs.fsync(fh)
        assert errno_for(raised.value) == errno.ESTALE
        await vfs.fsync(fh)  # heard once
        await vfs.release(fh)
        assert await vfs.flush_all() == []

        copies = core.conflict_copies("c")
        listed = [name for name, _ in await vfs.readdir(ROOT_INODE)]
        assert sorted(listed) == sorted(["c.md", next(iter(copies))[1:]])  # shown at once
        assert list(copies.values()) == ["mine\n"]
        [info] = vfs.parts.durable.conflicts
        assert (info.path, info.memory_id, info.saved) == ("/c.md", memory.id, True)
        assert info.saved_as == next(iter(copies))
        # the file is the winner now: its content, its sha as the base of the next save
        assert await core.read("c.md") == b"theirs\n"
        node = vfs.parts.state.table.get(ino)
        assert node is not None and node.memory_id == memory.id
        assert node.base_sha == sha256_hex("theirs\n")
        await core.save("c.md", b"theirs, and mine\n")
        await vfs.fsync_dir()
        assert core.records() == []
    assert store.head("/c.md").content == "theirs, and mine\n"
    assert store.writes[-1][1]["expected_sha256"] == sha256_hex("theirs\n")


async def test_the_conflict_copy_is_journaled_before_the_upload_record_is_dropped(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    memory = store.seed("/c.md", "base\n")
    async with running_core(store, cache_dir, queue=False) as core:
        ino = await core.save("c.md", b"mine\n")
        store.edit(memory.id, content="theirs\n")
        await core.vfs.parts.writeback.flush(ino)  # the upload runs, loses; the copy waits
        [record] = core.records()
        assert (record.op, record.data) == ("conflict", b"mine\n")
        assert record.path is not None and record.path.startswith("/c.conflict-")
        assert core.vfs.parts.durable.path_of(("conflict", 1)) == record.path
    # the daemon died before the copy was made: the next one makes it
    async with running_core(store, cache_dir) as core:
        assert await replay(core) == 1
        assert list(core.conflict_copies("c").values()) == ["mine\n"]
        assert core.vfs.parts.durable.conflict_count == 0  # this daemon lost no race
    assert store.head("/c.md").content == "theirs\n"


async def crashed_with_a_conflict_copy_to_make(store: FakeStore, cache_dir: Path) -> str:
    """A daemon lost a race on /c.md and died before making the copy; returns its path."""
    memory = store.seed("/c.md", "base\n")
    async with running_core(store, cache_dir, queue=False) as core:
        ino = await core.save("c.md", b"mine\n")
        store.edit(memory.id, content="theirs\n")
        await core.vfs.parts.writeback.flush(ino)
        [record] = core.records()
    assert record.path is not None
    return record.path


@pytest.mark.parametrize("taken", [1, 3])
async def test_a_taken_conflict_copy_name_gets_a_number(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path, taken: int
) -> None:
    copy = await crashed_with_a_conflict_copy_to_make(store, cache_dir)
    stem = copy.removesuffix(".md")
    names = [copy] + [f"{stem}-{n}.md" for n in range(2, taken + 1)]
    for name in names:
        store.seed(name, "another copy\n")  # the names are taken by something else

    async with running_core(store, cache_dir) as core:
        assert await replay(core) == 1
        assert core.records() == []
    assert store.contents()[f"{stem}-{taken + 1}.md"] == "mine\n"
    assert len(store.contents()) == taken + 2
    assert store.calls["find"] == 0


async def test_a_conflict_copy_made_before_the_crash_is_not_made_again(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    copy = await crashed_with_a_conflict_copy_to_make(store, cache_dir)
    store.seed(copy, "mine\n")  # made, its answer lost

    async with running_core(store, cache_dir) as core:
        assert await replay(core) == 1
        assert core.records() == []
    assert store.contents() == {"/c.md": "theirs\n", copy: "mine\n"}


async def test_a_conflict_copy_gives_up_after_twenty_taken_names(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    copy = await crashed_with_a_conflict_copy_to_make(store, cache_dir)
    stem = copy.removesuffix(".md")
    for name in [copy] + [f"{stem}-{n}.md" for n in range(2, 22)]:
        store.seed(name, "another copy\n")

    async with running_core(store, cache_dir) as core:
        core.vfs.load_journal()
        await core.vfs.flush_all()
    assert store.calls["create"] == 20  # a bounded search, not one name more
    assert store.contents()[f"{stem}-21.md"] == "another copy\n"


async def test_a_conflict_copy_that_finds_no_free_name_keeps_its_content(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    copy = await crashed_with_a_conflict_copy_to_make(store, cache_dir)
    stem = copy.removesuffix(".md")
    for name in [copy] + [f"{stem}-{n}.md" for n in range(2, 21)]:
        store.seed(name, "another copy\n")

    async with running_core(store, cache_dir) as core:
        core.vfs.load_journal()
        await core.vfs.flush_all()
        # the local side of the conflict exists nowhere else: it must stay, and be reported
        assert [r.data for r in core.records()] == [b"mine\n"]
        [(_, why)] = core.vfs.parts.durable.failed.values()  # in memfs status and umount's report
        assert "no free name for the conflict copy" in why


async def test_the_conflict_copy_is_made_at_once(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    memory = store.seed("/c.md", "base\n")
    asked_at: list[float] = []
    async with running_core(store, cache_dir) as core:
        ino = await core.save("c.md", b"mine\n")
        store.edit(memory.id, content="theirs\n")
        store.before_next("create", lambda _: asked_at.append(trio.current_time()))
        await core.vfs.parts.writeback.flush(ino)
        lost_at = trio.current_time()
        await store.wait_calls("create", 1)
        await wait_until(lambda: core.records() == [])
    assert asked_at == [lost_at]
    assert list(core.conflict_copies("c").values()) == ["mine\n"]


async def test_a_conflict_copy_whose_create_fails_transiently_is_retried(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    memory = store.seed("/c.md", "base\n")
    async with running_core(store, cache_dir) as core:
        await core.save("c.md", b"mine\n")
        store.edit(memory.id, content="theirs\n")
        store.fail_next("create", times=3, error=unavailable)
        with pytest.raises(RemoteConflictError):
            await core.vfs.fsync_dir()
        assert core.records() == []
        assert core.vfs.parts.durable.retrying == {}
    assert store.calls["create"] == 4
    assert list(core.conflict_copies("c").values()) == ["mine\n"]


async def test_a_conflict_without_local_content_saves_no_copy(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    async with running_core(store, cache_dir) as core:
        durable = core.vfs.parts.durable
        durable.save_conflict("/gone.md", "mem_x", None)
        [info] = durable.conflicts
        assert (info.saved_as, info.saved, durable.conflict_count) == ("", False, 1)
        assert core.vfs.pending_uploads == 0 and core.records() == []


async def test_the_newest_conflicts_are_kept_for_the_status(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    async with running_core(store, cache_dir, queue=False) as core:
        durable = core.vfs.parts.durable
        for n in range(MAX_CONFLICTS_KEPT + 2):
            durable.save_conflict(f"/f{n}.md", None, None)
        assert durable.conflict_count == MAX_CONFLICTS_KEPT + 2
        assert len(durable.conflicts) == MAX_CONFLICTS_KEPT
        assert durable.conflicts[0].path == "/f2.md"
        assert durable.conflicts[-1].path == f"/f{MAX_CONFLICTS_KEPT + 1}.md"
        # memfs status lists the newest 10, umount's report the kept ones: each says how many
        # more there are, so none is dropped silently
        more = "… and {} more; the conflict copies are in the mount"
        doc = status.collect(core.vfs, None, None)
        assert [c["path"] for c in doc["conflicts"]["recent"]] == [
            f"/f{n}.md" for n in range(MAX_CONFLICTS_KEPT - 8, MAX_CONFLICTS_KEPT + 2)
        ]
        assert doc["conflicts"]["not_listed"] == MAX_CONFLICTS_KEPT + 2 - 10
        doc["requests"] = {"total": 0, "retries": 0, "by_route": {}}  # (a FakeStore's differ)
        assert status_text.render(doc).splitlines().count(f"  {more.format(42)}") == 1
        report = unmount_report(core.vfs, orphaned=None, errors=[])
        assert len(report["conflicts"]) == MAX_CONFLICTS_KEPT
        assert report["conflicts_not_listed"] == 2
        text = render_report(report)
        assert f"{MAX_CONFLICTS_KEPT + 2} conflict(s) while mounted:" in text
        assert text.endswith(f"  {more.format(2)}\n")


async def test_a_new_file_that_lost_its_path_to_another_writer(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    async with running_core(store, cache_dir) as core:
        vfs = core.vfs
        fh, attr = await vfs.create(ROOT_INODE, "race.md", os.O_WRONLY | os.O_CREAT)
        await vfs.write(fh, 0, b"mine\n")
        theirs = store.seed("/race.md", "theirs\n")
        await vfs.flush(fh)
        with pytest.raises(RemoteConflictError):
            await vfs.fsync(fh)
        await vfs.release(fh)
        await vfs.flush_all()
        node = vfs.parts.state.table.get(attr.ino)
        assert node is not None and node.memory_id == theirs.id
        assert await core.read("race.md") == b"theirs\n"
        assert list(core.conflict_copies("race").values()) == ["mine\n"]
        assert core.records() == []
    assert store.at("/race.md") == theirs


async def test_conflict_copies_in_a_full_store_are_files_that_wait_for_room(
    autojump_clock: MockClock, cache_dir: Path
) -> None:
    """Issue 20 item 11: two conflicts of one file in a full store (the second within the same
    second takes the next free name): each copy is a file of the mount, readable, waiting for
    room, journaled as that file; a delete makes room and both are uploaded."""
    store = FakeStore(capabilities=Capabilities(max_memories=3))
    memory = store.seed("/c.md", "base\n")
    others = [store.seed(f"/other-{i}.md", "x\n") for i in range(2)]
    async with running_core(store, cache_dir) as core:
        vfs = core.vfs
        await vfs.setattr(await core.ino("c.md"), mode=0o600, uid=1234, gid=1234)  # private
        for mine, theirs in ((b"mine 1\n", "theirs 1\n"), (b"mine 2\n", "theirs 2\n")):
            await core.save("c.md", mine)
            store.edit(memory.id, content=theirs)
            with pytest.raises(NoSpaceError):  # the copy waits (said before its ESTALE)
                await vfs.fsync_dir()
        listed = sorted(name for name, _ in await vfs.readdir(ROOT_INODE))
        copies = [name for name in listed if name.startswith("c.conflict-")]
        assert listed == sorted(["c.md", "other-0.md", "other-1.md", *copies])
        assert len(copies) == 2
        assert sorted([await core.read(name) for name in copies]) == [b"mine 1\n", b"mine 2\n"]
        for name in copies:  # as private as the file they come from
            attr = await vfs.getattr(await core.ino(name))
            assert (attr.mode & 0o777, attr.uid, attr.gid) == (0o600, 1234, 1234)
        assert await core.read("c.md") == b"theirs 2\n"
        waiting = {vfs.parts.durable.describe(key) for key in vfs.waiting_for_room}
        assert waiting == {f"/{name}" for name in copies}  # what memfs status lists
        assert sorted(r.path for r in core.records()) == [f"/{name}" for name in copies]
        assert [info.saved for info in vfs.parts.durable.conflicts] == [False, False]
        assert vfs.local_bytes == 2 * (len(b"mine 1\n") + NODE_BYTES)  # held: --local-bytes
        for made_elsewhere in others:  # room for both: the next directory fsync takes it
            store.remove(made_elsewhere.id)
        await vfs.fsync_dir()
        assert core.records() == [] and vfs.local_bytes == 0
        assert [info.saved for info in vfs.parts.durable.conflicts] == [True, True]
        assert sorted(info.saved_as for info in vfs.parts.durable.conflicts) == [
            f"/{name}" for name in copies
        ]
    assert sorted(v for p, v in store.contents().items() if p.startswith("/c.conflict-")) == [
        "mine 1\n",
        "mine 2\n",
    ]


async def test_the_conflict_copy_of_a_private_file_is_private(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    """The store keeps no modes: the copy of a file made private here (chmod 600, chown) shows
    that file's mode and owner, not the mount's defaults (other users of an --allow-other
    mount would read it); a file with the defaults gives its copy the defaults."""
    private = store.seed("/p.md", "base\n")
    plain = store.seed("/q.md", "base\n")
    async with running_core(store, cache_dir) as core:
        vfs = core.vfs
        await vfs.setattr(await core.ino("p.md"), mode=0o600, uid=1234, gid=1234)
        plain_attr = await vfs.getattr(await core.ino("q.md"))
        defaults = (plain_attr.mode, plain_attr.uid, plain_attr.gid)
        for name, memory in (("p.md", private), ("q.md", plain)):
            await core.save(name, b"mine\n")
            store.edit(memory.id, content="theirs\n")
        with pytest.raises(RemoteConflictError):
            await vfs.fsync_dir()
        private_mode = (0o100600, 1234, 1234)
        for stem, expected in (("p", private_mode), ("q", defaults)):
            [copy] = core.conflict_copies(stem)
            attr = await vfs.getattr(await core.ino(copy[1:]))
            assert (attr.mode, attr.uid, attr.gid) == expected
            assert await core.read(copy[1:]) == b"mine\n"
