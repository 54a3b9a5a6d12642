"""The write-back journal on its own, as a crash leaves it: records that survive, records that
are torn or planted, slots of dead daemons, and locks held by live ones.

No mount and no server: the journal is files in a directory. A lock "held by another process"
is a ``flock`` on a separate open file description, which is what ``flock`` tells apart (two
processes, or two ``open``s in one, conflict alike).

Mutants left alive on purpose (``make mutate``; docs/mutation.md lists them): ``missing_ok`` on
files just listed (the slot is locked), and on the lock file as the last step of a ``try`` that
ignores ``OSError``; ``same = None`` (false as ``False``) and ``suppress(None)`` around a
``close`` that cannot fail in ``_try_lock``; ``O_RDONLY & O_DIRECTORY`` opens the directory all
the same; ``create``/``parents``/``tighten`` flags where the path always exists or
``False``/``None`` mean the same; the compact JSON separators and ``"UTF-8"`` are spellings; the
message of an ``open`` of the log that fails after its checks passed (a race); and ``<`` for
``<=`` at the end of the log (an entry with an empty payload, which is never written, is
unreadable either way).
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import stat
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from memfs.writeback import journal as journal_module
from memfs.writeback.journal import MAX_SLOTS, Journal, JournalError, Record, default_cache_dir

STORE = "memstore_01"
OTHER_UID = 54321  # nobody's: a file "planted by another local user" (the tests run as root)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@contextmanager
def held(lock: Path) -> Iterator[None]:
    """``lock`` flocked as a live daemon holds its slot."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield
    finally:
        os.close(fd)


def dead_slot(base: Path, slot: int, *names: str) -> Path:
    """The slot of a daemon killed with records pending (its lock file stays, unlocked)."""
    directory = base / f"journal-{slot}"
    directory.mkdir(mode=0o700, parents=True)
    (base / f"journal-{slot}.lock").touch(mode=0o600)
    for name in names:
        (directory / f"{name}.rec").write_bytes(
            json.dumps(Record(name=name, op="delete", written_at=name).header()).encode() + b"\n"
        )
    return directory


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    opened = Journal.open(tmp_path, STORE)
    yield opened
    opened.close()


def test_default_cache_dir_follows_xdg_then_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "memfs"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for unset in ("", None):
        if unset is None:
            monkeypatch.delenv("XDG_CACHE_HOME")
        else:
            monkeypatch.setenv("XDG_CACHE_HOME", unset)
        assert default_cache_dir() == tmp_path / "home" / ".cache" / "memfs"


def test_header_is_the_record_without_its_data() -> None:
    record = Record(name="n", op="put", path="/a", memory_id="m", base_sha="s", data=b"x")
    assert record.header() == {
        "name": "n",
        "op": "put",
        "path": "/a",
        "memory_id": "m",
        "remote_path": None,
        "base_sha": "s",
        "written_at": "",
        "has_data": True,
    }
    assert Record(name="n", op="delete").header()["has_data"] is False
    assert Record(name="n", op="put", data=b"").header()["has_data"] is True
    assert "data=" not in repr(record)  # content stays out of logs


def test_open_makes_private_directories_and_a_locked_slot(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    os.chmod(cache, 0o755)
    opened = Journal.open(cache, "store/with odd:chars")
    try:
        base = cache / "store_with_odd_chars"  # one directory per store, a safe name
        assert opened.directory == base / "journal-0"
        assert mode(cache) == 0o755  # the user's own choice is left alone
        assert mode(base) == 0o700 and mode(opened.directory) == 0o700
        assert mode(base / "journal-0.lock") == 0o600
        with pytest.raises(BlockingIOError), held(base / "journal-0.lock"):
            pass  # the daemon holds its slot
        assert sorted(os.listdir(base)) == ["journal-0", "journal-0.lock"]
    finally:
        opened.close()


def test_open_tightens_the_store_directory_of_ours(tmp_path: Path) -> None:
    base = tmp_path / STORE
    base.mkdir()
    os.chmod(base, 0o755)
    (base / "journal-0").mkdir()
    os.chmod(base / "journal-0", 0o755)
    Journal.open(tmp_path, STORE).close()
    assert mode(base) == 0o700
    assert not (base / "journal-0").exists()  # empty: removed at close


@pytest.mark.parametrize("which", ["cache", "store", "slot"])
@pytest.mark.parametrize("how", ["group-writable", "other owner", "symlink"])
def test_open_refuses_a_directory_another_user_could_fill(
    tmp_path: Path, which: str, how: str
) -> None:
    cache = tmp_path / "cache"
    target = {"cache": cache, "store": cache / STORE, "slot": cache / STORE / "journal-0"}[which]
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if how == "symlink":
        real = tmp_path / "elsewhere"
        real.mkdir(mode=0o700)
        target.symlink_to(real)
    else:
        target.mkdir(mode=0o700)
        if how == "group-writable":
            os.chmod(target, 0o770)
        else:
            os.chown(target, OTHER_UID, -1)
    with pytest.raises(JournalError) as refused:
        Journal.open(cache, STORE)
    message = str(refused.value)
    what = "cache directory" if which == "cache" else "journal directory"
    assert "\n" not in message and message.startswith(f"the {what} {target} ")
    assert message.endswith(": a change planted there would be uploaded with your key")
    # Nothing was taken: once fixed, the store opens (and the slot's lock was not left held).
    if how == "symlink":
        target.unlink()
    else:
        os.chown(target, os.getuid(), -1)
        os.chmod(target, 0o700)
    Journal.open(cache, STORE).close()


def test_open_refuses_a_slot_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / STORE).mkdir(mode=0o700)
    (tmp_path / STORE / "journal-0").write_bytes(b"")
    with pytest.raises(JournalError, match="not a directory"):
        Journal.open(tmp_path, STORE)


def entries(log: Path) -> list[bytes]:
    """The payloads of a log's entries, each checked against its frame."""
    raw, payloads = log.read_bytes(), []
    while raw:
        magic, length, crc = struct.unpack(">4sII", raw[:12])
        payload, raw = raw[12 : 12 + length], raw[12 + length :]
        assert (magic, len(payload), zlib.crc32(payload)) == (b"mjl1", length, crc)
        payloads.append(payload)
    return payloads


def test_put_appends_one_entry_to_a_private_log(journal: Journal) -> None:
    record = Record(name="ino/7", op="put", path="/a.md", memory_id="m1", base_sha="s1", data=b"hi")
    journal.put(record)
    target = journal.directory / "log"
    assert os.listdir(journal.directory) == ["log"]  # one file, whatever the record's name
    assert mode(target) == 0o600
    (payload,) = entries(target)
    head, _, rest = payload.partition(b"\n")
    assert json.loads(head) == record.header() and rest == b"hi"
    # Stamped when written, in UTC: the order of records survives a change of time zone.
    assert datetime.fromisoformat(record.written_at).utcoffset() == timedelta(0)
    assert journal.has("ino/7") and not journal.has("ino/8")
    assert len(journal) == 1 and journal.writes == 1


def test_put_keeps_a_given_timestamp_and_replaces_a_record_of_the_same_name(
    journal: Journal,
) -> None:
    journal.put(Record(name="k", op="put", path="/a", data=b"first", written_at="1"))
    journal.put(Record(name="k", op="put", path="/b", data=b"second", written_at="2"))
    (loaded,) = journal.load()
    assert (loaded.path, loaded.data, loaded.written_at) == ("/b", b"second", "2")
    assert len(journal) == 1 and journal.writes == 2


def test_records_round_trip_and_load_oldest_first(journal: Journal) -> None:
    # Names sort the other way round: the order is the order of writing.
    records = [
        Record(name="c", op="put", path="/x", memory_id=None, data=b"\x00\n\xff", written_at="1"),
        Record(name="b", op="delete", memory_id="m", base_sha="s", written_at="2"),
        Record(name="a", op="conflict", path="/x.conflict-1", data=b"", written_at="3"),
    ]
    for record in records:
        journal.put(record)
    assert journal.load() == records
    assert journal.load()[1].data is None and journal.load()[2].data == b""


def test_drop_forgets_and_a_missing_record_is_no_error(journal: Journal) -> None:
    journal.put(Record(name="a", op="delete"))
    journal.put(Record(name="b", op="delete"))
    journal.drop("a")
    journal.drop("a")
    journal.drop("never")
    assert [r.name for r in journal.load()] == ["b"] and not journal.has("a")


def test_open_removes_a_put_of_the_earlier_format_cut_before_its_rename(tmp_path: Path) -> None:
    slot = dead_slot(tmp_path / STORE, 0, "a")
    (slot / "b.tmp").write_bytes(b'{"name": "b", "op"')  # torn, never renamed
    opened = Journal.open(tmp_path, STORE)
    try:
        assert [r.name for r in opened.load()] == ["a"]
        assert os.listdir(opened.directory) == ["log"]  # "a.rec" moved into the log
    finally:
        opened.close()


@pytest.mark.parametrize(
    "content",
    [
        b"",  # created, nothing written
        b'{"name": "torn", "op": "pu',  # torn inside the header
        b"not json\n",
        b"\xff\xfe\n",
        b'["a list"]\n',
        b'{"name": "torn", "op": "put"}\n',  # no has_data
        b'{"name": "torn", "op": "put", "has_data": false, "colour": "red"}\n',
        b'{"drop": "good"}',  # a log entry, not a record
    ],
)
def test_an_unreadable_record_is_logged_and_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes
) -> None:
    slot = dead_slot(tmp_path / STORE, 0, "good")  # the earlier format: one file per record
    bad = slot / "0-torn.rec"  # before "good.rec": the records after it are moved too
    bad.write_bytes(content)
    with caplog.at_level(logging.ERROR, logger=journal_module.__name__):
        journal = Journal.open(tmp_path, STORE)
    try:
        assert [r.name for r in journal.load()] == ["good"]
        assert len(journal) == 2
    finally:
        journal.close()
    assert bad.read_bytes() == content  # kept for the user to look at
    assert sorted(os.listdir(slot)) == ["0-torn.rec", "log"]  # the slot stays, with both
    assert [r.levelno for r in caplog.records] == [logging.ERROR]
    (logged,) = caplog.records
    assert logged.getMessage().startswith(f"journal record {bad} is unreadable (kept): ")
    assert isinstance(logged.args, tuple) and isinstance(logged.args[1], Exception)  # why
    if content.startswith(b'{"drop"'):
        assert logged.getMessage().endswith(": a drop entry is not a record")


@pytest.mark.parametrize("how", ["other owner", "group-writable", "symlink", "directory"])
def test_a_record_planted_after_open_is_never_loaded(tmp_path: Path, how: str) -> None:
    journal = Journal.open(tmp_path, STORE)
    journal.put(Record(name="mine", op="delete"))
    planted = journal.directory / "planted.rec"
    if how == "symlink":
        real = tmp_path / "real.rec"
        real.write_bytes(json.dumps(Record(name="x", op="delete").header()).encode() + b"\n")
        planted.symlink_to(real)
    elif how == "directory":
        planted.mkdir()
    else:
        planted.write_bytes(json.dumps(Record(name="x", op="delete").header()).encode() + b"\n")
        if how == "other owner":
            os.chown(planted, OTHER_UID, -1)
        else:
            os.chmod(planted, 0o620)
    assert [r.name for r in journal.load()] == ["mine"]  # only the log is read
    journal.close()
    with pytest.raises(JournalError, match=r"^the journal record .*planted\.rec "):
        Journal.open(tmp_path, STORE)  # nor is it taken in by the next mount
    assert os.path.lexists(planted)


def test_a_planted_record_makes_open_refuse_and_keeps_everything(tmp_path: Path) -> None:
    first = Journal.open(tmp_path, STORE)
    first.put(Record(name="mine", op="delete"))
    first.close()  # a slot holding records stays for the next mount
    planted = first.directory / "planted.rec"
    planted.write_bytes(b"{}\n")
    os.chown(planted, OTHER_UID, -1)
    with pytest.raises(
        JournalError,
        match=rf"^the journal record {planted} is owned by uid 54321, not us: a change planted",
    ):
        Journal.open(tmp_path, STORE)
    assert sorted(os.listdir(first.directory)) == ["log", "planted.rec"]
    planted.unlink()
    again = Journal.open(tmp_path, STORE)  # the refused open let go of the slot
    assert again.directory == first.directory and [r.name for r in again.load()] == ["mine"]
    again.close()


def test_close_removes_an_empty_slot_and_keeps_one_with_records(tmp_path: Path) -> None:
    base = tmp_path / STORE
    empty = Journal.open(tmp_path, STORE)
    (empty.directory / "x.tmp").write_bytes(b"torn")  # a temp file does not keep a slot
    (empty.directory / "log.new").write_bytes(b"torn")  # nor does a compaction cut short
    empty.close()
    empty.close()  # twice is harmless
    assert os.listdir(base) == []
    kept = Journal.open(tmp_path, STORE)
    kept.put(Record(name="a", op="delete"))
    kept.close()
    assert sorted(os.listdir(base)) == ["journal-0", "journal-0.lock"]
    assert Journal.pending(tmp_path, STORE) == (base, 1)


def test_a_second_mount_takes_the_next_slot(tmp_path: Path) -> None:
    first = Journal.open(tmp_path, STORE)
    first.put(Record(name="a", op="delete"))
    second = Journal.open(tmp_path, STORE)
    try:
        assert second.directory.name == "journal-1"
        assert second.load() == []  # records of a live daemon are its own
        assert first.has("a")
    finally:
        second.close()
        first.close()


def test_open_adopts_records_of_dead_slots_and_removes_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    base = tmp_path / STORE
    base.mkdir(mode=0o700)
    dead_slot(base, 1, "b", "a")
    (base / "journal-1" / "cut.tmp").write_bytes(b"x")
    dead_slot(base, 4, "c")  # after never-used slots 2 and 3
    live = dead_slot(base, 5, "d")
    dead_slot(base, 6, "e")
    (base / "journal-6.lock").unlink()  # its lock file lost (a cache cleaner): still adopted
    with held(base / "journal-5.lock"), caplog.at_level(logging.INFO, journal_module.__name__):
        opened = Journal.open(tmp_path, STORE)
        try:
            assert opened.directory.name == "journal-0"
            assert [r.name for r in opened.load()] == ["a", "b", "c", "e"]
            assert [r.getMessage() for r in caplog.records] == [
                f"adopted journal record {name}.rec from {base / f'journal-{slot}'}"
                for name, slot in (("a", 1), ("b", 1), ("c", 4), ("e", 6))
            ]  # the user can tell where a replayed change came from
            assert sorted(os.listdir(base)) == [
                "journal-0",
                "journal-0.lock",
                "journal-5",
                "journal-5.lock",
            ]  # no lock files made for the slots never used
            assert os.listdir(live) == ["d.rec"]
        finally:
            opened.close()
    assert Journal.pending(tmp_path, STORE) == (base, 5)


def test_open_takes_a_dead_slot_with_its_records_first(tmp_path: Path) -> None:
    base = tmp_path / STORE
    base.mkdir(mode=0o700)
    dead_slot(base, 0, "a")
    dead_slot(base, 1, "b")
    with held(base / "journal-0.lock"):
        opened = Journal.open(tmp_path, STORE)
    try:
        assert opened.directory.name == "journal-1"
        assert [r.name for r in opened.load()] == ["b"]
    finally:
        opened.close()


def test_a_dead_slot_left_empty_is_removed(tmp_path: Path) -> None:
    base = tmp_path / STORE
    base.mkdir(mode=0o700)
    dead_slot(base, 1)
    (base / "journal-2.lock").touch()  # a lock without its directory
    Journal.open(tmp_path, STORE).close()
    assert os.listdir(base) == []


def test_adoption_refuses_a_planted_record(tmp_path: Path) -> None:
    base = tmp_path / STORE
    base.mkdir(mode=0o700)
    dead = dead_slot(base, 1, "a")
    os.chown(dead / "a.rec", OTHER_UID, -1)
    with pytest.raises(JournalError, match=r"^the journal record .*uploaded with your key$"):
        Journal.open(tmp_path, STORE)
    assert os.listdir(dead) == ["a.rec"]
    assert not (base / "journal-0").exists()  # the slot taken was released (and was empty)


def test_every_slot_in_use(tmp_path: Path) -> None:
    base = tmp_path / STORE
    base.mkdir(mode=0o700)
    fds = []
    try:
        for slot in range(MAX_SLOTS):
            fd = os.open(base / f"journal-{slot}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            fds.append(fd)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(JournalError, match=f"all {MAX_SLOTS} journal slots of .* in use"):
            Journal.open(tmp_path, STORE)
    finally:
        for fd in fds:
            os.close(fd)
    Journal.open(tmp_path, STORE).close()  # the last slot is usable: 64 means 64


def test_a_lock_file_removed_by_its_leaving_daemon_is_not_a_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon leaving an empty slot removes its lock file, then lets go of its lock. A mount
    that opened that file just before, and locks it just after, holds a lock nobody else can
    see (the next mount makes the file anew and takes the same slot): it must start over."""
    lock = tmp_path / STORE / "journal-0.lock"
    real = fcntl.flock
    removed: list[Path] = []

    def after_the_leaving_daemon(fd: int, operation: int) -> None:
        if not removed:  # the file the first open found: the other daemon removes it meanwhile
            lock.unlink()
            removed.append(lock)
        real(fd, operation)

    with monkeypatch.context() as patched:
        patched.setattr(fcntl, "flock", after_the_leaving_daemon)
        first = Journal.open(tmp_path, STORE)
    second = Journal.open(tmp_path, STORE)
    try:
        assert (first.directory.name, second.directory.name) == ("journal-0", "journal-1")
        assert lock.exists()
    finally:
        second.close()
        first.close()


def test_a_slot_removed_by_its_leaving_daemon_during_open_is_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon leaving an empty slot removes its directory: a mount starting at that moment
    saw the directory a moment before, and must take the slot as free, not fail the mount."""
    leaving = Journal.open(tmp_path, STORE)
    slot = leaving.directory
    real = os.path.lexists

    def seen_just_before_it_went(path: str | os.PathLike[str]) -> bool:
        found = real(path)
        if Path(path) == slot and found:
            leaving.close()  # empty: its directory and lock file go
        return found

    with monkeypatch.context() as patched:
        patched.setattr(os.path, "lexists", seen_just_before_it_went)
        starting = Journal.open(tmp_path, STORE)
    try:
        assert not real(slot) or starting.directory == slot
        starting.put(Record(name="a", op="delete"))
        assert starting.has("a")
    finally:
        starting.close()


def open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_a_cache_directory_without_locks_refuses_with_the_system_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """flock failing for another reason than a lock held (a file system without locks): the
    mount fails with that error (the daemon's one line), and keeps no descriptor open."""

    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    before = open_descriptors()
    with monkeypatch.context() as patched:
        patched.setattr(fcntl, "flock", no_locks)
        with pytest.raises(OSError, match=r"No locks available"):
            Journal.open(tmp_path, STORE)
    assert open_descriptors() == before


def test_a_log_that_cannot_be_repaired_refuses_the_mount_and_frees_the_slot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A torn tail whose cut cannot be flushed (an I/O error): ``open`` fails with that error,
    closes what it opened and leaves the records for the next try."""
    journal = Journal.open(tmp_path, STORE)
    journal.put(Record(name="a", op="delete", written_at="1"))
    journal.close()
    with (journal.directory / "log").open("ab") as log:
        log.write(b"mjl1torn")  # the start of an entry a crash cut short

    def broken(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    before = open_descriptors()
    with monkeypatch.context() as patched:
        patched.setattr(os, "fdatasync", broken)
        with pytest.raises(OSError, match=r"Input/output error"):
            Journal.open(tmp_path, STORE)
    assert open_descriptors() == before
    again = Journal.open(tmp_path, STORE)
    try:
        assert again.directory == journal.directory
        assert [r.name for r in again.load()] == ["a"]
    finally:
        again.close()


def test_pending_counts_every_slot_and_changes_nothing(tmp_path: Path) -> None:
    base = tmp_path / "a_b"
    assert Journal.pending(tmp_path, "a/b") == (base, 0)
    assert not base.exists()
    base.mkdir(mode=0o700)
    dead_slot(base, 0, "x", "y")
    dead_slot(base, 3, "z")
    (base / "journal-3" / "t.tmp").write_bytes(b"")
    (base / "journal-3" / "log").mkdir()  # not a log it can read: counts nothing
    assert Journal.pending(tmp_path, "a/b") == (base, 3)
    assert sorted(os.listdir(base / "journal-3")) == ["log", "t.tmp", "z.rec"]


# -- the log: torn tails, drops, compaction, the earlier format ------------------------------


def closed_with(tmp_path: Path, *records: Record) -> Path:
    """The log of a slot whose daemon wrote ``records`` and stopped."""
    journal = Journal.open(tmp_path, STORE)
    for record in records:
        journal.put(record)
    journal.close()
    return journal.directory / "log"


def names(tmp_path: Path) -> list[str]:
    journal = Journal.open(tmp_path, STORE)
    try:
        return [r.name for r in journal.load()]
    finally:
        journal.close()


def test_every_cut_of_the_last_entry_loses_only_that_entry(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = closed_with(tmp_path, Record(name="a", op="delete"), Record(name="b", op="delete"))
    whole = log.read_bytes()
    closed_with(tmp_path, Record(name="c", op="put", path="/c", data=b"content of c"))
    full = log.read_bytes()
    for cut in range(len(whole) + 1, len(full)):  # a crash in the middle of appending "c"
        log.write_bytes(full[:cut])
        with caplog.at_level(logging.WARNING, logger=journal_module.__name__):
            caplog.clear()
            assert names(tmp_path) == ["a", "b"]
        assert [r.getMessage() for r in caplog.records] == [
            f"journal log {log}: its last {cut - len(whole)} byte(s) are a torn entry (a write "
            "cut short by a crash): ignored"
        ]
        assert log.read_bytes() == whole  # cut off: what is appended next is found
    assert names(tmp_path) == ["a", "b"]


@pytest.mark.parametrize(
    "tail",
    [
        b"\0" * 40,  # the size grew before the data reached the disk
        b"mjl2" + struct.pack(">II", 1, zlib.crc32(b"x")) + b"x",  # not our magic
        b"mjl1" + struct.pack(">II", 1, zlib.crc32(b"y")) + b"x",  # checksum of other bytes
        b"mjl1" + struct.pack(">II", 99, 0) + b"short",  # shorter than its length says
    ],
)
def test_a_torn_tail_is_ignored_and_appends_after_it_are_found(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, tail: bytes
) -> None:
    log = closed_with(tmp_path, Record(name="a", op="put", path="/a", data=b"1", written_at="1"))
    with log.open("ab") as handle:
        handle.write(tail)
    with caplog.at_level(logging.WARNING, logger=journal_module.__name__):
        journal = Journal.open(tmp_path, STORE)
    assert f"its last {len(tail)} byte(s) are a torn entry" in caplog.text
    journal.put(Record(name="b", op="put", path="/b", data=b"2", written_at="2"))
    journal.close()
    assert names(tmp_path) == ["a", "b"]


def test_an_entry_that_passes_its_checksum_but_is_no_record_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = closed_with(tmp_path, Record(name="a", op="delete"))
    size = log.stat().st_size
    with log.open("ab") as handle:
        handle.write(b"mjl1" + struct.pack(">II", 8, zlib.crc32(b"not json")) + b"not json")
    closed_with(tmp_path, Record(name="b", op="delete"))
    with caplog.at_level(logging.ERROR, logger=journal_module.__name__):
        assert names(tmp_path) == ["a", "b"]
    logged = caplog.records[0]  # each time the log is read
    assert logged.getMessage().startswith(f"journal entry at byte {size} is unreadable (skipped): ")
    assert isinstance(logged.args, tuple) and isinstance(logged.args[1], Exception)  # why


def test_drops_are_durable_and_the_last_one_empties_the_log(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path, STORE)
    for name in "abc":
        journal.put(Record(name=name, op="delete", written_at=name))
    journal.drop("b")
    assert [json.loads(p) for p in entries(journal.directory / "log")][-1] == {"drop": "b"}
    journal.close()
    journal = Journal.open(tmp_path, STORE)  # the drop survived; its spans are known again
    assert [r.name for r in journal.load()] == ["a", "c"] and len(journal) == 2
    journal.drop("c")
    journal.drop("a")
    assert (journal.directory / "log").stat().st_size == 0 and len(journal) == 0
    journal.put(Record(name="d", op="delete"))  # a fresh start
    assert [r.name for r in journal.load()] == ["d"]
    journal.drop("d")
    journal.close()
    assert os.listdir(tmp_path / STORE) == []  # an empty log does not keep the slot


def test_a_drop_left_for_the_next_flush_costs_no_fdatasync_until_then(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = Journal.open(tmp_path, STORE)
    for name in "abc":
        journal.put(Record(name=name, op="delete", written_at=name))
    flushes: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (flushes.append(fd), real(fd))[1])
    journal.drop("a", flush=False)
    journal.drop("b", flush=False)
    assert flushes == [] and journal.unflushed
    assert [json.loads(p) for p in entries(journal.directory / "log")][-2:] == [
        {"drop": "a"},
        {"drop": "b"},
    ]  # written: a kill -9 cannot lose them (the page cache has them)
    journal.put(Record(name="d", op="delete", written_at="d"))
    assert len(flushes) == 1 and not journal.unflushed  # the put's flush covers both drops
    journal.flush()
    assert len(flushes) == 1  # nothing waits: no system call
    journal.drop("c", flush=False)
    journal.flush()
    journal.flush()
    assert len(flushes) == 2 and not journal.unflushed
    journal.drop("d", flush=False)  # the last record: the log is cut to nothing, not flushed
    assert len(flushes) == 2 and journal.unflushed
    assert (journal.directory / "log").stat().st_size == 0
    journal.put(Record(name="e", op="delete", written_at="e"))
    journal.drop("e", flush=False)
    journal.close()  # flushes what waits
    assert len(flushes) == 4
    assert names(tmp_path) == []


def test_compaction_keeps_every_live_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_module, "COMPACT_BYTES", 1000)
    journal = Journal.open(tmp_path, STORE)
    journal.put(Record(name="keep", op="put", path="/k", data=b"k" * 100, written_at="0"))
    for n in range(60):  # a file saved over and over while the server is away
        journal.put(Record(name="busy", op="put", path="/b", data=b"%d" % n, written_at=str(n)))
        journal.put(Record(name=f"gone{n}", op="delete"))
        journal.drop(f"gone{n}")
        assert journal.directory.joinpath("log").stat().st_size < 2000
        if n == 30:  # the spans of the entries found by open are right too
            journal.close()
            journal = Journal.open(tmp_path, STORE)
    assert [(r.name, r.data) for r in journal.load()] == [("keep", b"k" * 100), ("busy", b"59")]
    journal.drop("keep")
    assert [r.name for r in journal.load()] == ["busy"]
    journal.close()
    assert os.listdir(tmp_path / STORE / "journal-0") == ["log"]
    assert names(tmp_path) == ["busy"]


def log_names(journal: Journal) -> list[str]:
    return [
        json.loads(p.partition(b"\n")[0]).get("name", "drop")
        for p in entries(journal.directory / "log")
    ]


def test_compaction_waits_until_most_of_the_log_is_dead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_module, "COMPACT_BYTES", 300)
    journal = Journal.open(tmp_path, STORE)
    try:
        for name in "fedcba":  # names the other way round from the order of writing
            journal.put(Record(name=name, op="put", path="/x", data=b"x" * 40))
        journal.drop("f")  # most of the log is still live: appended, not rewritten
        journal.drop("e")
        assert log_names(journal) == ["f", "e", "d", "c", "b", "a", "drop", "drop"]
        journal.drop("d")  # now half of it is dead: the live entries are copied, in order
        assert log_names(journal) == ["c", "b", "a"]
        journal.put(Record(name="g", op="put", path="/x", data=b"x" * 40))
        journal.drop("c")
        journal.drop("b")  # and again, from the spans of the compacted log
        assert log_names(journal) == ["a", "g"]
        assert [r.name for r in journal.load()] == ["a", "g"]
    finally:
        journal.close()


def test_compaction_starts_at_compact_bytes_and_half_dead(
    journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = Record(name="a", op="put", path="/a", data=b"1", written_at="t")
    journal.put(record)
    size = journal.directory.joinpath("log").stat().st_size
    monkeypatch.setattr(journal_module, "COMPACT_BYTES", 2 * size)
    journal.put(Record(name="a", op="put", path="/a", data=b"2", written_at="t"))
    assert log_names(journal) == ["a"]  # 2 entries, 1 live: exactly half dead, at the limit
    assert [r.data for r in journal.load()] == [b"2"]


def test_a_compaction_that_fails_before_its_rename_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(journal_module, "COMPACT_BYTES", 1)
    journal = Journal.open(tmp_path, STORE)
    journal.put(Record(name="a", op="put", data=b"1" * 100, written_at="1"))
    journal.put(Record(name="b", op="delete", written_at="2"))

    def fail(*args: object) -> None:
        raise OSError(5, "Input/output error")

    with monkeypatch.context() as patched:
        patched.setattr(os, "replace", fail)
        journal.put(Record(name="a", op="put", data=b"3" * 100, written_at="3"))  # not half dead
        with caplog.at_level(logging.WARNING, logger=journal_module.__name__):
            journal.put(Record(name="a", op="put", data=b"4" * 100, written_at="4"))  # durable
    (logged,) = caplog.records
    assert logged.getMessage() == (
        f"journal log {journal.directory / 'log'} not compacted: [Errno 5] Input/output error"
    )
    assert log_names(journal) == ["a", "b", "a", "a"]
    assert sorted(os.listdir(journal.directory)) == ["log", "log.new"]
    journal.put(Record(name="a", op="put", data=b"5", written_at="5"))  # over the longer one
    assert log_names(journal) == ["b", "a"] and mode(journal.directory / "log") == 0o600
    journal.close()
    assert os.listdir(journal.directory) == ["log"]
    (journal.directory / "log.new").write_bytes(b"x" * 100)  # as a crash leaves it
    again = Journal.open(tmp_path, STORE)
    try:
        assert os.listdir(again.directory) == ["log"]
        assert [(r.name, r.data) for r in again.load()] == [("b", None), ("a", b"5")]
    finally:
        again.close()


@pytest.mark.parametrize("cut", [True, False])  # the torn bytes cut off again, or not
@pytest.mark.parametrize("step", ["pwrite", "fdatasync"])
def test_a_failed_append_leaves_no_torn_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str, cut: bool
) -> None:
    journal = Journal.open(tmp_path, STORE)
    journal.put(Record(name="x", op="delete"))
    journal.drop("x")  # the log emptied: appends start again at its beginning
    journal.put(Record(name="a", op="delete", written_at="1"))
    size = journal.directory.joinpath("log").stat().st_size
    real = os.pwrite

    def full(*args: object) -> object:
        if step == "pwrite":
            real(args[0], b"torn" * 100, args[2])  # type: ignore[arg-type]  # part of it lands
        raise OSError(28, "No space left on device")

    def broken(*args: object) -> None:
        raise OSError(5, "Input/output error")

    with monkeypatch.context() as patched:
        patched.setattr(os, step, full)
        if not cut:
            patched.setattr(os, "ftruncate", broken)
        with pytest.raises(OSError, match="No space"):  # the error of the append itself
            journal.put(Record(name="b", op="delete"))
    after = journal.directory.joinpath("log").stat().st_size
    assert after == size if cut else after > size
    assert not journal.has("b") and journal.writes == 2  # x and a
    journal.put(Record(name="c", op="delete", written_at="2"))  # over the torn bytes, if any
    assert [r.name for r in journal.load()] == ["a", "c"]
    journal.close()
    assert names(tmp_path) == ["a", "c"]  # what is left of them is a torn tail, cut at open


def test_records_of_the_earlier_format_move_into_the_log(tmp_path: Path) -> None:
    slot = dead_slot(tmp_path / STORE, 0, "b", "a")  # written by an earlier memfs
    data = Record(name="c", op="put", path="/c.md", data=b"\x00content\n", written_at="c")
    (slot / "c.rec").write_bytes(json.dumps(data.header()).encode() + b"\n" + data.data)
    opened = Journal.open(tmp_path, STORE)
    try:
        assert opened.directory == slot and os.listdir(slot) == ["log"]
        assert opened.load() == [Record(name=n, op="delete", written_at=n) for n in "ab"] + [data]
        assert opened.has("a") and len(opened) == 3 and opened.writes == 0
        opened.drop("a")
    finally:
        opened.close()
    assert names(tmp_path) == ["b", "c"]


def test_open_adopts_the_log_of_a_dead_slot(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    base = tmp_path / STORE
    first = Journal.open(tmp_path, STORE)
    second = Journal.open(tmp_path, STORE)
    second.put(Record(name="x", op="put", path="/x", data=b"x", written_at="2"))
    second.put(Record(name="y", op="delete", written_at="1"))
    second.put(Record(name="z", op="delete"))
    second.drop("z")
    second.close()  # as a killed daemon leaves it: records in journal-1/log
    first.close()
    assert Journal.pending(tmp_path, STORE) == (base, 2)
    with caplog.at_level(logging.INFO, logger=journal_module.__name__):
        opened = Journal.open(tmp_path, STORE)
    try:
        assert opened.directory.name == "journal-0"
        assert [(r.name, r.data) for r in opened.load()] == [("y", None), ("x", b"x")]
        assert [r.getMessage() for r in caplog.records] == [
            f"adopted journal record {name} from {base / 'journal-1'}" for name in "xy"
        ]
        assert sorted(os.listdir(base)) == ["journal-0", "journal-0.lock"]
    finally:
        opened.close()


@pytest.mark.parametrize("slot", [0, 1])  # the slot taken, or a dead one to adopt
@pytest.mark.parametrize("how", ["other owner", "group-writable", "symlink"])
def test_a_planted_log_is_refused(tmp_path: Path, how: str, slot: int) -> None:
    first = Journal.open(tmp_path, STORE)
    second = Journal.open(tmp_path, STORE)
    (first if slot == 0 else second).put(Record(name="a", op="delete"))
    second.close()
    first.close()
    log = tmp_path / STORE / f"journal-{slot}" / "log"
    if how == "symlink":
        real = tmp_path / "real-log"
        log.rename(real)
        log.symlink_to(real)
    elif how == "other owner":
        os.chown(log, OTHER_UID, -1)
    else:
        os.chmod(log, 0o620)
    with pytest.raises(JournalError, match=rf"^the journal log {log} .*uploaded with your key$"):
        Journal.open(tmp_path, STORE)
    assert os.path.lexists(log)  # kept for the user to look at


def test_a_short_write_is_continued(journal: Journal, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.pwrite
    monkeypatch.setattr(os, "pwrite", lambda fd, data, offset: real(fd, data[:7], offset))
    record = Record(name="a", op="put", path="/a", data=b"a longer content", written_at="1")
    journal.put(record)
    monkeypatch.undo()
    assert journal.load() == [record]
    assert len(entries(journal.directory / "log")) == 1
