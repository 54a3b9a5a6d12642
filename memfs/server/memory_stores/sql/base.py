"""What every SQL operation stands on: the backend's contract and the checks shared by all.

``SqlBase`` is the ``MemoryStoresStorage`` that the operation classes (``stores``, ``memories``,
``versions``) build on. A backend subclass supplies only what differs between databases:

- ``_read(fn)`` / ``_write(fn)``: run ``fn(tx)`` as one transaction in a worker thread, a read in
  one snapshot. ``_write`` must serialise every mutation of a store's memories and versions with
  every other one: SQLite has one writer (``BEGIN IMMEDIATE``); PostgreSQL locks the store row,
  which ``_load_store(..., lock=True)`` does with the dialect's ``lock_clause`` (``FOR UPDATE``).
  Every mutation loads its store that way *before* any check, so no check can race;
- ``dialect``: placeholder style, the row lock clause, how many rows a ``depth=1`` seek fetches;
- ``_announce(tx, store_id)``: tell change-stream listeners, inside the transaction, that the
  store changed (PostgreSQL ``NOTIFY``; SQLite publishes to its hub once the write commits);
- ``_claim_pruning(tx)``: whether this process prunes this round (PostgreSQL advisory lock).

Shared here, run inside a transaction: loading a store (optionally locked), a memory or a
version (``NotFoundError`` when missing), the archived-store and free-path checks, and
``_append_version``, the one place a version is written: it keeps ``seq`` and ``created_at``
strictly increasing in commit order (the ``memory_stores.storage`` invariant).
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

import trio

from memfs.contract.errors import (
    STORE_ARCHIVED_MESSAGE,
    NotFoundError,
    PathConflictError,
    StoreArchivedError,
)
from memfs.contract.models import Actor, MemoryStore
from memfs.server.db import ids
from memfs.server.db.clock import to_us, utc_now
from memfs.server.db.transaction import Dialect, Row, Tx
from memfs.server.memory_stores.sql.rows import (
    MEMORY_FULL,
    STORE_COLUMNS,
    STORE_STATE,
    VERSION_FULL,
    content_columns,
    store_from_row,
)
from memfs.server.memory_stores.storage import MAX_MEMORIES_PER_STORE, MemoryStoresStorage
from memfs.server.search import SearchIndex

log = logging.getLogger(__name__)

R = TypeVar("R")


def _found(row: Row | None, not_found: str) -> Row:
    """The row a lookup found, or NotFoundError(not_found)."""
    if row is None:
        raise NotFoundError(not_found)
    return row


class SqlBase(MemoryStoresStorage):
    """``MemoryStoresStorage`` on a SQL database: the backend's hooks and the shared checks (see
    above)."""

    dialect: Dialect

    def __init__(
        self,
        *,
        clock: Callable[[], datetime] = utc_now,
        max_memories: int = MAX_MEMORIES_PER_STORE,
        search: SearchIndex | None = None,
    ) -> None:
        self.clock = clock
        self.max_memories = max_memories
        # The search index, written in the same transactions as the documents it indexes.
        self.search = search if search is not None else SearchIndex()

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

    def _retain_more(self, tx: Tx, cutoff_us: int) -> None:
        """Inside the transaction that prunes versions older than ``cutoff_us``: prune what else
        the database keeps for as long (``backends.storage``: the Databricks change log)."""

    # -- shared checks (run inside a transaction) -------------------------------------------------

    def _now_us(self) -> int:
        return to_us(self.clock())

    def _load_store(self, tx: Tx, store_id: str, *, lock: bool = False) -> Row:
        """The store's state row; ``lock``: the row a mutation guards (see the module doc)."""
        sql = f"SELECT {STORE_STATE} FROM stores WHERE id = ?" + self._lock(lock)
        return _found(tx.one(sql, (store_id,)), f"memory store {store_id!r} not found")

    def _get_store(self, tx: Tx, store_id: str, *, lock: bool = False) -> MemoryStore:
        sql = f"SELECT {STORE_COLUMNS} FROM stores WHERE id = ?" + self._lock(lock)
        row = _found(tx.one(sql, (store_id,)), f"memory store {store_id!r} not found")
        return store_from_row(row)

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
            f"SELECT {MEMORY_FULL} FROM memories WHERE id = ? AND store_id = ?",
            (memory_id, store_id),
        )
        return _found(row, f"memory {memory_id!r} not found in store {store_id!r}")

    @staticmethod
    def _load_version(tx: Tx, store_id: str, version_id: str) -> Row:
        row = tx.one(
            f"SELECT {VERSION_FULL} FROM versions WHERE id = ? AND store_id = ?",
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
                *content_columns(content, tx.dialect),
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

    async def _warm_search(self, description: str, content: str | None) -> None:
        """Embed a document's new text before the write transaction (``SearchIndex.warm``)."""
        if content is not None and self.search.semantic:
            await trio.to_thread.run_sync(self.search.warm, description, content)
