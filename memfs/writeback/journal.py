"""The write-back journal: acknowledged changes on disk until the server has them.

Owns one directory per running mount, ``<cache dir>/<store id>/journal-<slot>/``, held with an
exclusive ``flock`` on ``journal-<slot>.lock`` for the daemon's life (two mounts of one store
take two slots; a slot whose daemon died is free again and its records are replayed by the
next mount of the store). A slot left empty (clean unmount, records adopted) is removed with
its lock file, so the cache directory does not fill up with them. Each pending change is one
file ``<name>.rec``: a one-line JSON header (``Record`` without its data), a newline, then the
raw content bytes, if any.

Trust: a record is uploaded with the user's key, so a record another local user could have
planted is never read. ``open`` refuses (``JournalError``, one line) a cache directory, store
directory or slot that is not the user's own or that others can write to, and any record file
that is not a regular file of the user's; the directories it creates are 0700, records 0600.

Durability: a record is written to a temporary file, fsynced, renamed into place and the
directory fsynced before ``put`` returns; ``drop`` unlinks and fsyncs the directory. So after
``put`` returns, a ``kill -9`` (or a power cut) cannot lose the record, and a record is never
seen half-written.

This module stores and loads records; it must not decide what they mean (``vfs`` does), talk to
the server, or hold clean cache data. See docs/writeback.md for the states and the replay.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from memfs.private import NotPrivateError, check_private_file, private_dir

log = logging.getLogger(__name__)

MAX_SLOTS = 64
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
      ``remote_path`` where the server had it;
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

    def header(self) -> dict[str, Any]:
        header = asdict(self)
        header.pop("data")
        header["has_data"] = self.data is not None
        return header


def _fsync_dir(path: Path) -> None:
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


def _check_record(path: Path) -> None:
    try:
        check_private_file(path, "journal record", why=_WHY)
    except NotPrivateError as exc:
        raise JournalError(str(exc)) from None


class Journal:
    """The records of one mount; see the module docstring."""

    def __init__(self, directory: Path, lock_fd: int | None = None) -> None:
        self.directory = directory
        self._lock_fd = lock_fd
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.writes = 0

    @classmethod
    def open(cls, cache_dir: Path, store_id: str) -> Journal:
        """Take the first free slot of ``store_id``; move records of other free slots into it."""
        _private_dir(cache_dir, "cache directory", tighten=False)  # the user's choice of mode
        base = cache_dir / _SAFE.sub("_", store_id)
        _private_dir(base, "journal directory")
        mine: Journal | None = None
        try:
            for slot in range(MAX_SLOTS):
                lock = base / f"journal-{slot}.lock"
                directory = base / f"journal-{slot}"
                if mine is not None and not lock.exists() and not directory.exists():
                    continue  # never used: nothing to adopt (and no lock file to leave behind)
                if os.path.lexists(directory):
                    _private_dir(directory, "journal directory", create=False)
                fd = _try_lock(lock)
                if fd is None:
                    continue
                if mine is None:
                    mine = cls(directory, fd)
                    continue
                try:  # a free slot of a daemon that died: adopt its records
                    if directory.is_dir():
                        for entry in sorted(directory.glob("*.rec")):
                            _check_record(entry)
                            os.replace(entry, mine.directory / entry.name)
                            log.info("adopted journal record %s from %s", entry.name, directory)
                        _fsync_dir(mine.directory)
                    _remove_slot(directory, lock)
                finally:
                    os.close(fd)
            if mine is None:
                raise JournalError(f"all {MAX_SLOTS} journal slots of {base} are in use")
            for entry in mine.directory.glob("*.rec"):
                _check_record(entry)  # before anything is loaded, let alone uploaded
        except JournalError:
            if mine is not None:
                mine.close()  # records stay where they are, for the user to look at
            raise
        return mine

    @staticmethod
    def pending(cache_dir: Path, store_id: str) -> tuple[Path, int]:
        """The store's journal directory and how many records its slots hold (changes
        nothing: for a read-only mount, which leaves them to the next read-write mount)."""
        base = cache_dir / _SAFE.sub("_", store_id)
        try:
            count = sum(1 for _ in base.glob("journal-*/*.rec"))
        except OSError:
            count = 0
        return base, count

    def close(self) -> None:
        """Release the slot; an empty slot (directory and lock file) is removed, records stay
        for the next mount."""
        if self._lock_fd is None:
            return
        lock = self.directory.with_name(self.directory.name + ".lock")
        _remove_slot(self.directory, lock)  # still locked: nobody else is using it
        os.close(self._lock_fd)
        self._lock_fd = None

    @staticmethod
    def file_name(name: str) -> str:
        return _SAFE.sub("_", name) + ".rec"

    def put(self, record: Record) -> None:
        """Write ``record`` durably (replacing one of the same name)."""
        if not record.written_at:
            record.written_at = datetime.now(UTC).isoformat()
        target = self.directory / self.file_name(record.name)
        temp = target.with_suffix(".tmp")
        header = json.dumps(record.header(), separators=(",", ":")).encode("utf-8")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, header + b"\n" + (record.data or b""))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, target)
        _fsync_dir(self.directory)
        self.writes += 1

    def drop(self, name: str) -> None:
        """Forget the record ``name`` (nothing happens if there is none)."""
        target = self.directory / self.file_name(name)
        try:
            target.unlink()
        except FileNotFoundError:
            return
        _fsync_dir(self.directory)

    def has(self, name: str) -> bool:
        return (self.directory / self.file_name(name)).exists()

    def load(self) -> list[Record]:
        """Every record in the directory, oldest first (unreadable ones are logged and kept)."""
        records = []
        for entry in self.directory.glob("*.tmp"):
            entry.unlink(missing_ok=True)  # a put interrupted before its rename
        for entry in self.directory.glob("*.rec"):
            try:
                _check_record(entry)  # checked by ``open`` too: this is for one planted since
                raw = entry.read_bytes()
                head, _, rest = raw.partition(b"\n")
                header = json.loads(head)
                data = rest if header.pop("has_data") else None
                records.append(Record(data=data, **header))
            except (OSError, ValueError, TypeError, KeyError, JournalError) as exc:
                log.error("journal record %s is unreadable (kept): %s", entry, exc)
        records.sort(key=lambda r: r.written_at)
        return records

    def __len__(self) -> int:
        return sum(1 for _ in self.directory.glob("*.rec"))


def _try_lock(path: Path) -> int | None:
    """An exclusive lock of ``path`` (None if another process holds it).

    A slot's lock file is removed by its holder when the slot is empty, so a lock taken on a
    file that was unlinked (or replaced) meanwhile is worthless: check and try again.
    """
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
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
            directory.rmdir()  # fails if records are left: they stay for the next mount
        lock.unlink(missing_ok=True)
    except OSError:
        pass
