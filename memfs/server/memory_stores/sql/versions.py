"""The memory version operations in SQL: list, get, redact and prune versions.

Versions are written only by ``SqlBase._append_version``; here they are read, newest first by
the store-wide ``seq`` (oldest first for the change stream), filtered by memory, operation,
actor and time; the page position is the last ``seq``. A redaction clears a version's path and
content and records who redacted it; the head of a live memory is never redacted (400), and
redacting a redacted version returns it unchanged. Retention (``prune_versions``) deletes old
versions but never a memory's newest one, and on PostgreSQL only one replica prunes at a time
(``_claim_pruning``); the Databricks change log is pruned with them.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from memfs.contract.errors import BadRequestError
from memfs.contract.models import Actor, MemoryVersion
from memfs.server.db.clock import to_us
from memfs.server.db.transaction import Tx
from memfs.server.memory_stores.sql.base import SqlBase
from memfs.server.memory_stores.sql.rows import VERSION_BASIC, VERSION_FULL, version_from_row
from memfs.server.memory_stores.storage import Slice, VersionFilter

log = logging.getLogger(__name__)


class VersionQueries(SqlBase):
    """The version operations of ``SqlStorage``."""

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
        columns = VERSION_FULL if with_content else VERSION_BASIC
        sql = (
            f"SELECT {columns} FROM versions WHERE {' AND '.join(clauses)} "
            f"ORDER BY seq {'ASC' if oldest_first else 'DESC'} LIMIT ?"
        )

        def run(tx: Tx) -> Slice[MemoryVersion, int]:
            self._load_store(tx, store_id)
            rows = tx.execute(sql, (*params, limit + 1)).fetchall()
            versions = [version_from_row(row, tx.dialect) for row in rows[:limit]]
            nxt = int(rows[limit - 1]["seq"]) if len(rows) > limit else None
            return Slice(versions, nxt)

        return await self._read(run)

    async def get_version(self, store_id: str, version_id: str) -> MemoryVersion:
        def run(tx: Tx) -> MemoryVersion:
            self._load_store(tx, store_id)
            return version_from_row(self._load_version(tx, store_id, version_id), tx.dialect)

        return await self._read(run)

    async def redact_version(
        self, store_id: str, version_id: str, *, actor: Actor
    ) -> MemoryVersion:
        def run(tx: Tx) -> MemoryVersion:
            # The store lock orders this against a concurrent update moving the head.
            self._load_store(tx, store_id, lock=True)
            row = self._load_version(tx, store_id, version_id)
            if row["redacted_us"] is not None:
                return version_from_row(row, tx.dialect)
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
            return version_from_row(self._load_version(tx, store_id, version_id), tx.dialect)

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
            pruned = int(cursor.rowcount)
            self._retain_more(tx, cutoff)
            return pruned

        return await self._write(run)
