"""The write-back journal: acknowledged changes on disk until the server has them.

Owns one directory per running mount,
``<cache dir>/<store id>/workspace-<host>-<digest>/journal-<slot>/``, held with an exclusive
``flock`` on ``journal-<slot>.lock`` for the daemon's life (two mounts of one store take two
slots; a slot whose daemon died is free again and its records are replayed by the next mount of
the store). A slot left empty (clean unmount, records adopted) is removed with its lock file, so
the cache directory does not fill up with them.

A journal belongs to a workspace (``memfs.writeback.workspace``: the API and the normalised base
URL), as well as to its store (on Databricks the store, actor and session): the directory
``workspace-…`` is named by all of them and records its workspace in ``workspace.json``, so a
mount of the same store id on another server never opens it, let alone uploads its records
there; ``not_replayed`` lists it for ``memfs status``. Earlier versions kept the slots directly
in ``<cache dir>/<store id>/`` and recorded no workspace: those are never replayed unless the
user asks (``open(..., replay_legacy=True)``: ``memfs mount --replay-legacy-journal``), which
adopts them like the slots of a dead daemon.

The slot holds one append-only file, ``log``: a sequence of entries, each a 12-byte frame
header (magic ``mjl1``, payload length and CRC-32, big-endian) then the payload. A record's
payload is a one-line JSON header (``Record`` without its data), a newline, then the raw
content bytes, if any; a drop's is ``{"drop": <name>}``. The live records are the last record
of each name not dropped since. Format of earlier versions, still read: one file
``<name>.rec`` per record, holding a record's payload; ``open`` moves them into the log.

Trust: a record is uploaded with the user's key, so a record another local user could have
planted is never read. ``open`` refuses (``JournalError``, one line) a cache directory, store
directory or slot that is not the user's own or that others can write to, and any record file
that is not a regular file of the user's; the directories it creates are 0700, records 0600.

Durability: ``put`` appends one entry and ``fdatasync``s the log before it returns (one flush
per commit: the log's directory entry was made durable when the log was created; on macOS,
which has no ``fdatasync``, ``F_FULLFSYNC``: ``memfs.host.portable.data_sync``). So after
``put`` returns, a ``kill -9`` (or a power cut) cannot lose the record. ``drop`` does the same,
except ``drop(name, flush=False)`` (the record's change is on the server): its entry is written
and left for the next flush, any ``put``'s, ``flush()`` or ``close``; a ``kill -9`` cannot lose
it (the page cache has it), a power cut can, and then the record is replayed, which is harmless
for a change the server has (docs/writeback.md, "Crash and restart"). Entries are appended in
order and everything before the last flushed entry is on disk, so what a power cut can tear is
after it: the one entry being appended, and drops not flushed yet. ``open`` cuts the log at the
first entry whose length or checksum does not match (nothing but such drops follows it). A
failed append is cut off the same way; if even that fails, the next append is written over it
(entries are written at the end of the last whole one, not appended), so torn bytes are only
ever at the end.
When no record is live the log is truncated to nothing; when dead entries make up more than
half of a log over ``COMPACT_BYTES``, the live ones are copied to ``log.new``, flushed, and
renamed over the log (a crash before the rename leaves the old log, which ``open`` uses).

This module stores and loads records; it must not decide what they mean (``vfs`` does), talk to
the server, or hold clean cache data. See docs/writeback.md for the states and the replay.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import struct
import zlib
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from memfs.host.portable import NOFOLLOW, data_sync, lock_exclusive, read_at, write_at
from memfs.host.private import NotPrivateError, check_private_file, private_dir
from memfs.writeback.workspace import PREFIX as WORKSPACE_PREFIX
from memfs.writeback.workspace import WorkspaceId, WorkspaceMismatchError
from memfs.writeback.workspace import record as record_workspace
from memfs.writeback.workspace import recorded as recorded_workspace

log = logging.getLogger(__name__)

MAX_SLOTS = 64
LOG = "log"
COMPACT_BYTES = 1 << 20  # a log this large is rewritten when most of it is dead entries
_FRAME = struct.Struct(">4sII")  # magic, payload length, CRC-32 of the payload
_MAGIC = b"mjl1"
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")

Op = Literal["put", "delete", "conflict"]
# Why a path another user can change is refused (the end of the one-line message).
_WHY = ": a change planted there would be uploaded with your key"


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/memfs``, else ``~/.cache/memfs``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "memfs"


@dataclass
class Record:
    """One acknowledged change not yet known to be on the server.

    - ``put``: make memory ``memory_id`` (None: a new memory) hold ``data`` (None: unchanged) at
      ``path``; ``base_sha`` is the server content the change was made on (the precondition),
      ``remote_path`` where the server had it; ``description`` a new one (None: unchanged);
    - ``delete``: delete ``memory_id`` if its content is still ``base_sha``;
    - ``conflict``: create ``path`` (a ``.conflict-`` sibling) holding ``data``.
    """

    name: str
    op: Op
    path: str | None = None
    memory_id: str | None = None
    remote_path: str | None = None
    base_sha: str | None = None
    data: bytes | None = field(default=None, repr=False)
    written_at: str = ""
    description: str | None = None  # put: the new description (None: unchanged)

    def header(self) -> dict[str, Any]:
        header = asdict(self)
        header.pop("data")
        header["has_data"] = self.data is not None
        if self.description is None:  # the format of records without one is unchanged
            header.pop("description")
        return header


def _fsync_dir(path: Path) -> None:
    if not hasattr(os, "O_DIRECTORY"):  # Windows: a directory cannot be opened (NTFS journals it)
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class JournalError(Exception):
    """The journal directory cannot be used (the message is one line for a person)."""


def _private_dir(path: Path, what: str, *, create: bool = True, tighten: bool = True) -> None:
    try:
        private_dir(path, what, why=_WHY, create=create, tighten=tighten)
    except NotPrivateError as exc:
        raise JournalError(str(exc)) from None


def _check_record(path: Path, what: str = "journal record") -> None:
    try:
        check_private_file(path, what, why=_WHY)
    except NotPrivateError as exc:
        raise JournalError(str(exc)) from None


def _payload(record: Record) -> bytes:
    header = json.dumps(record.header(), separators=(",", ":")).encode("utf-8")
    return header + b"\n" + (record.data or b"")


def _frame(payload: bytes) -> bytes:
    return _FRAME.pack(_MAGIC, len(payload), zlib.crc32(payload)) + payload


def _decode(payload: bytes) -> Record | str:
    """The record a payload holds, or the name a drop entry forgets."""
    head, _, rest = payload.partition(b"\n")
    header = json.loads(head)
    if isinstance(header, dict) and set(header) == {"drop"}:
        return str(header["drop"])
    data = rest if header.pop("has_data") else None
    return Record(data=data, **header)


def _scan(raw: bytes) -> tuple[dict[str, tuple[Record, int, int]], int]:
    """The live records of a log's bytes, each with where its entry starts and ends, in the
    order written; and where the whole entries end (what follows is a torn last entry)."""
    live: dict[str, tuple[Record, int, int]] = {}
    offset = 0
    while offset + _FRAME.size <= len(raw):
        magic, length, crc = _FRAME.unpack_from(raw, offset)
        start = offset + _FRAME.size
        payload = raw[start : start + length]
        if magic != _MAGIC or len(payload) != length or zlib.crc32(payload) != crc:
            break
        try:
            entry = _decode(payload)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            log.error("journal entry at byte %d is unreadable (skipped): %s", offset, exc)
        else:
            name = entry if isinstance(entry, str) else entry.name
            live.pop(name, None)
            if not isinstance(entry, str):
                live[name] = (entry, offset, start + length)
        offset = start + length
    return live, offset


def _write_at(fd: int, data: bytes, offset: int) -> None:
    """Write ``data`` at ``offset`` (not appended: after a failed append that could not be cut
    off, the next one overwrites the torn bytes, so they are only ever at the end)."""
    view = memoryview(data)
    while view:
        written = write_at(fd, view, offset)
        view, offset = view[written:], offset + written


class Journal:
    """The records of one mount; see the module docstring."""

    def __init__(self, directory: Path, lock_fd: int | None = None) -> None:
        self.directory = directory
        self._lock_fd = lock_fd
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.writes = 0
        self._log = directory / LOG
        (directory / (LOG + ".new")).unlink(missing_ok=True)  # a compaction cut before its rename
        created = not os.path.lexists(self._log)
        if not created:
            _check_record(self._log, "journal log")  # before it is opened, let alone read
        try:
            self._fd = os.open(self._log, os.O_RDWR | os.O_CREAT | NOFOLLOW, 0o600)
        except OSError as exc:
            raise JournalError(f"cannot use the journal log {self._log}: {exc.strerror}") from None
        try:
            if created:
                _fsync_dir(directory)  # the log's name is durable before any record is in it
            raw = read_at(self._fd, os.fstat(self._fd).st_size, 0)
            live, self._size = _scan(raw)
            if self._size < len(raw):
                log.warning(
                    "journal log %s: its last %d byte(s) are a torn entry (a write cut short "
                    "by a crash): ignored",
                    self._log,
                    len(raw) - self._size,
                )
                os.ftruncate(self._fd, self._size)
                data_sync(self._fd)
        except BaseException:
            os.close(self._fd)
            raise
        # record name -> where its entry is in the log (the content stays on disk); _live_bytes
        # is the sum of their lengths, kept with every change of _live (a close must not add up
        # every pending record to decide whether to compact)
        self._live = {name: (start, end) for name, (_, start, end) in live.items()}
        self._live_bytes = sum(end - start for start, end in self._live.values())
        # True while the log holds a drop (or a truncation) not flushed yet: ``drop(flush=False)``
        # sets it, any flush of the log clears it
        self.unflushed = False

    @classmethod
    def open(
        cls,
        cache_dir: Path,
        store_id: str,
        workspace: WorkspaceId | None = None,
        *,
        replay_legacy: bool = False,
    ) -> Journal:
        """Take the first free slot of ``workspace``'s journal of ``store_id``; move records of
        its other free slots into it, and with ``replay_legacy`` those of the free slots of the
        store's journal of an earlier memfs, which recorded no workspace (``workspace`` None:
        that journal itself)."""
        _private_dir(cache_dir, "cache directory", tighten=False)  # the user's choice of mode
        base = cache_dir / _SAFE.sub("_", store_id)
        _private_dir(base, "journal directory")
        home = base
        if workspace is not None:
            home = base / workspace.directory_name(store_id)
            _private_dir(home, "journal directory")
            try:
                record_workspace(home, workspace, store_id)
            except (NotPrivateError, WorkspaceMismatchError) as exc:
                raise JournalError(str(exc)) from None
        mine: Journal | None = None
        try:
            mine = cls._take_slots(home, None)
            if replay_legacy and workspace is not None:
                cls._take_slots(base, mine)
            mine._migrate()  # before anything is loaded, let alone uploaded
        except JournalError:
            if mine is not None:
                mine.close()  # records stay where they are, for the user to look at
            raise
        return mine

    @classmethod
    def _take_slots(cls, base: Path, mine: Journal | None) -> Journal:
        """Lock every free slot of ``base``: the first becomes ``mine`` (if None yet), the
        records of the others are adopted by it."""
        try:
            for slot in range(MAX_SLOTS):
                lock = base / f"journal-{slot}.lock"
                directory = base / f"journal-{slot}"
                if mine is not None and not lock.exists() and not directory.exists():
                    continue  # never used: nothing to adopt (and no lock file to leave behind)
                if os.path.lexists(directory):
                    try:
                        _private_dir(directory, "journal directory", create=False)
                    except JournalError:
                        if os.path.lexists(directory):
                            raise  # there, and not ours alone
                        # gone meanwhile: its daemon left it empty, so the slot is free
                fd = _try_lock(lock)
                if fd is None:
                    continue
                if mine is None:
                    try:
                        mine = cls(directory, fd)
                    except BaseException:
                        os.close(fd)
                        raise
                    continue
                try:  # a free slot of a daemon that died: adopt its records
                    if directory.is_dir():
                        mine._adopt(directory)
                    _remove_slot(directory, lock)
                finally:
                    os.close(fd)
            if mine is None:
                raise JournalError(f"all {MAX_SLOTS} journal slots of {base} are in use")
        except JournalError:
            if mine is not None:
                mine.close()  # records stay where they are, for the user to look at
            raise
        return mine

    def _adopt(self, directory: Path) -> None:
        """Take over the records of the dead slot ``directory`` (its log is removed once they
        are in ours: a crash in between adopts them again, which changes nothing)."""
        for entry in sorted(directory.glob("*.rec")):  # the earlier format: moved as they are
            _check_record(entry)
            os.replace(entry, self.directory / entry.name)
            log.info("adopted journal record %s from %s", entry.name, directory)
        _fsync_dir(self.directory)
        dead = directory / LOG
        if not os.path.lexists(dead):
            return
        _check_record(dead, "journal log")
        records = [record for record, _, _ in _scan(dead.read_bytes())[0].values()]
        self._append([(record.name, _frame(_payload(record))) for record in records])
        for record in records:
            log.info("adopted journal record %s from %s", record.name, directory)
        dead.unlink()

    def _migrate(self) -> None:
        """Move the records of the earlier format (one ``.rec`` file each) into the log;
        an unreadable one is logged and kept."""
        for entry in self.directory.glob("*.tmp"):
            entry.unlink(missing_ok=True)  # a put of the earlier format cut before its rename
        moved: list[Path] = []
        entries: list[tuple[str | None, bytes]] = []
        for entry in sorted(self.directory.glob("*.rec")):
            _check_record(entry)
            try:
                record = _decode(entry.read_bytes())
                if isinstance(record, str):
                    raise ValueError("a drop entry is not a record")
            except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
                log.error("journal record %s is unreadable (kept): %s", entry, exc)
                continue
            entries.append((record.name, _frame(_payload(record))))
            moved.append(entry)
        if not moved:
            return
        self._append(entries)
        for entry in moved:
            entry.unlink()
        _fsync_dir(self.directory)

    @staticmethod
    def pending(
        cache_dir: Path, store_id: str, workspace: WorkspaceId | None = None
    ) -> tuple[Path, int]:
        """The directory of ``workspace``'s journal of the store and how many records its slots
        hold (changes nothing: for a read-only mount, which leaves them to the next read-write
        mount)."""
        base = cache_dir / _SAFE.sub("_", store_id)
        home = base if workspace is None else base / workspace.directory_name(store_id)
        return home, count_records(home)

    @staticmethod
    def not_replayed(
        cache_dir: Path, store_id: str, workspace: WorkspaceId
    ) -> list[WaitingJournal]:
        """The journals of the store that a mount of ``workspace`` leaves alone, with records:
        those of other workspaces, and the one of an earlier memfs that recorded no workspace
        (changes nothing)."""
        base = cache_dir / _SAFE.sub("_", store_id)
        found = []
        legacy = count_records(base)
        if legacy:
            found.append(WaitingJournal(base, legacy, None))
        mine = workspace.directory_name(store_id)
        for home in sorted(base.glob(f"{WORKSPACE_PREFIX}*")):
            if home.name == mine or not home.is_dir() or home.is_symlink():
                continue
            other = recorded_workspace(home, store_id)
            count = count_records(home) if other is not None else 0
            if count:
                found.append(WaitingJournal(home, count, other))
        return found

    def close(self) -> None:
        """Release the slot; an empty slot (directory and lock file) is removed, records stay
        for the next mount."""
        if self._lock_fd is None:
            return
        with contextlib.suppress(OSError):  # at worst, uploaded records are replayed
            self.flush()
        os.close(self._fd)
        lock = self.directory.with_name(self.directory.name + ".lock")
        _remove_slot(self.directory, lock)  # still locked: nobody else is using it
        os.close(self._lock_fd)
        self._lock_fd = None

    def put(self, record: Record) -> None:
        """Write ``record`` durably (replacing one of the same name)."""
        if not record.written_at:
            record.written_at = datetime.now(UTC).isoformat()
        self._append([(record.name, _frame(_payload(record)))])
        self.writes += 1
        self._compact()

    def drop(self, name: str, *, flush: bool = True) -> None:
        """Forget the record ``name`` (nothing happens if there is none). ``flush`` False: the
        entry is durable at the next flush only (for a change the server has: module
        docstring); a flush of the log is one ``fdatasync`` however many drops wait."""
        if name not in self._live:
            return
        if len(self._live) == 1:  # the last one: nothing in the log is live any more
            os.ftruncate(self._fd, 0)
            self._size = 0  # what the file holds now, whether or not the flush succeeds
            self._live.clear()
            self._live_bytes = 0
            self.unflushed = True
            if flush:
                self.flush()
            return
        self._append([(None, _frame(json.dumps({"drop": name}).encode()))], flush=flush)
        start, end = self._live.pop(name)
        self._live_bytes -= end - start
        self._compact()

    def flush(self) -> None:
        """Make the drops written with ``flush=False`` durable (nothing to do: no system call)."""
        if self.unflushed:
            data_sync(self._fd)
            self.unflushed = False

    def _append(self, entries: list[tuple[str | None, bytes]], *, flush: bool = True) -> None:
        """Append ``entries`` (record name or None, frame) with one flush (``flush`` False: none,
        for drops); on failure the log is cut back to where it was, so no torn entry hides the
        ones appended later."""
        start = self._size
        data = b"".join(frame for _, frame in entries)
        try:
            _write_at(self._fd, data, start)
            if flush:
                data_sync(self._fd)  # the drops written before it too
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, start)
            raise
        self.unflushed = not flush
        for name, frame in entries:
            if name is not None:
                old_start, old_end = self._live.get(name, (0, 0))
                self._live_bytes += len(frame) - (old_end - old_start)
                self._live[name] = (start, start + len(frame))
            start += len(frame)
        self._size = start

    def _compact(self) -> None:
        """Rewrite a large log that is mostly dead entries (module docstring). A failure before
        the rename is logged, not raised: the entry that asked is durable in the old log."""
        if self._size < COMPACT_BYTES or self._live_bytes * 2 > self._size:
            return
        raw = read_at(self._fd, self._size, 0)
        spans: dict[str, tuple[int, int]] = {}
        chunks: list[bytes] = []
        size = 0
        for name, (start, end) in sorted(self._live.items(), key=lambda item: item[1]):
            chunks.append(raw[start:end])
            spans[name] = (size, size + end - start)
            size += end - start
        try:
            fd = _replace_log(self._log, b"".join(chunks))
        except OSError as exc:
            log.warning("journal log %s not compacted: %s", self._log, exc)
            return
        os.close(self._fd)
        self._fd, self._size, self._live = fd, size, spans
        _fsync_dir(self.directory)  # raised if it fails: the new log's name may not survive
        self.unflushed = False  # the new log holds no dropped record, and was flushed

    def has(self, name: str) -> bool:
        return name in self._live

    def load(self) -> list[Record]:
        """Every live record, oldest first."""
        records = [record for record, _, _ in _scan(read_at(self._fd, self._size, 0))[0].values()]
        records.sort(key=lambda r: r.written_at)
        return records

    def __len__(self) -> int:
        """The live records, and records of the earlier format kept because unreadable."""
        return len(self._live) + sum(1 for _ in self.directory.glob("*.rec"))


@dataclass(frozen=True)
class WaitingJournal:
    """A journal of the store that a mount leaves alone (``Journal.not_replayed``)."""

    directory: Path
    records: int
    workspace: WorkspaceId | None  # None: an earlier memfs wrote it, and recorded no workspace


def count_records(base: Path) -> int:
    """The records in the slots of the journal directory ``base``, of any format (reads only)."""
    count = sum(1 for _ in base.glob("journal-*/*.rec"))
    for path in base.glob(f"journal-*/{LOG}"):
        with contextlib.suppress(OSError):
            count += len(_scan(path.read_bytes())[0])
    return count


def _replace_log(path: Path, data: bytes) -> int:
    """Put a log holding ``data`` in place of ``path`` (written and flushed first, then
    renamed over it); return its descriptor."""
    temp = path.with_name(LOG + ".new")
    fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_TRUNC | NOFOLLOW, 0o600)
    try:
        _write_at(fd, data, 0)
        data_sync(fd)
        os.replace(temp, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _try_lock(path: Path) -> int | None:
    """An exclusive lock of ``path`` (None if another process holds it).

    A slot's lock file is removed by its holder when the slot is empty, so a lock taken on a
    file that was unlinked (or replaced) meanwhile is worthless: check and try again.
    """
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            lock_exclusive(fd)
        except BlockingIOError:
            os.close(fd)
            return None
        except OSError:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


def _remove_slot(directory: Path, lock: Path) -> None:
    """Remove an empty slot (the caller holds its lock); a slot holding anything stays."""
    try:
        if directory.is_dir():
            for entry in directory.glob("*.tmp"):
                entry.unlink(missing_ok=True)
            (directory / (LOG + ".new")).unlink(missing_ok=True)
            with contextlib.suppress(FileNotFoundError):
                if (directory / LOG).stat().st_size == 0:
                    (directory / LOG).unlink()  # no record in it
            directory.rmdir()  # fails if records are left: they stay for the next mount
        lock.unlink(missing_ok=True)
    except OSError:
        pass
