"""The PostgreSQL backend of ``Storage``: any number of server replicas on one database.

Driver: psycopg 3 with its *synchronous* ``psycopg_pool.ConnectionPool``, each transaction run in
a worker thread with ``trio.to_thread.run_sync`` (as the SQLite backend does). psycopg's
``AsyncConnection`` waits on the asyncio loop and fails under trio ("no running event loop";
psycopg issue #29), and the server runs on trio.

Correctness across replicas (the invariants ``storage`` lists, kept by the database, not by
process-local locks):
- every mutation of a store's memories or versions is one READ COMMITTED transaction that first
  locks the store row (``SELECT … FOR UPDATE``). The checks (archived, path free, 2,000-memory
  limit, content precondition) and the writes they guard run under that lock, so two replicas
  can never both win a precondition race or create the 2,001st memory; READ COMMITTED re-reads
  the latest committed rows after the lock is granted;
- the store row holds ``version_seq`` and ``last_version_us``: under the lock a version gets
  ``seq + 1`` and ``max(now, last + 1 µs)``, and commits in that order, so versions become visible
  in ``seq``/``created_at`` order on every replica (what the change stream relies on);
- the transaction that appends a version also sends ``NOTIFY memfs_changes, '<store id>'``;
  PostgreSQL delivers it only if the transaction commits (``memfs.server.changes.PgListener``);
- reads run READ ONLY REPEATABLE READ, so multi-query reads (``depth=1``) see one snapshot;
- a transaction that meets a serialization failure or a deadlock is retried from the start;
- retention prunes under a transaction-level advisory lock: one replica prunes at a time, the
  others skip that round.
Paths and ids are ``COLLATE "C"`` (byte order, as on SQLite), so cursors (which are positions in
that order, not per-process state) work on any replica.

SQL lives only here and in ``schema``; nothing above this module sees a row.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

import psycopg
import trio
from psycopg import errors as pg_errors
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from memfs.errors import (
    STORE_ARCHIVED_MESSAGE,
    STORE_FULL_MESSAGE,
    BadRequestError,
    NotFoundError,
    PathConflictError,
    PreconditionFailedError,
    StoreArchivedError,
    StoreFullError,
)
from memfs.models import Actor, Memory, MemoryPrefix, MemoryStore, MemoryVersion, sha256_hex
from memfs.server import ids, schema
from memfs.server.sqlite import from_us, to_us
from memfs.server.storage import (
    MAX_MEMORIES_PER_STORE,
    MAX_METADATA_PAIRS,
    ListItem,
    MemoryPosition,
    MetadataPatch,
    Slice,
    Storage,
    StoreFilter,
    StorePosition,
    VersionFilter,
    utc_now,
)

log = logging.getLogger(__name__)

R = TypeVar("R")
Row = dict[str, Any]
Conn = psycopg.Connection[Row]

CHANNEL = "memfs_changes"  # NOTIFY channel; the payload is the store id
PRUNE_LOCK = 0x6D656D6670  # advisory lock key: one pruning replica at a time
_RETRIES = 8
_RETRYABLE = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)


def is_postgres_url(db: str) -> bool:
    return db.startswith(("postgresql://", "postgres://"))


def _upper_bound(prefix: str) -> str:
    """The smallest string above every string that starts with ``prefix`` (which ends in /)."""
    return prefix[:-1] + "0"  # '0' is '/' + 1


_STORE_COLUMNS = "id, name, description, metadata, created_us, updated_us, archived_us"
_MEMORY_BASIC = (
    "id, store_id, path, NULL AS content, content_sha256, content_size, head_version_id, "
    "created_us, updated_us"
)
_MEMORY_FULL = (
    "id, store_id, path, content, content_sha256, content_size, head_version_id, "
    "created_us, updated_us"
)
_VERSION_TAIL = (
    "content_sha256, content_size, created_us, actor_type, actor_id, redacted_us, "
    "redacted_by_type, redacted_by_id, seq"
)
_VERSION_FULL = f"id, memory_id, store_id, operation, path, content, {_VERSION_TAIL}"
_VERSION_BASIC = f"id, memory_id, store_id, operation, path, NULL AS content, {_VERSION_TAIL}"


def _store(row: Row) -> MemoryStore:
    return MemoryStore(
        id=row["id"],
        name=row["name"],
        description=row["description"],
        metadata=json.loads(row["metadata"]),
        created_at=from_us(row["created_us"]),
        updated_at=from_us(row["updated_us"]),
        archived_at=from_us(row["archived_us"]) if row["archived_us"] is not None else None,
    )


def _memory(row: Row) -> Memory:
    return Memory(
        id=row["id"],
        memory_store_id=row["store_id"],
        path=row["path"],
        content=row["content"],
        content_sha256=row["content_sha256"],
        content_size_bytes=row["content_size"],
        memory_version_id=row["head_version_id"],
        created_at=from_us(row["created_us"]),
        updated_at=from_us(row["updated_us"]),
    )


def _version(row: Row) -> MemoryVersion:
    redacted_by = None
    if row["redacted_by_type"] is not None:
        redacted_by = Actor(row["redacted_by_type"], row["redacted_by_id"])
    return MemoryVersion(
        id=row["id"],
        memory_id=row["memory_id"],
        memory_store_id=row["store_id"],
        operation=row["operation"],
        created_at=from_us(row["created_us"]),
        path=row["path"],
        content=row["content"],
        content_sha256=row["content_sha256"],
        content_size_bytes=row["content_size"],
        created_by=Actor(row["actor_type"], row["actor_id"]),
        redacted_at=from_us(row["redacted_us"]) if row["redacted_us"] is not None else None,
        redacted_by=redacted_by,
    )


def _store_not_found(store_id: str) -> NotFoundError:
    return NotFoundError(f"memory store {store_id!r} not found")


def _one(conn: Conn, sql: str, params: tuple[Any, ...] = ()) -> Row | None:
    return conn.execute(sql, params).fetchone()


class PostgresStorage(Storage):
    """``Storage`` on a PostgreSQL database. Create with ``await PostgresStorage.open(url)``."""

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], datetime] = utc_now,
        pool_size: int = 10,
        max_memories: int = MAX_MEMORIES_PER_STORE,
    ) -> None:
        self.url = url
        self.clock = clock
        self.max_memories = max_memories
        self._pool: ConnectionPool[Any] = ConnectionPool(
            url,
            min_size=min(2, pool_size),
            max_size=pool_size,
            kwargs={"row_factory": dict_row, "autocommit": True},
            open=False,
            name="memfs",
        )
        # One worker thread per pooled connection at most: a thread never waits for the pool.
        self._limiter = trio.CapacityLimiter(pool_size)
        self._closed = False

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

    def _run(self, fn: Callable[[Conn], R], *, read_only: bool) -> R:
        """Run ``fn`` in one transaction (in a worker thread), retrying on serialization
        failures and deadlocks; any other exception rolls back and propagates."""
        for attempt in range(1, _RETRIES + 1):
            try:
                with self._pool.connection() as conn, conn.transaction():
                    if read_only:
                        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    return fn(conn)
            except _RETRYABLE as exc:
                if attempt == _RETRIES:
                    raise
                log.debug(
                    "retrying a transaction after %s (attempt %d)", type(exc).__name__, attempt
                )
        raise AssertionError("unreachable")

    async def _write(self, fn: Callable[[Conn], R]) -> R:
        if self._closed:
            raise RuntimeError("storage is closed")
        return await trio.to_thread.run_sync(
            lambda: self._run(fn, read_only=False), limiter=self._limiter
        )

    async def _read(self, fn: Callable[[Conn], R]) -> R:
        if self._closed:
            raise RuntimeError("storage is closed")
        return await trio.to_thread.run_sync(
            lambda: self._run(fn, read_only=True), limiter=self._limiter
        )

    def _now_us(self) -> int:
        return to_us(self.clock())

    # -- shared checks (run inside a transaction) -------------------------------------------------

    @staticmethod
    def _load_store(conn: Conn, store_id: str, *, lock: bool = False) -> Row:
        row = _one(
            conn,
            "SELECT id, archived_us, memory_count, version_seq, last_version_us "
            "FROM stores WHERE id = %s" + (" FOR UPDATE" if lock else ""),
            (store_id,),
        )
        if row is None:
            raise _store_not_found(store_id)
        return row

    @staticmethod
    def _check_writable(store: Row) -> None:
        if store["archived_us"] is not None:
            raise StoreArchivedError(
                f"{STORE_ARCHIVED_MESSAGE}: memory store {store['id']!r} is read-only"
            )

    @staticmethod
    def _load_memory(conn: Conn, store_id: str, memory_id: str) -> Row:
        row = _one(
            conn,
            f"SELECT {_MEMORY_FULL} FROM memories WHERE id = %s AND store_id = %s",
            (memory_id, store_id),
        )
        if row is None:
            raise NotFoundError(f"memory {memory_id!r} not found in store {store_id!r}")
        return row

    @staticmethod
    def _check_path_free(conn: Conn, store_id: str, path: str) -> None:
        row = _one(
            conn, "SELECT id FROM memories WHERE store_id = %s AND path = %s", (store_id, path)
        )
        if row is not None:
            raise PathConflictError(
                f"a memory already exists at path {path!r}",
                body={"error": {"conflicting_memory_id": row["id"], "conflicting_path": path}},
            )

    def _append_version(
        self,
        conn: Conn,
        store: Row,
        *,
        memory_id: str,
        operation: str,
        path: str,
        content: str | None,
        actor: Actor,
    ) -> tuple[str, int]:
        """Insert the next version of the (locked) store and announce it on commit."""
        seq = int(store["version_seq"]) + 1
        created_us = max(self._now_us(), int(store["last_version_us"]) + 1)
        version_id = ids.new_version_id()
        conn.execute(
            "INSERT INTO versions (id, store_id, seq, memory_id, operation, path, content, "
            "content_sha256, content_size, created_us, actor_type, actor_id) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                version_id,
                store["id"],
                seq,
                memory_id,
                operation,
                path,
                content,
                sha256_hex(content) if content is not None else None,
                len(content.encode("utf-8")) if content is not None else None,
                created_us,
                actor.type,
                actor.id,
            ),
        )
        conn.execute(
            "UPDATE stores SET version_seq = %s, last_version_us = %s WHERE id = %s",
            (seq, created_us, store["id"]),
        )
        conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, store["id"]))
        return version_id, created_us

    # -- stores -----------------------------------------------------------------------------------

    async def create_store(
        self, *, name: str, description: str, metadata: dict[str, str]
    ) -> MemoryStore:
        def run(conn: Conn) -> MemoryStore:
            store_id = ids.new_store_id()
            now = self._now_us()
            conn.execute(
                "INSERT INTO stores (id, name, description, metadata, created_us, updated_us) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                (store_id, name, description, json.dumps(metadata), now, now),
            )
            return self._get_store_sync(conn, store_id)

        return await self._write(run)

    @staticmethod
    def _get_store_sync(conn: Conn, store_id: str, *, lock: bool = False) -> MemoryStore:
        row = _one(
            conn,
            f"SELECT {_STORE_COLUMNS} FROM stores WHERE id = %s" + (" FOR UPDATE" if lock else ""),
            (store_id,),
        )
        if row is None:
            raise _store_not_found(store_id)
        return _store(row)

    async def get_store(self, store_id: str) -> MemoryStore:
        return await self._read(lambda conn: self._get_store_sync(conn, store_id))

    async def list_stores(
        self, flt: StoreFilter, *, after: StorePosition | None, limit: int
    ) -> Slice[MemoryStore, StorePosition]:
        clauses: list[str] = []
        params: list[Any] = []
        if not flt.include_archived:
            clauses.append("archived_us IS NULL")
        if flt.created_gte is not None:
            clauses.append("created_us >= %s")
            params.append(to_us(flt.created_gte))
        if flt.created_lte is not None:
            clauses.append("created_us <= %s")
            params.append(to_us(flt.created_lte))
        if after is not None:
            clauses.append("(created_us, id) < (%s, %s)")
            params.extend([to_us(after.created_at), after.store_id])
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        sql = (
            f"SELECT {_STORE_COLUMNS} FROM stores {where} "
            "ORDER BY created_us DESC, id DESC LIMIT %s"
        )

        def run(conn: Conn) -> Slice[MemoryStore, StorePosition]:
            rows = conn.execute(sql, (*params, limit + 1)).fetchall()
            stores = [_store(row) for row in rows[:limit]]
            nxt = None
            if len(rows) > limit:
                nxt = StorePosition(stores[-1].created_at, stores[-1].id)
            return Slice(stores, nxt)

        return await self._read(run)

    async def update_store(
        self,
        store_id: str,
        *,
        name: str | None = None,
        description: str | None = None,
        metadata: MetadataPatch | None = None,
    ) -> MemoryStore:
        def run(conn: Conn) -> MemoryStore:
            self._check_writable(self._load_store(conn, store_id, lock=True))
            current = self._get_store_sync(conn, store_id)
            new_name = current.name if name is None else name
            new_description = current.description if description is None else description
            new_metadata = dict(current.metadata)
            for key, value in (metadata.changes if metadata else {}).items():
                if value is None:
                    new_metadata.pop(key, None)
                else:
                    new_metadata[key] = value
            if len(new_metadata) > MAX_METADATA_PAIRS:
                raise BadRequestError(
                    f"metadata: a memory store has at most {MAX_METADATA_PAIRS} key-value "
                    f"pairs (this update would leave {len(new_metadata)})"
                )
            if (new_name, new_description, new_metadata) == (
                current.name,
                current.description,
                current.metadata,
            ):
                return current
            conn.execute(
                "UPDATE stores SET name = %s, description = %s, metadata = %s, updated_us = %s "
                "WHERE id = %s",
                (
                    new_name,
                    new_description,
                    json.dumps(new_metadata),
                    max(self._now_us(), to_us(current.updated_at)),
                    store_id,
                ),
            )
            return self._get_store_sync(conn, store_id)

        return await self._write(run)

    async def archive_store(self, store_id: str) -> MemoryStore:
        def run(conn: Conn) -> MemoryStore:
            current = self._get_store_sync(conn, store_id, lock=True)
            if current.archived_at is not None:
                return current
            now = max(self._now_us(), to_us(current.updated_at))
            conn.execute(
                "UPDATE stores SET archived_us = %s, updated_us = %s WHERE id = %s",
                (now, now, store_id),
            )
            return self._get_store_sync(conn, store_id)

        return await self._write(run)

    async def delete_store(self, store_id: str) -> None:
        def run(conn: Conn) -> None:
            self._load_store(conn, store_id, lock=True)
            conn.execute("DELETE FROM versions WHERE store_id = %s", (store_id,))
            conn.execute("DELETE FROM memories WHERE store_id = %s", (store_id,))
            conn.execute("DELETE FROM stores WHERE id = %s", (store_id,))
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, store_id))

        await self._write(run)

    # -- memories ---------------------------------------------------------------------------------

    async def create_memory(
        self, store_id: str, *, path: str, content: str, actor: Actor
    ) -> Memory:
        def run(conn: Conn) -> Memory:
            store = self._load_store(conn, store_id, lock=True)
            self._check_writable(store)
            self._check_path_free(conn, store_id, path)
            if int(store["memory_count"]) >= self.max_memories:
                raise StoreFullError(
                    f"{STORE_FULL_MESSAGE}: memory store {store_id!r} already holds "
                    f"{self.max_memories} memories; delete some before creating more"
                )
            memory_id = ids.new_memory_id()
            version_id, now = self._append_version(
                conn,
                store,
                memory_id=memory_id,
                operation="created",
                path=path,
                content=content,
                actor=actor,
            )
            conn.execute(
                "INSERT INTO memories (id, store_id, path, content, content_sha256, "
                "content_size, head_version_id, created_us, updated_us) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    memory_id,
                    store_id,
                    path,
                    content,
                    sha256_hex(content),
                    len(content.encode("utf-8")),
                    version_id,
                    now,
                    now,
                ),
            )
            conn.execute(
                "UPDATE stores SET memory_count = memory_count + 1 WHERE id = %s", (store_id,)
            )
            return _memory(self._load_memory(conn, store_id, memory_id))

        return await self._write(run)

    async def get_memory(self, store_id: str, memory_id: str) -> Memory:
        def run(conn: Conn) -> Memory:
            self._load_store(conn, store_id)
            return _memory(self._load_memory(conn, store_id, memory_id))

        return await self._read(run)

    async def list_memories(
        self,
        store_id: str,
        *,
        prefix: str,
        depth: int,
        after: MemoryPosition | None,
        limit: int,
        with_content: bool,
    ) -> Slice[ListItem, MemoryPosition]:
        columns = _MEMORY_FULL if with_content else _MEMORY_BASIC
        upper = _upper_bound(prefix)

        def seek(conn: Conn, bound: MemoryPosition, count: int) -> list[Row]:
            op = ">=" if bound.inclusive else ">"
            return conn.execute(
                f"SELECT {columns} FROM memories WHERE store_id = %s AND path {op} %s "
                "AND path < %s ORDER BY path LIMIT %s",
                (store_id, bound.key, upper, count),
            ).fetchall()

        def run(conn: Conn) -> Slice[ListItem, MemoryPosition]:
            self._load_store(conn, store_id)
            bound = after if after is not None else MemoryPosition(prefix, True)
            items: list[ListItem] = []
            positions: list[MemoryPosition] = []
            want = limit + 1  # one more than a page, to know whether another page exists
            while len(items) < want:
                # depth=1: fetch a few rows at a time, since a subdirectory ends the batch.
                batch = want - len(items) if depth == 0 else min(want - len(items), 16)
                rows = seek(conn, bound, batch)
                for row in rows:
                    rest = row["path"][len(prefix) :]
                    if depth == 1 and "/" in rest:
                        directory = prefix + rest.split("/", 1)[0] + "/"
                        items.append(MemoryPrefix(directory))
                        # Skip the whole subdirectory with one index seek.
                        bound = MemoryPosition(_upper_bound(directory), True)
                        positions.append(bound)
                        break
                    items.append(_memory(row))
                    bound = MemoryPosition(row["path"], False)
                    positions.append(bound)
                    if len(items) >= want:
                        break
                else:
                    if len(rows) < batch:
                        break  # the range is exhausted
            if len(items) > limit:
                return Slice(items[:limit], positions[limit - 1])
            return Slice(items, None)

        return await self._read(run)

    async def update_memory(
        self,
        store_id: str,
        memory_id: str,
        *,
        content: str | None,
        path: str | None,
        expected_sha256: str | None,
        actor: Actor,
    ) -> Memory:
        def run(conn: Conn) -> Memory:
            store = self._load_store(conn, store_id, lock=True)
            self._check_writable(store)
            current = self._load_memory(conn, store_id, memory_id)
            new_content = current["content"] if content is None else content
            new_path = current["path"] if path is None else path
            unchanged = new_content == current["content"] and new_path == current["path"]
            if expected_sha256 is not None and expected_sha256 != current["content_sha256"]:
                if unchanged:  # the requested state is already there: success, no version
                    return _memory(current)
                raise PreconditionFailedError(
                    f"precondition failed: memory {memory_id!r} has content_sha256 "
                    f"{current['content_sha256']}, not {expected_sha256}"
                )
            if unchanged:
                return _memory(current)
            if new_path != current["path"]:
                self._check_path_free(conn, store_id, new_path)
            version_id, now = self._append_version(
                conn,
                store,
                memory_id=memory_id,
                operation="modified",
                path=new_path,
                content=new_content,
                actor=actor,
            )
            conn.execute(
                "UPDATE memories SET path = %s, content = %s, content_sha256 = %s, "
                "content_size = %s, head_version_id = %s, updated_us = %s WHERE id = %s",
                (
                    new_path,
                    new_content,
                    sha256_hex(new_content),
                    len(new_content.encode("utf-8")),
                    version_id,
                    now,
                    memory_id,
                ),
            )
            return _memory(self._load_memory(conn, store_id, memory_id))

        return await self._write(run)

    async def delete_memory(
        self, store_id: str, memory_id: str, *, expected_sha256: str | None, actor: Actor
    ) -> None:
        def run(conn: Conn) -> None:
            store = self._load_store(conn, store_id, lock=True)
            current = self._load_memory(conn, store_id, memory_id)
            if expected_sha256 is not None and expected_sha256 != current["content_sha256"]:
                raise PreconditionFailedError(
                    f"precondition failed: memory {memory_id!r} has content_sha256 "
                    f"{current['content_sha256']}, not {expected_sha256}; nothing was deleted"
                )
            self._append_version(
                conn,
                store,
                memory_id=memory_id,
                operation="deleted",
                path=current["path"],
                content=None,
                actor=actor,
            )
            conn.execute("DELETE FROM memories WHERE id = %s", (memory_id,))
            conn.execute(
                "UPDATE stores SET memory_count = memory_count - 1 WHERE id = %s", (store_id,)
            )

        await self._write(run)

    # -- versions ---------------------------------------------------------------------------------

    async def list_versions(
        self,
        store_id: str,
        flt: VersionFilter,
        *,
        after: int | None,
        limit: int,
        with_content: bool,
    ) -> Slice[MemoryVersion, int]:
        clauses = ["store_id = %s"]
        params: list[Any] = [store_id]
        if flt.memory_id is not None:
            clauses.append("memory_id = %s")
            params.append(flt.memory_id)
        if flt.operation is not None:
            clauses.append("operation = %s")
            params.append(flt.operation)
        for actor_type, value in (
            ("session_actor", flt.session_id),
            ("api_actor", flt.api_key_id),
            ("service_account_actor", flt.service_account_id),
        ):
            if value is not None:
                clauses.append("actor_type = %s AND actor_id = %s")
                params.extend([actor_type, value])
        if flt.created_gte is not None:
            clauses.append("created_us >= %s")
            params.append(to_us(flt.created_gte))
        if flt.created_lte is not None:
            clauses.append("created_us <= %s")
            params.append(to_us(flt.created_lte))
        if after is not None:
            clauses.append("seq < %s")
            params.append(after)
        columns = _VERSION_FULL if with_content else _VERSION_BASIC
        sql = (
            f"SELECT {columns} FROM versions WHERE {' AND '.join(clauses)} "
            "ORDER BY seq DESC LIMIT %s"
        )

        def run(conn: Conn) -> Slice[MemoryVersion, int]:
            self._load_store(conn, store_id)
            rows = conn.execute(sql, (*params, limit + 1)).fetchall()
            versions = [_version(row) for row in rows[:limit]]
            nxt = int(rows[limit - 1]["seq"]) if len(rows) > limit else None
            return Slice(versions, nxt)

        return await self._read(run)

    @staticmethod
    def _load_version(conn: Conn, store_id: str, version_id: str) -> Row:
        row = _one(
            conn,
            f"SELECT {_VERSION_FULL} FROM versions WHERE id = %s AND store_id = %s",
            (version_id, store_id),
        )
        if row is None:
            raise NotFoundError(f"memory version {version_id!r} not found in store {store_id!r}")
        return row

    async def get_version(self, store_id: str, version_id: str) -> MemoryVersion:
        def run(conn: Conn) -> MemoryVersion:
            self._load_store(conn, store_id)
            return _version(self._load_version(conn, store_id, version_id))

        return await self._read(run)

    async def redact_version(
        self, store_id: str, version_id: str, *, actor: Actor
    ) -> MemoryVersion:
        def run(conn: Conn) -> MemoryVersion:
            # The store lock orders this against a concurrent update moving the head.
            self._load_store(conn, store_id, lock=True)
            row = self._load_version(conn, store_id, version_id)
            if row["redacted_us"] is not None:
                return _version(row)
            head = _one(conn, "SELECT id FROM memories WHERE head_version_id = %s", (version_id,))
            if head is not None:
                raise BadRequestError(
                    f"memory version {version_id!r} is the current version of memory "
                    f"{head['id']!r} and cannot be redacted; write a new version or delete "
                    "the memory first"
                )
            conn.execute(
                "UPDATE versions SET path = NULL, content = NULL, content_sha256 = NULL, "
                "content_size = NULL, redacted_us = %s, redacted_by_type = %s, "
                "redacted_by_id = %s WHERE id = %s",
                (self._now_us(), actor.type, actor.id, version_id),
            )
            return _version(self._load_version(conn, store_id, version_id))

        return await self._write(run)

    async def prune_versions(self, older_than: datetime) -> int:
        cutoff = to_us(older_than)

        def run(conn: Conn) -> int:
            locked = _one(conn, "SELECT pg_try_advisory_xact_lock(%s) AS ok", (PRUNE_LOCK,))
            if not locked or not locked["ok"]:
                log.debug("another replica is pruning versions; skipping this round")
                return 0
            cursor = conn.execute(
                "DELETE FROM versions WHERE created_us < %s AND seq < ("
                "SELECT MAX(newer.seq) FROM versions AS newer "
                "WHERE newer.store_id = versions.store_id "
                "AND newer.memory_id = versions.memory_id)",
                (cutoff,),
            )
            return int(cursor.rowcount)

        return await self._write(run)

    async def ping(self) -> None:
        await self._read(lambda conn: conn.execute("SELECT 1").fetchone())
