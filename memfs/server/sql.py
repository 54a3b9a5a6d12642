"""The SQL core of the reference server: every ``Storage`` rule, once, for both SQL backends.

``SqlStorage`` implements each ``Storage`` operation as one function of a transaction (``Tx``):
the checks (existence, archived store, free path, the memory limit, content preconditions, the
head of a live memory) and the writes they guard, the no-op rules, version appending, redaction,
retention, the ``depth=1`` roll-up and the page positions. A backend subclass supplies only
what differs between databases:

- ``_read(fn)`` / ``_write(fn)``: run ``fn(tx)`` as one transaction in a worker thread, a read in
  one snapshot. ``_write`` must serialise every mutation of a store's memories and versions with
  every other one: SQLite has one writer (``BEGIN IMMEDIATE``); PostgreSQL locks the store row,
  which ``_load_store(..., lock=True)`` does with the dialect's ``lock_clause`` (``FOR UPDATE``).
  Every mutation below loads its store that way *before* any check, so no check can race;
- ``dialect``: placeholder style, the row lock clause, how many rows a ``depth=1`` seek fetches;
- ``_announce(tx, store_id)``: tell change-stream listeners, inside the transaction, that the
  store changed (PostgreSQL ``NOTIFY``; SQLite relies on ``changes.NotifyingStorage``);
- ``_claim_pruning(tx)``: whether this process prunes this round (PostgreSQL advisory lock).

Shared SQL is written with ``?`` placeholders and must hold no literal ``?`` or ``%``: ``Tx``
rewrites the placeholders for the dialect. It uses only what both SQLite (3.15+: row values) and
PostgreSQL accept; text compares in byte order on both (``schema`` declares ``COLLATE "C"`` on
PostgreSQL). Times are integer microseconds since the epoch (``to_us`` / ``from_us``).

This module must not open connections, start transactions or know a driver: that is the
backends' job. Nothing above the backends sees a row.
"""

from __future__ import annotations

import abc
import json
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar

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
from memfs.server import ids
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

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_us(moment: datetime) -> int:
    delta = moment.astimezone(UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def _upper_bound(prefix: str) -> str:
    """The smallest string above every string that starts with ``prefix`` (which ends in /)."""
    return prefix[:-1] + "0"  # '0' is '/' + 1


# -- the driver surface this module uses (sqlite3 and psycopg both provide it) --------------------


class Row(Protocol):
    def __getitem__(self, key: str, /) -> Any: ...


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...

    def close(self) -> None: ...


class Connection(Protocol):
    def execute(self, sql: str, params: Sequence[Any], /) -> Any: ...


@dataclass(frozen=True)
class Dialect:
    """What the shared SQL needs to know about a database."""

    placeholder: str  # "?" (sqlite3) or "%s" (psycopg)
    lock_clause: str  # appended to the SELECT of a store row that a mutation is about to guard
    # Rows one ``depth=1`` seek fetches at most (None: as many as the page wants). A driver that
    # reads a whole result at once wants a small batch, since a subdirectory ends the batch.
    rollup_batch: int | None


class Tx:
    """One transaction's connection, speaking the shared SQL (``?`` placeholders)."""

    __slots__ = ("conn", "dialect")

    def __init__(self, conn: Connection, dialect: Dialect) -> None:
        self.conn = conn
        self.dialect = dialect

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        if self.dialect.placeholder != "?":
            sql = sql.replace("?", self.dialect.placeholder)
        cursor: Cursor = self.conn.execute(sql, params)
        return cursor

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        row: Row | None = self.execute(sql, params).fetchone()
        return row


# -- rows to models -------------------------------------------------------------------------------

_STORE_COLUMNS = "id, name, description, metadata, created_us, updated_us, archived_us"
_STORE_STATE = "id, archived_us, memory_count, version_seq, last_version_us"
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


def _optional_time(value: int | None) -> datetime | None:
    return from_us(value) if value is not None else None


def _store(row: Row) -> MemoryStore:
    return MemoryStore(
        id=row["id"],
        name=row["name"],
        description=row["description"],
        metadata=json.loads(row["metadata"]),
        created_at=from_us(row["created_us"]),
        updated_at=from_us(row["updated_us"]),
        archived_at=_optional_time(row["archived_us"]),
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
        redacted_at=_optional_time(row["redacted_us"]),
        redacted_by=redacted_by,
    )


def _content_columns(content: str | None) -> tuple[str | None, str | None, int | None]:
    """``content, content_sha256, content_size`` of a content (``None``: a deleted version)."""
    if content is None:
        return None, None, None
    return content, sha256_hex(content), len(content.encode("utf-8"))


def _found(row: Row | None, not_found: str) -> Row:
    """The row a lookup found, or NotFoundError(not_found)."""
    if row is None:
        raise NotFoundError(not_found)
    return row


def _precondition_failed(memory_id: str, current: Row, expected: str, tail: str = "") -> Exception:
    return PreconditionFailedError(
        f"precondition failed: memory {memory_id!r} has content_sha256 "
        f"{current['content_sha256']}, not {expected}{tail}"
    )


class SqlStorage(Storage):
    """``Storage`` on a SQL database; a backend subclass runs the transactions (see above)."""

    dialect: Dialect

    def __init__(
        self,
        *,
        clock: Callable[[], datetime] = utc_now,
        max_memories: int = MAX_MEMORIES_PER_STORE,
    ) -> None:
        self.clock = clock
        self.max_memories = max_memories

    # -- what a backend provides ------------------------------------------------------------------

    @abc.abstractmethod
    async def _read(self, fn: Callable[[Tx], R]) -> R:
        """Run ``fn`` in one read-only transaction (one snapshot) in a worker thread."""

    @abc.abstractmethod
    async def _write(self, fn: Callable[[Tx], R]) -> R:
        """Run ``fn`` in one transaction in a worker thread; commit, or roll back on error."""

    def _announce(self, tx: Tx, store_id: str) -> None:
        """Inside a transaction that changed ``store_id``'s versions (or deleted it)."""

    def _claim_pruning(self, tx: Tx) -> bool:
        """Whether this process prunes versions in this transaction."""
        return True

    # -- shared checks (run inside a transaction) -------------------------------------------------

    def _now_us(self) -> int:
        return to_us(self.clock())

    def _load_store(self, tx: Tx, store_id: str, *, lock: bool = False) -> Row:
        """The store's state row; ``lock``: the row a mutation guards (see the module doc)."""
        sql = f"SELECT {_STORE_STATE} FROM stores WHERE id = ?" + self._lock(lock)
        return _found(tx.one(sql, (store_id,)), f"memory store {store_id!r} not found")

    def _get_store(self, tx: Tx, store_id: str, *, lock: bool = False) -> MemoryStore:
        sql = f"SELECT {_STORE_COLUMNS} FROM stores WHERE id = ?" + self._lock(lock)
        return _store(_found(tx.one(sql, (store_id,)), f"memory store {store_id!r} not found"))

    def _lock(self, lock: bool) -> str:
        return self.dialect.lock_clause if lock else ""

    @staticmethod
    def _check_writable(store: Row) -> None:
        if store["archived_us"] is not None:
            raise StoreArchivedError(
                f"{STORE_ARCHIVED_MESSAGE}: memory store {store['id']!r} is read-only"
            )

    @staticmethod
    def _load_memory(tx: Tx, store_id: str, memory_id: str) -> Row:
        row = tx.one(
            f"SELECT {_MEMORY_FULL} FROM memories WHERE id = ? AND store_id = ?",
            (memory_id, store_id),
        )
        return _found(row, f"memory {memory_id!r} not found in store {store_id!r}")

    @staticmethod
    def _load_version(tx: Tx, store_id: str, version_id: str) -> Row:
        row = tx.one(
            f"SELECT {_VERSION_FULL} FROM versions WHERE id = ? AND store_id = ?",
            (version_id, store_id),
        )
        return _found(row, f"memory version {version_id!r} not found in store {store_id!r}")

    @staticmethod
    def _check_path_free(tx: Tx, store_id: str, path: str) -> None:
        row = tx.one("SELECT id FROM memories WHERE store_id = ? AND path = ?", (store_id, path))
        if row is not None:
            raise PathConflictError(
                f"a memory already exists at path {path!r}",
                body={"error": {"conflicting_memory_id": row["id"], "conflicting_path": path}},
            )

    def _append_version(
        self,
        tx: Tx,
        store: Row,
        *,
        memory_id: str,
        operation: str,
        path: str,
        content: str | None,
        actor: Actor,
    ) -> tuple[str, int]:
        """Insert the next version of the (locked) store and announce it; returns (version id,
        created_us). ``seq`` is the store's last + 1 and ``created_us`` is ``max(now, last +
        1 µs)``, so both strictly increase in commit order (the ``storage`` invariant)."""
        seq = int(store["version_seq"]) + 1
        created_us = max(self._now_us(), int(store["last_version_us"]) + 1)
        version_id = ids.new_version_id()
        tx.execute(
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
                *_content_columns(content),
                created_us,
                actor.type,
                actor.id,
            ),
        )
        tx.execute(
            "UPDATE stores SET version_seq = ?, last_version_us = ? WHERE id = ?",
            (seq, created_us, store["id"]),
        )
        self._announce(tx, store["id"])
        return version_id, created_us

    # -- stores -----------------------------------------------------------------------------------

    async def create_store(
        self, *, name: str, description: str, metadata: dict[str, str]
    ) -> MemoryStore:
        def run(tx: Tx) -> MemoryStore:
            store_id = ids.new_store_id()
            now = self._now_us()
            tx.execute(
                "INSERT INTO stores (id, name, description, metadata, created_us, updated_us) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (store_id, name, description, json.dumps(metadata), now, now),
            )
            return self._get_store(tx, store_id)

        return await self._write(run)

    async def get_store(self, store_id: str) -> MemoryStore:
        return await self._read(lambda tx: self._get_store(tx, store_id))

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
            clauses.append("(created_us, id) < (?, ?)")
            params.extend([to_us(after.created_at), after.store_id])
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        sql = (
            f"SELECT {_STORE_COLUMNS} FROM stores {where} ORDER BY created_us DESC, id DESC LIMIT ?"
        )

        def run(tx: Tx) -> Slice[MemoryStore, StorePosition]:
            rows = tx.execute(sql, (*params, limit + 1)).fetchall()
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
        def run(tx: Tx) -> MemoryStore:
            self._check_writable(self._load_store(tx, store_id, lock=True))
            current = self._get_store(tx, store_id)
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
                return current  # a no-op update does not move updated_at
            tx.execute(
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
            return self._get_store(tx, store_id)

        return await self._write(run)

    async def archive_store(self, store_id: str) -> MemoryStore:
        def run(tx: Tx) -> MemoryStore:
            current = self._get_store(tx, store_id, lock=True)
            if current.archived_at is not None:
                return current
            now = max(self._now_us(), to_us(current.updated_at))
            tx.execute(
                "UPDATE stores SET archived_us = ?, updated_us = ? WHERE id = ?",
                (now, now, store_id),
            )
            return self._get_store(tx, store_id)

        return await self._write(run)

    async def delete_store(self, store_id: str) -> None:
        def run(tx: Tx) -> None:
            self._load_store(tx, store_id, lock=True)
            # Explicit deletes keep this portable and fast; the foreign keys cascade anyway.
            tx.execute("DELETE FROM versions WHERE store_id = ?", (store_id,))
            tx.execute("DELETE FROM memories WHERE store_id = ?", (store_id,))
            tx.execute("DELETE FROM stores WHERE id = ?", (store_id,))
            self._announce(tx, store_id)

        await self._write(run)

    # -- memories ---------------------------------------------------------------------------------

    async def create_memory(
        self, store_id: str, *, path: str, content: str, actor: Actor
    ) -> Memory:
        def run(tx: Tx) -> Memory:
            store = self._load_store(tx, store_id, lock=True)
            self._check_writable(store)
            self._check_path_free(tx, store_id, path)
            if int(store["memory_count"]) >= self.max_memories:
                raise StoreFullError(
                    f"{STORE_FULL_MESSAGE}: memory store {store_id!r} already holds "
                    f"{self.max_memories} memories; delete some before creating more"
                )
            memory_id = ids.new_memory_id()
            version_id, now = self._append_version(
                tx,
                store,
                memory_id=memory_id,
                operation="created",
                path=path,
                content=content,
                actor=actor,
            )
            tx.execute(
                "INSERT INTO memories (id, store_id, path, content, content_sha256, "
                "content_size, head_version_id, created_us, updated_us) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (memory_id, store_id, path, *_content_columns(content), version_id, now, now),
            )
            tx.execute(
                "UPDATE stores SET memory_count = memory_count + 1 WHERE id = ?", (store_id,)
            )
            return _memory(self._load_memory(tx, store_id, memory_id))

        return await self._write(run)

    async def get_memory(self, store_id: str, memory_id: str) -> Memory:
        def run(tx: Tx) -> Memory:
            self._load_store(tx, store_id)
            return _memory(self._load_memory(tx, store_id, memory_id))

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
        batch = self.dialect.rollup_batch if depth == 1 else None

        def seek(tx: Tx, bound: MemoryPosition, count: int) -> Cursor:
            # sqlite3 steps rows lazily: breaking out of the loop below reads no further rows.
            op = ">=" if bound.inclusive else ">"
            return tx.execute(
                f"SELECT {columns} FROM memories WHERE store_id = ? AND path {op} ? "
                "AND path < ? ORDER BY path LIMIT ?",
                (store_id, bound.key, upper, count),
            )

        def run(tx: Tx) -> Slice[ListItem, MemoryPosition]:
            self._load_store(tx, store_id)
            bound = after if after is not None else MemoryPosition(prefix, True)
            items: list[ListItem] = []
            positions: list[MemoryPosition] = []
            want = limit + 1  # one more than a page, to know whether another page exists
            while len(items) < want:
                count = want - len(items) if batch is None else min(want - len(items), batch)
                found = 0
                rows = seek(tx, bound, count)
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
        def run(tx: Tx) -> Memory:
            store = self._load_store(tx, store_id, lock=True)
            self._check_writable(store)
            current = self._load_memory(tx, store_id, memory_id)
            new_content = current["content"] if content is None else content
            new_path = current["path"] if path is None else path
            unchanged = new_content == current["content"] and new_path == current["path"]
            if expected_sha256 is not None and expected_sha256 != current["content_sha256"]:
                if unchanged:  # the requested state is already there: success, no version
                    return _memory(current)
                raise _precondition_failed(memory_id, current, expected_sha256)
            if unchanged:
                return _memory(current)
            if new_path != current["path"]:
                self._check_path_free(tx, store_id, new_path)
            version_id, now = self._append_version(
                tx,
                store,
                memory_id=memory_id,
                operation="modified",
                path=new_path,
                content=new_content,
                actor=actor,
            )
            tx.execute(
                "UPDATE memories SET path = ?, content = ?, content_sha256 = ?, "
                "content_size = ?, head_version_id = ?, updated_us = ? WHERE id = ?",
                (new_path, *_content_columns(new_content), version_id, now, memory_id),
            )
            return _memory(self._load_memory(tx, store_id, memory_id))

        return await self._write(run)

    async def delete_memory(
        self, store_id: str, memory_id: str, *, expected_sha256: str | None, actor: Actor
    ) -> None:
        def run(tx: Tx) -> None:
            store = self._load_store(tx, store_id, lock=True)
            current = self._load_memory(tx, store_id, memory_id)
            if expected_sha256 is not None and expected_sha256 != current["content_sha256"]:
                raise _precondition_failed(
                    memory_id, current, expected_sha256, "; nothing was deleted"
                )
            self._append_version(
                tx,
                store,
                memory_id=memory_id,
                operation="deleted",
                path=current["path"],
                content=None,
                actor=actor,
            )
            tx.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
            tx.execute(
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
        oldest_first: bool = False,
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
            clauses.append("seq > ?" if oldest_first else "seq < ?")
            params.append(after)
        columns = _VERSION_FULL if with_content else _VERSION_BASIC
        sql = (
            f"SELECT {columns} FROM versions WHERE {' AND '.join(clauses)} "
            f"ORDER BY seq {'ASC' if oldest_first else 'DESC'} LIMIT ?"
        )

        def run(tx: Tx) -> Slice[MemoryVersion, int]:
            self._load_store(tx, store_id)
            rows = tx.execute(sql, (*params, limit + 1)).fetchall()
            versions = [_version(row) for row in rows[:limit]]
            nxt = int(rows[limit - 1]["seq"]) if len(rows) > limit else None
            return Slice(versions, nxt)

        return await self._read(run)

    async def get_version(self, store_id: str, version_id: str) -> MemoryVersion:
        def run(tx: Tx) -> MemoryVersion:
            self._load_store(tx, store_id)
            return _version(self._load_version(tx, store_id, version_id))

        return await self._read(run)

    async def redact_version(
        self, store_id: str, version_id: str, *, actor: Actor
    ) -> MemoryVersion:
        def run(tx: Tx) -> MemoryVersion:
            # The store lock orders this against a concurrent update moving the head.
            self._load_store(tx, store_id, lock=True)
            row = self._load_version(tx, store_id, version_id)
            if row["redacted_us"] is not None:
                return _version(row)
            head = tx.one("SELECT id FROM memories WHERE head_version_id = ?", (version_id,))
            if head is not None:
                raise BadRequestError(
                    f"memory version {version_id!r} is the current version of memory "
                    f"{head['id']!r} and cannot be redacted; write a new version or delete "
                    "the memory first"
                )
            tx.execute(
                "UPDATE versions SET path = NULL, content = NULL, content_sha256 = NULL, "
                "content_size = NULL, redacted_us = ?, redacted_by_type = ?, "
                "redacted_by_id = ? WHERE id = ?",
                (self._now_us(), actor.type, actor.id, version_id),
            )
            return _version(self._load_version(tx, store_id, version_id))

        return await self._write(run)

    async def prune_versions(self, older_than: datetime) -> int:
        cutoff = to_us(older_than)

        def run(tx: Tx) -> int:
            if not self._claim_pruning(tx):
                return 0
            # A memory's newest version (its head, or its ``deleted`` version) is never pruned.
            cursor = tx.execute(
                "DELETE FROM versions WHERE created_us < ? AND seq < ("
                "SELECT MAX(newer.seq) FROM versions AS newer "
                "WHERE newer.store_id = versions.store_id "
                "AND newer.memory_id = versions.memory_id)",
                (cutoff,),
            )
            return int(cursor.rowcount)

        return await self._write(run)

    async def ping(self) -> None:
        await self._read(lambda tx: tx.execute("SELECT 1").fetchone())
