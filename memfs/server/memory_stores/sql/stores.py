"""The memory store operations in SQL: create, get, list, update, archive and delete a store.

Newest first in listings (``created_us``, then id, descending; the page position is the last
store's pair). An update of an archived store is refused; a no-op update leaves ``updated_at``
alone, and a patch may not leave more than ``MAX_METADATA_PAIRS`` pairs. Archiving an archived
store returns it unchanged. Deleting a store deletes its memories and versions in the same
transaction and announces it (an open change stream then ends with a 404).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from memfs.contract.errors import BadRequestError
from memfs.contract.models import MemoryStore
from memfs.server.db import ids
from memfs.server.db.clock import to_us
from memfs.server.db.transaction import Tx
from memfs.server.memory_stores.sql.base import SqlBase
from memfs.server.memory_stores.sql.rows import STORE_COLUMNS, store_from_row
from memfs.server.memory_stores.storage import (
    MAX_METADATA_PAIRS,
    MetadataPatch,
    Slice,
    StoreFilter,
    StorePosition,
)

log = logging.getLogger(__name__)


class StoreQueries(SqlBase):
    """The store operations of ``SqlStorage``."""

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
            f"SELECT {STORE_COLUMNS} FROM stores {where} ORDER BY created_us DESC, id DESC LIMIT ?"
        )

        def run(tx: Tx) -> Slice[MemoryStore, StorePosition]:
            rows = tx.execute(sql, (*params, limit + 1)).fetchall()
            stores = [store_from_row(row) for row in rows[:limit]]
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
            self.search.remove_store(tx, "memory_stores", store_id)
            self._announce(tx, store_id)

        await self._write(run)
