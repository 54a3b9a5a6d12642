"""The SQLite backend of ``Storage``: WAL, foreign keys, busy timeout, blocking calls off-loop.

Connection discipline (the invariant that makes this correct under concurrency):
- one *writer* connection; every mutation takes ``_write_lock`` (a trio.Lock), then runs as one
  ``BEGIN IMMEDIATE`` … ``COMMIT`` transaction in a worker thread. Checks (existence, archived,
  path free, store not full, precondition) and the writes they guard happen in that same
  transaction, so two requests can never both pass a check (no lost update, no 2,001st memory).
  ``BEGIN IMMEDIATE`` plus the busy timeout also serialises writers of *other* processes;
- a small pool of *reader* connections, each used by one thread at a time (taken from a trio
  channel); a read runs in one deferred transaction so multi-query reads (``depth=1``) see one
  snapshot. WAL lets reads proceed while a write is in progress.
A worker thread is never abandoned on cancellation (``trio.to_thread.run_sync`` default), so a
connection is never used by two threads at once.

SQL lives only here and in ``schema``; nothing above this module sees a row.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

import trio

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
Row = sqlite3.Row

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_us(moment: datetime) -> int:
    delta = moment.astimezone(UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


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


class SqliteStorage(Storage):
    """``Storage`` on one SQLite database file. Create with ``await SqliteStorage.open(path)``."""

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], datetime] = utc_now,
        readers: int = 4,
        busy_timeout_ms: int = 10_000,
        max_memories: int = MAX_MEMORIES_PER_STORE,
    ) -> None:
        self.path = str(path)
        self.clock = clock
        self.max_memories = max_memories
        self._busy_timeout_ms = busy_timeout_ms
        self._reader_count = readers
        self._writer: sqlite3.Connection | None = None
        self._write_lock = trio.Lock()
        self._readers: list[sqlite3.Connection] = []
        self._pool_send, self._pool_receive = trio.open_memory_channel[sqlite3.Connection](readers)

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

    async def _write(self, fn: Callable[[sqlite3.Connection], R]) -> R:
        async with self._write_lock:
            if self._writer is None:
                raise RuntimeError("storage is closed")
            return await trio.to_thread.run_sync(_transaction, self._writer, "BEGIN IMMEDIATE", fn)

    async def _read(self, fn: Callable[[sqlite3.Connection], R]) -> R:
        async with self._reader() as conn:
            return await trio.to_thread.run_sync(_transaction, conn, "BEGIN", fn)

    @asynccontextmanager
    async def _reader(self) -> AsyncIterator[sqlite3.Connection]:
        conn = await self._pool_receive.receive()
        try:
            yield conn
        finally:
            self._pool_send.send_nowait(conn)

    def _now_us(self) -> int:
        return to_us(self.clock())

    # -- shared checks (run inside a transaction) -------------------------------------------------

    @staticmethod
    def _load_store(conn: sqlite3.Connection, store_id: str) -> Row:
        row = conn.execute(
            "SELECT id, archived_us, memory_count, version_seq, last_version_us "
            "FROM stores WHERE id = ?",
            (store_id,),
        ).fetchone()
        if row is None:
            raise _store_not_found(store_id)
        return cast(Row, row)

    @staticmethod
    def _check_writable(store: Row) -> None:
        if store["archived_us"] is not None:
            raise StoreArchivedError(
                f"{STORE_ARCHIVED_MESSAGE}: memory store {store['id']!r} is read-only"
            )

    @staticmethod
    def _load_memory(conn: sqlite3.Connection, store_id: str, memory_id: str) -> Row:
        row = conn.execute(
            f"SELECT {_MEMORY_FULL} FROM memories WHERE id = ? AND store_id = ?",
            (memory_id, store_id),
        ).fetchone()
        if row is None:
            raise NotFoundError(f"memory {memory_id!r} not found in store {store_id!r}")
        return cast(Row, row)

    @staticmethod
    def _check_path_free(conn: sqlite3.Connection, store_id: str, path: str) -> None:
        row = conn.execute(
            "SELECT id FROM memories WHERE store_id = ? AND path = ?", (store_id, path)
        ).fetchone()
        if row is not None:
            raise PathConflictError(
                f"a memory already exists at path {path!r}",
                body={"error": {"conflicting_memory_id": row["id"], "conflicting_path": path}},
            )

    def _append_version(
        self,
        conn: sqlite3.Connection,
        store: Row,
        *,
        memory_id: str,
        operation: str,
        path: str,
        content: str | None,
        actor: Actor,
    ) -> tuple[str, int]:
        """Insert the next version of the store; returns (version id, created_us)."""
        seq = int(store["version_seq"]) + 1
        created_us = max(self._now_us(), int(store["last_version_us"]) + 1)
        version_id = ids.new_version_id()
        conn.execute(
            "INSERT INTO versions (id, store_id, seq, memory_id, operation, path, content, "
            "content_sha256, content_size, created_us, actor_type, actor_id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            "UPDATE stores SET version_seq = ?, last_version_us = ? WHERE id = ?",
            (seq, created_us, store["id"]),
        )
        return version_id, created_us

    # -- stores -----------------------------------------------------------------------------------

    async def create_store(
        self, *, name: str, description: str, metadata: dict[str, str]
    ) -> MemoryStore:
        def run(conn: sqlite3.Connection) -> MemoryStore:
            store_id = ids.new_store_id()
            now = self._now_us()
            conn.execute(
                "INSERT INTO stores (id, name, description, metadata, created_us, updated_us) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (store_id, name, description, json.dumps(metadata), now, now),
            )
            return self._get_store_sync(conn, store_id)

        return await self._write(run)

    @staticmethod
    def _get_store_sync(conn: sqlite3.Connection, store_id: str) -> MemoryStore:
        row = conn.execute(
            f"SELECT {_STORE_COLUMNS} FROM stores WHERE id = ?", (store_id,)
        ).fetchone()
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
            clauses.append("created_us >= ?")
            params.append(to_us(flt.created_gte))
        if flt.created_lte is not None:
            clauses.append("created_us <= ?")
            params.append(to_us(flt.created_lte))
        if after is not None:
            after_us = to_us(after.created_at)
            clauses.append("(created_us < ? OR (created_us = ? AND id < ?))")
            params.extend([after_us, after_us, after.store_id])
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        sql = (
            f"SELECT {_STORE_COLUMNS} FROM stores {where} ORDER BY created_us DESC, id DESC LIMIT ?"
        )

        def run(conn: sqlite3.Connection) -> Slice[MemoryStore, StorePosition]:
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
        def run(conn: sqlite3.Connection) -> MemoryStore:
            self._check_writable(self._load_store(conn, store_id))
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
                "UPDATE stores SET name = ?, description = ?, metadata = ?, updated_us = ? "
                "WHERE id = ?",
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
        def run(conn: sqlite3.Connection) -> MemoryStore:
            current = self._get_store_sync(conn, store_id)
            if current.archived_at is not None:
                return current
            now = max(self._now_us(), to_us(current.updated_at))
            conn.execute(
                "UPDATE stores SET archived_us = ?, updated_us = ? WHERE id = ?",
                (now, now, store_id),
            )
            return self._get_store_sync(conn, store_id)

        return await self._write(run)

    async def delete_store(self, store_id: str) -> None:
        def run(conn: sqlite3.Connection) -> None:
            self._load_store(conn, store_id)
            # Explicit deletes keep this portable and fast; the foreign keys cascade anyway.
            conn.execute("DELETE FROM versions WHERE store_id = ?", (store_id,))
            conn.execute("DELETE FROM memories WHERE store_id = ?", (store_id,))
            conn.execute("DELETE FROM stores WHERE id = ?", (store_id,))

        await self._write(run)

    # -- memories ---------------------------------------------------------------------------------

    async def create_memory(
        self, store_id: str, *, path: str, content: str, actor: Actor
    ) -> Memory:
        def run(conn: sqlite3.Connection) -> Memory:
            store = self._load_store(conn, store_id)
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
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                "UPDATE stores SET memory_count = memory_count + 1 WHERE id = ?", (store_id,)
            )
            return _memory(self._load_memory(conn, store_id, memory_id))

        return await self._write(run)

    async def get_memory(self, store_id: str, memory_id: str) -> Memory:
        def run(conn: sqlite3.Connection) -> Memory:
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

        def seek(conn: sqlite3.Connection, bound: MemoryPosition, count: int) -> sqlite3.Cursor:
            # Rows are stepped lazily: breaking out of the loop below reads no further rows.
            op = ">=" if bound.inclusive else ">"
            return conn.execute(
                f"SELECT {columns} FROM memories WHERE store_id = ? AND path {op} ? "
                "AND path < ? ORDER BY path LIMIT ?",
                (store_id, bound.key, upper, count),
            )

        def run(conn: sqlite3.Connection) -> Slice[ListItem, MemoryPosition]:
            self._load_store(conn, store_id)
            bound = after if after is not None else MemoryPosition(prefix, True)
            items: list[ListItem] = []
            positions: list[MemoryPosition] = []
            want = limit + 1  # one more than a page, to know whether another page exists
            while len(items) < want:
                count = want - len(items)
                found = 0
                rows = seek(conn, bound, count)
                for found, row in enumerate(rows, start=1):  # noqa: B007 - read after the loop
                    rest = row["path"][len(prefix) :]
                    if depth == 1 and "/" in rest:
                        directory = prefix + rest.split("/", 1)[0] + "/"
                        items.append(MemoryPrefix(directory))
                        # Skip the whole subdirectory with one index seek.
                        bound = MemoryPosition(_upper_bound(directory), True)
                        positions.append(bound)
                        rows.close()
                        break
                    items.append(_memory(row))
                    bound = MemoryPosition(row["path"], False)
                    positions.append(bound)
                else:
                    if found < count:  # the range is exhausted
                        break
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
        def run(conn: sqlite3.Connection) -> Memory:
            store = self._load_store(conn, store_id)
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
                "UPDATE memories SET path = ?, content = ?, content_sha256 = ?, "
                "content_size = ?, head_version_id = ?, updated_us = ? WHERE id = ?",
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
        def run(conn: sqlite3.Connection) -> None:
            store = self._load_store(conn, store_id)
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
            conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
            conn.execute(
                "UPDATE stores SET memory_count = memory_count - 1 WHERE id = ?", (store_id,)
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
        clauses = ["store_id = ?"]
        params: list[Any] = [store_id]
        if flt.memory_id is not None:
            clauses.append("memory_id = ?")
            params.append(flt.memory_id)
        if flt.operation is not None:
            clauses.append("operation = ?")
            params.append(flt.operation)
        for actor_type, value in (
            ("session_actor", flt.session_id),
            ("api_actor", flt.api_key_id),
            ("service_account_actor", flt.service_account_id),
        ):
            if value is not None:
                clauses.append("actor_type = ? AND actor_id = ?")
                params.extend([actor_type, value])
        if flt.created_gte is not None:
            clauses.append("created_us >= ?")
            params.append(to_us(flt.created_gte))
        if flt.created_lte is not None:
            clauses.append("created_us <= ?")
            params.append(to_us(flt.created_lte))
        if after is not None:
            clauses.append("seq < ?")
            params.append(after)
        columns = _VERSION_FULL if with_content else _VERSION_BASIC
        sql = (
            f"SELECT {columns} FROM versions WHERE {' AND '.join(clauses)} "
            "ORDER BY seq DESC LIMIT ?"
        )

        def run(conn: sqlite3.Connection) -> Slice[MemoryVersion, int]:
            self._load_store(conn, store_id)
            rows = conn.execute(sql, (*params, limit + 1)).fetchall()
            versions = [_version(row) for row in rows[:limit]]
            nxt = int(rows[limit - 1]["seq"]) if len(rows) > limit else None
            return Slice(versions, nxt)

        return await self._read(run)

    @staticmethod
    def _load_version(conn: sqlite3.Connection, store_id: str, version_id: str) -> Row:
        row = conn.execute(
            f"SELECT {_VERSION_FULL} FROM versions WHERE id = ? AND store_id = ?",
            (version_id, store_id),
        ).fetchone()
        if row is None:
            raise NotFoundError(f"memory version {version_id!r} not found in store {store_id!r}")
        return cast(Row, row)

    async def get_version(self, store_id: str, version_id: str) -> MemoryVersion:
        def run(conn: sqlite3.Connection) -> MemoryVersion:
            self._load_store(conn, store_id)
            return _version(self._load_version(conn, store_id, version_id))

        return await self._read(run)

    async def redact_version(
        self, store_id: str, version_id: str, *, actor: Actor
    ) -> MemoryVersion:
        def run(conn: sqlite3.Connection) -> MemoryVersion:
            self._load_store(conn, store_id)
            row = self._load_version(conn, store_id, version_id)
            if row["redacted_us"] is not None:
                return _version(row)
            head = conn.execute(
                "SELECT id FROM memories WHERE head_version_id = ?", (version_id,)
            ).fetchone()
            if head is not None:
                raise BadRequestError(
                    f"memory version {version_id!r} is the current version of memory "
                    f"{head['id']!r} and cannot be redacted; write a new version or delete "
                    "the memory first"
                )
            conn.execute(
                "UPDATE versions SET path = NULL, content = NULL, content_sha256 = NULL, "
                "content_size = NULL, redacted_us = ?, redacted_by_type = ?, "
                "redacted_by_id = ? WHERE id = ?",
                (self._now_us(), actor.type, actor.id, version_id),
            )
            return _version(self._load_version(conn, store_id, version_id))

        return await self._write(run)

    async def prune_versions(self, older_than: datetime) -> int:
        cutoff = to_us(older_than)

        def run(conn: sqlite3.Connection) -> int:
            cursor = conn.execute(
                "DELETE FROM versions WHERE created_us < ? AND seq < ("
                "SELECT MAX(newer.seq) FROM versions AS newer "
                "WHERE newer.store_id = versions.store_id "
                "AND newer.memory_id = versions.memory_id)",
                (cutoff,),
            )
            return int(cursor.rowcount)

        return await self._write(run)

    async def ping(self) -> None:
        await self._read(lambda conn: conn.execute("SELECT 1").fetchone())


def _transaction(conn: sqlite3.Connection, begin: str, fn: Callable[[sqlite3.Connection], R]) -> R:
    """Run ``fn`` in one transaction on ``conn`` (in a worker thread); roll back on error."""
    conn.execute(begin)
    try:
        result = fn(conn)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return result
