"""Searching a Memory Stores store, and embedding what the index lacks at start-up.

``search_memories`` asks ``SqlBase.search`` (``memfs.server.search``) for the best memory ids
of a store and reads those memories in the same snapshot, so every hit is a live memory with
its current content. The index itself is written by the memory and store operations.
"""

from __future__ import annotations

import logging

from memfs.contract.models import Memory
from memfs.server.db.transaction import Tx
from memfs.server.memory_stores.sql.base import SqlBase
from memfs.server.memory_stores.sql.memories import MEMORY_STORES
from memfs.server.memory_stores.sql.rows import MEMORY_FULL, memory_from_row
from memfs.server.search import SearchScope

log = logging.getLogger(__name__)


class SearchQueries(SqlBase):
    """The search operations of ``SqlStorage``."""

    async def search_memories(
        self, store_id: str, query: str, *, limit: int, path_prefix: str | None
    ) -> list[tuple[Memory, float]]:
        scope = SearchScope(MEMORY_STORES, store_id, path_prefix=path_prefix)

        def run(tx: Tx) -> list[tuple[Memory, float]]:
            self._load_store(tx, store_id)
            hits = self.search.search(tx, scope, query, limit)
            if not hits:
                return []
            marks = ", ".join("?" for _ in hits)
            rows = tx.execute(
                f"SELECT {MEMORY_FULL} FROM memories WHERE store_id = ? AND id IN ({marks})",
                (store_id, *(hit.doc_id for hit in hits)),
            ).fetchall()
            memories = {row["id"]: memory_from_row(row, tx.dialect) for row in rows}
            return [(memories[hit.doc_id], hit.score) for hit in hits if hit.doc_id in memories]

        return await self._read(run)

    async def backfill_search(self, batch: int = 32) -> int:
        """Embed every indexed document that lacks the semantic model's vector (documents
        written while semantic search was off); how many were. A no-op without a model."""
        total = 0
        while count := await self._write(lambda tx: self.search.backfill(tx, batch)):
            total += count
            log.info("search: embedded %d documents so far", total)
        return total
