"""The PostgreSQL backend of ``Storage``: any number of server replicas on one database.

Every rule (checks, no-ops, versions, redaction, retention, listings) is ``memory_stores.sql``'s
and ``databricks.sql``'s;
this module owns the connection pool, runs its transactions and hooks up ``NOTIFY``.

Driver: psycopg 3 with its *synchronous* ``psycopg_pool.ConnectionPool``, each transaction run in
a worker thread with ``trio.to_thread.run_sync`` (as the SQLite backend does). psycopg's
``AsyncConnection`` waits on the asyncio loop and fails under trio ("no running event loop";
psycopg issue #29), and the server runs on trio.

Correctness across replicas (the invariants ``memory_stores.storage`` lists, kept by the database,
not by
process-local locks):
- every mutation of a store's memories or versions is one READ COMMITTED transaction that first
  locks the store row (``SELECT … FOR UPDATE``: the dialect's ``lock_clause``). The checks
  (archived, path free, 2,000-memory limit, content precondition) and the writes they guard run
  under that lock, so two replicas can never both win a precondition race or create the 2,001st
  memory; READ COMMITTED re-reads the latest committed rows after the lock is granted;
- the store row holds ``version_seq`` and ``last_version_us``: under the lock a version gets
  ``seq + 1`` and ``max(now, last + 1 µs)``, and commits in that order, so versions become visible
  in ``seq``/``created_at`` order on every replica (what the change stream relies on);
- the transaction that appends a version (or deletes a store) also sends
  ``NOTIFY memfs_changes, '<store id>'`` (``_announce``); PostgreSQL delivers it only if the
  transaction commits (``memfs.server.backends.pg_listener.PgListener``);
- reads run READ ONLY REPEATABLE READ, so multi-query reads (``depth=1``) see one snapshot;
- a transaction that meets a serialization failure or a deadlock is retried from the start;
- retention prunes under a transaction-level advisory lock (``_claim_pruning``): one replica
  prunes at a time, the others skip that round.

A database that cannot be reached (stopped, restarting, refusing connections: ``unreachable``)
is a 503 with ``retry-after`` (``db.availability``), never a 500. The pool checks a
connection before lending it (a restart leaves every pooled connection dead) and waits at most
``POOL_WAIT`` seconds for one.
Paths and ids are ``COLLATE "C"`` (byte order, as on SQLite), so cursors (which are positions in
that order, not per-process state) work on any replica.

SQL lives only in each API's ``sql``, here and in ``db.schema``; nothing above this module sees a
row.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

import psycopg
import trio
from psycopg import errors as pg_errors
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from memfs.contract.databricks_limits import MAX_ENTRIES_PER_STORE
from memfs.server.backends.storage import SqlStorage
from memfs.server.db import schema
from memfs.server.db.availability import Availability
from memfs.server.db.clock import utc_now
from memfs.server.db.transaction import Dialect, Tx
from memfs.server.memory_stores.storage import MAX_MEMORIES_PER_STORE
from memfs.server.search import SearchIndex

log = logging.getLogger(__name__)
# psycopg's pool warns at every failed reconnect, in two lines naming the socket; an outage is
# logged once, by ``db.availability``. An explicit setting by the application wins.
_pool_log = logging.getLogger("psycopg.pool")
if _pool_log.level == logging.NOTSET:
    _pool_log.setLevel(logging.ERROR)

R = TypeVar("R")
Conn = psycopg.Connection[dict[str, Any]]

CHANNEL = "memfs_changes"  # NOTIFY channel; the payload is the store id
PRUNE_LOCK = 0x6D656D6670  # advisory lock key: one pruning replica at a time
_RETRIES = 8
_RETRYABLE = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)
POOL_WAIT = 2.0  # seconds a request waits for a connection before it is answered 503
# SQLSTATEs of a server that is away: connection exceptions (08…), a shutdown, a crash, a start
# (57P…: not 57014, a cancelled statement), too many connections (53300).
_AWAY_STATES = ("08", "57P", "53300")

# psycopg reads a whole result at once: a ``depth=1`` seek fetches a few rows at a time, since a
# subdirectory ends the batch.
POSTGRES = Dialect(
    name="postgresql", placeholder="%s", lock_clause=" FOR UPDATE", rollup_batch=16, holds_nul=False
)


def is_postgres_url(db: str) -> bool:
    return db.startswith(("postgresql://", "postgres://"))


def unreachable(exc: BaseException) -> str | None:
    """Why ``exc`` means the database cannot be reached now, or None if it means anything else
    (a bug, a constraint, a limit: a retry would fail the same way)."""
    if isinstance(exc, PoolTimeout):
        return f"no connection within {POOL_WAIT:g} s"
    if isinstance(exc, psycopg.OperationalError):
        state = exc.sqlstate
        if state is None or state.startswith(_AWAY_STATES):
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            return f"{type(exc).__name__}: {first_line[:200]}"
    return None


class PostgresStorage(SqlStorage):
    """``Storage`` on a PostgreSQL database. Create with ``await PostgresStorage.open(url)``."""

    dialect = POSTGRES

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], datetime] = utc_now,
        pool_size: int = 10,
        max_memories: int = MAX_MEMORIES_PER_STORE,
        max_dbx_entries: int = MAX_ENTRIES_PER_STORE,
        search: SearchIndex | None = None,
    ) -> None:
        super().__init__(
            clock=clock, max_memories=max_memories, max_dbx_entries=max_dbx_entries, search=search
        )
        self.url = url
        self._pool: ConnectionPool[Any] = ConnectionPool(
            url,
            min_size=min(2, pool_size),
            max_size=pool_size,
            kwargs={"row_factory": dict_row, "autocommit": True},
            open=False,
            name="memfs",
            check=ConnectionPool.check_connection,
            timeout=POOL_WAIT,
        )
        # One worker thread per pooled connection at most: a thread never waits for the pool.
        self._limiter = trio.CapacityLimiter(pool_size)
        self._closed = False
        self.availability = Availability("PostgreSQL", unreachable)

    @classmethod
    async def open(cls, url: str, **kwargs: Any) -> PostgresStorage:
        storage = cls(url, **kwargs)
        await trio.to_thread.run_sync(storage._open_sync)
        return storage

    def _open_sync(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            schema.migrate_postgres(conn)
        self._pool.open(wait=True, timeout=30)

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            await trio.to_thread.run_sync(self._pool.close)

    # -- transaction plumbing ---------------------------------------------------------------------

    def _run(self, fn: Callable[[Tx], R], *, read_only: bool) -> R:
        """Run ``fn`` in one transaction (in a worker thread), retrying on serialization
        failures and deadlocks; any other exception rolls back and propagates."""
        for attempt in range(1, _RETRIES + 1):
            try:
                with self._pool.connection() as conn, conn.transaction():
                    if read_only:
                        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    return fn(Tx(conn, POSTGRES))
            except _RETRYABLE as exc:
                if attempt == _RETRIES:
                    raise
                log.debug(
                    "retrying a transaction after %s (attempt %d)", type(exc).__name__, attempt
                )
        raise AssertionError("unreachable")

    async def _in_thread(self, fn: Callable[[Tx], R], *, read_only: bool) -> R:
        if self._closed:
            raise RuntimeError("storage is closed")
        return await self.availability.attempt(
            lambda: trio.to_thread.run_sync(
                lambda: self._run(fn, read_only=read_only), limiter=self._limiter
            )
        )

    async def _write(self, fn: Callable[[Tx], R]) -> R:
        return await self._in_thread(fn, read_only=False)

    async def _read(self, fn: Callable[[Tx], R]) -> R:
        return await self._in_thread(fn, read_only=True)

    # -- hooks of ``SqlStorage`` ------------------------------------------------------------------

    def _announce(self, tx: Tx, store_id: str) -> None:
        tx.execute("SELECT pg_notify(?, ?)", (CHANNEL, store_id))

    def _claim_pruning(self, tx: Tx) -> bool:
        locked = tx.one("SELECT pg_try_advisory_xact_lock(?) AS ok", (PRUNE_LOCK,))
        if not locked or not locked["ok"]:
            log.debug("another replica is pruning versions; skipping this round")
            return False
        return True
