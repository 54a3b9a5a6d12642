"""The SQLite backend of ``Storage``: WAL, foreign keys, busy timeout, blocking calls off-loop.

Every rule (checks, no-ops, versions, redaction, retention, listings) is ``memory_stores.sql``'s
and ``databricks.sql``'s;
this module owns the connections and runs its transactions.

Connection discipline (the invariant that makes this correct under concurrency):
- one *writer* connection; every mutation takes ``_write_lock`` (a trio.Lock), then runs as one
  ``BEGIN IMMEDIATE`` … ``COMMIT`` transaction in a worker thread. Checks (existence, archived,
  path free, store not full, precondition) and the writes they guard happen in that same
  transaction, so two requests can never both pass a check (no lost update, no 2,001st memory).
  ``BEGIN IMMEDIATE`` plus the busy timeout also serialises writers of *other* processes; it is
  what stands for the store-row lock, so the dialect's ``lock_clause`` is empty;
- a small pool of *reader* connections, each used by one thread at a time (taken from a trio
  channel); a read runs in one deferred transaction so multi-query reads (``depth=1``) see one
  snapshot. WAL lets reads proceed while a write is in progress.
A worker thread is never abandoned on cancellation (``trio.to_thread.run_sync`` default), so a
connection is never used by two threads at once.

A database that cannot be used now (locked by another process past the busy timeout, a file
that cannot be opened or read: ``unavailable``) is a 503 with ``retry-after``
(``db.availability``), never a 500.

Changes are published to the server's ``ChangeHub`` (``hub``) once their transaction has
committed: one process owns the file, so every write passes through it; a rolled-back write
publishes nothing. SQL lives only in each API's ``sql``, here and in ``db.schema``.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import trio

from memfs.contract.databricks_limits import MAX_ENTRIES_PER_STORE
from memfs.server.backends.storage import SqlStorage
from memfs.server.db import schema
from memfs.server.db.availability import Availability
from memfs.server.db.clock import utc_now
from memfs.server.db.notify import ChangeHub
from memfs.server.db.transaction import Dialect, Tx
from memfs.server.memory_stores.storage import MAX_MEMORIES_PER_STORE
from memfs.server.search import SearchIndex

log = logging.getLogger(__name__)

R = TypeVar("R")

# sqlite3 steps a result lazily, so a ``depth=1`` seek may ask for the whole page.
SQLITE = Dialect(name="sqlite", placeholder="?", lock_clause="", rollup_batch=None, holds_nul=True)
# Primary result codes of a database that is busy or cannot be used now, not of a bad statement.
_AWAY_CODES = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_PROTOCOL,
    }
)


def unavailable(exc: BaseException) -> str | None:
    """Why ``exc`` means the database cannot be used now, or None if it means anything else."""
    if isinstance(exc, sqlite3.OperationalError) and exc.sqlite_errorcode & 0xFF in _AWAY_CODES:
        return f"{exc.sqlite_errorname}: {exc}"
    return None


class SqliteStorage(SqlStorage):
    """``Storage`` on one SQLite database file. Create with ``await SqliteStorage.open(path)``."""

    dialect = SQLITE

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], datetime] = utc_now,
        readers: int = 4,
        busy_timeout_ms: int = 10_000,
        max_memories: int = MAX_MEMORIES_PER_STORE,
        max_dbx_entries: int = MAX_ENTRIES_PER_STORE,
        search: SearchIndex | None = None,
        hub: ChangeHub | None = None,
    ) -> None:
        super().__init__(
            clock=clock, max_memories=max_memories, max_dbx_entries=max_dbx_entries, search=search
        )
        self.path = str(path)
        self._busy_timeout_ms = busy_timeout_ms
        self._reader_count = readers
        self._writer: sqlite3.Connection | None = None
        self._write_lock = trio.Lock()
        self._readers: list[sqlite3.Connection] = []
        self._pool_send, self._pool_receive = trio.open_memory_channel[sqlite3.Connection](readers)
        self.availability = Availability("SQLite", unavailable)
        self.hub = hub  # told of each committed change (None: nobody follows the changes)

    @classmethod
    async def open(cls, path: str | Path, **kwargs: Any) -> SqliteStorage:
        storage = cls(path, **kwargs)
        await trio.to_thread.run_sync(storage._open_sync)
        for conn in storage._readers:
            storage._pool_send.send_nowait(conn)
        return storage

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path,
            isolation_level=None,
            check_same_thread=False,
            timeout=self._busy_timeout_ms / 1000,
        )
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA synchronous = NORMAL")
        return conn

    def _open_sync(self) -> None:
        writer = self._connect()
        mode = writer.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            log.warning("SQLite database %s is not in WAL mode (%s)", self.path, mode)
        schema.migrate(writer)
        self._writer = writer
        self._readers = [self._connect() for _ in range(self._reader_count)]

    async def aclose(self) -> None:
        async with self._write_lock:
            conns = [*self._readers, *([self._writer] if self._writer else [])]
            self._writer = None
            self._readers = []
            for conn in conns:
                conn.close()

    # -- transaction plumbing ---------------------------------------------------------------------

    async def _write(self, fn: Callable[[Tx], R]) -> R:
        async with self._write_lock:
            if self._writer is None:
                raise RuntimeError("storage is closed")
            begin = partial(_transaction, self._writer, "BEGIN IMMEDIATE", fn)
            result, announced = await self.availability.attempt(
                partial(trio.to_thread.run_sync, begin)
            )
        if self.hub is not None:
            for topic in announced:
                self.hub.publish(topic)
        return result

    def _announce(self, tx: Tx, topic: str) -> None:
        tx.announced.append(topic)  # published by ``_write`` once the transaction has committed

    async def _read(self, fn: Callable[[Tx], R]) -> R:
        async with self._reader() as conn:
            begin = partial(_transaction, conn, "BEGIN", fn)
            result, _ = await self.availability.attempt(partial(trio.to_thread.run_sync, begin))
            return result

    @asynccontextmanager
    async def _reader(self) -> AsyncIterator[sqlite3.Connection]:
        conn = await self._pool_receive.receive()
        try:
            yield conn
        finally:
            self._pool_send.send_nowait(conn)


def _transaction(
    conn: sqlite3.Connection, begin: str, fn: Callable[[Tx], R]
) -> tuple[R, list[str]]:
    """Run ``fn`` in one transaction on ``conn`` (in a worker thread); roll back on error.
    Returns its result and the topics it announced."""
    conn.execute(begin)
    tx = Tx(conn, SQLITE)
    try:
        result = fn(tx)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # also after a COMMIT that failed (busy): the next BEGIN works
            conn.execute("ROLLBACK")
        raise
    return result, tx.announced
