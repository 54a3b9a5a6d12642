"""The write-back journal on its own, as a crash leaves it: records that survive, records that
are torn or planted, slots of dead daemons, and locks held by live ones.

No mount and no server: the journal is files in a directory. A lock "held by another process"
is a ``flock`` on a separate open file description, which is what ``flock`` tells apart (two
processes, or two ``open``s in one, conflict alike).

Mutants left alive on purpose (``make mutate``): ``missing_ok``, ``same = False`` and the
``OSError`` close in ``_try_lock`` only matter in a race with another process between two system
calls; ``O_RDONLY & O_DIRECTORY`` opens the directory all the same; ``create``/``parents``/
``tighten`` flags where the path always exists or ``False``/``None`` mean the same; the compact
JSON separators and ``"UTF-8"`` are spellings; ``pending``'s ``OSError`` fallback is not reached
by ``glob``.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import stat
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


def test_put_writes_one_private_file_atomically(journal: Journal) -> None:
    record = Record(name="ino/7", op="put", path="/a.md", memory_id="m1", base_sha="s1", data=b"hi")
    journal.put(record)
    target = journal.directory / "ino_7.rec"
    assert Journal.file_name("ino/7") == "ino_7.rec"
    assert os.listdir(journal.directory) == ["ino_7.rec"]  # no temp file left behind
    assert mode(target) == 0o600
    head, _, rest = target.read_bytes().partition(b"\n")
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


def test_a_put_over_a_longer_temp_file_left_by_a_crash_writes_only_itself(
    journal: Journal,
) -> None:
    (journal.directory / "k.tmp").write_bytes(b"x" * 100)  # a put cut before its rename
    journal.put(Record(name="k", op="put", data=b"new"))
    assert os.listdir(journal.directory) == ["k.rec"]  # the same temp file, renamed
    assert [r.data for r in journal.load()] == [b"new"]


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


def test_load_removes_a_put_cut_before_its_rename(journal: Journal) -> None:
    journal.put(Record(name="a", op="delete"))
    (journal.directory / "b.tmp").write_bytes(b'{"name": "b", "op"')  # torn, never renamed
    assert [r.name for r in journal.load()] == ["a"]
    assert sorted(os.listdir(journal.directory)) == ["a.rec"]


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
    ],
)
def test_an_unreadable_record_is_logged_and_kept(
    journal: Journal, caplog: pytest.LogCaptureFixture, content: bytes
) -> None:
    journal.put(Record(name="good", op="delete"))
    bad = journal.directory / "torn.rec"
    bad.write_bytes(content)
    with caplog.at_level(logging.ERROR, logger=journal_module.__name__):
        assert [r.name for r in journal.load()] == ["good"]
    assert bad.read_bytes() == content  # kept for the user to look at
    assert [r.levelno for r in caplog.records] == [logging.ERROR]
    (logged,) = caplog.records
    assert logged.getMessage().startswith(f"journal record {bad} is unreadable (kept): ")
    assert isinstance(logged.args, tuple) and isinstance(logged.args[1], Exception)  # why
    assert len(journal) == 2


@pytest.mark.parametrize("how", ["other owner", "group-writable", "symlink", "directory"])
def test_a_record_planted_after_open_is_never_loaded(
    journal: Journal, caplog: pytest.LogCaptureFixture, tmp_path: Path, how: str
) -> None:
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
    with caplog.at_level(logging.ERROR, logger=journal_module.__name__):
        assert journal.load() == []
    assert "planted.rec" in caplog.text
    assert os.path.lexists(planted)
    if how == "directory":
        planted.rmdir()  # lets the fixture's close remove the slot


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
    assert sorted(os.listdir(first.directory)) == ["mine.rec", "planted.rec"]
    planted.unlink()
    again = Journal.open(tmp_path, STORE)  # the refused open let go of the slot
    assert again.directory == first.directory and [r.name for r in again.load()] == ["mine"]
    again.close()


def test_close_removes_an_empty_slot_and_keeps_one_with_records(tmp_path: Path) -> None:
    base = tmp_path / STORE
    empty = Journal.open(tmp_path, STORE)
    (empty.directory / "x.tmp").write_bytes(b"torn")  # a temp file does not keep a slot
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


def test_pending_counts_every_slot_and_changes_nothing(tmp_path: Path) -> None:
    base = tmp_path / "a_b"
    assert Journal.pending(tmp_path, "a/b") == (base, 0)
    assert not base.exists()
    base.mkdir(mode=0o700)
    dead_slot(base, 0, "x", "y")
    dead_slot(base, 3, "z")
    (base / "journal-3" / "t.tmp").write_bytes(b"")
    assert Journal.pending(tmp_path, "a/b") == (base, 3)
    assert sorted(os.listdir(base / "journal-3")) == ["t.tmp", "z.rec"]
