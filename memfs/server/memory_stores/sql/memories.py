"""The memory operations in SQL: create, get, list, update and delete a memory.

Each mutation locks its store first (``SqlBase._load_store(lock=True)``), then checks what
depends on stored state: the store is not archived (create, update), the path is free, the
store holds fewer than ``max_memories`` (create), the content precondition (update, delete).
An update that changes nothing, or whose failed precondition asks for the state already
stored, succeeds and writes no version. Every write appends its version with
``SqlBase._append_version``, moves the memory's head to it and updates the search index
(``SqlBase.search``) in the same transaction.

Listings walk the ``(store_id, path)`` index in byte order. ``depth=1`` rolls a subdirectory up
into one ``memory_prefix`` item and seeks straight past its range (``prefix/`` to ``prefix0``)
instead of reading the subtree; the page position is the last key, inclusive after a roll-up.
"""

from __future__ import annotations

import logging

from memfs.contract.errors import STORE_FULL_MESSAGE, PreconditionFailedError, StoreFullError
from memfs.contract.models import Actor, Memory, MemoryPrefix
from memfs.server.db import ids
from memfs.server.db.transaction import Cursor, Row, Tx
from memfs.server.memory_stores.sql.base import SqlBase
from memfs.server.memory_stores.sql.rows import (
    MEMORY_BASIC,
    MEMORY_FULL,
    content_columns,
    loaded_content,
    memory_from_row,
)
from memfs.server.memory_stores.storage import ListItem, MemoryPosition, Slice
from memfs.server.search import DocumentKind, SearchDocument

log = logging.getLogger(__name__)

MEMORY_STORES: DocumentKind = "memory_stores"  # the search index's kind for memories


def _upper_bound(prefix: str) -> str:
    """The smallest string above every string that starts with ``prefix`` (which ends in /)."""
    return prefix[:-1] + "0"  # '0' is '/' + 1


def _precondition_failed(memory_id: str, current: Row, expected: str, tail: str = "") -> Exception:
    return PreconditionFailedError(
        f"precondition failed: memory {memory_id!r} has content_sha256 "
        f"{current['content_sha256']}, not {expected}{tail}"
    )


class MemoryQueries(SqlBase):
    """The memory operations of ``SqlStorage``."""

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
                (
                    memory_id,
                    store_id,
                    path,
                    *content_columns(content, tx.dialect),
                    version_id,
                    now,
                    now,
                ),
            )
            tx.execute(
                "UPDATE stores SET memory_count = memory_count + 1 WHERE id = ?", (store_id,)
            )
            self._index_memory(tx, store_id, memory_id, path, content)
            return memory_from_row(self._load_memory(tx, store_id, memory_id), tx.dialect)

        await self._warm_search("", content)
        return await self._write(run)

    def _index_memory(self, tx: Tx, store_id: str, memory_id: str, path: str, content: str) -> None:
        """Index a memory's current path and content (in the transaction that wrote them)."""
        self.search.index(tx, SearchDocument(MEMORY_STORES, store_id, memory_id, path, content))

    async def get_memory(self, store_id: str, memory_id: str) -> Memory:
        def run(tx: Tx) -> Memory:
            self._load_store(tx, store_id)
            return memory_from_row(self._load_memory(tx, store_id, memory_id), tx.dialect)

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
        columns = MEMORY_FULL if with_content else MEMORY_BASIC
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
                    items.append(memory_from_row(row, tx.dialect))
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
            current_content = loaded_content(current["content"], tx.dialect)
            new_content = current_content if content is None else content
            new_path = current["path"] if path is None else path
            unchanged = new_content == current_content and new_path == current["path"]
            if expected_sha256 is not None and expected_sha256 != current["content_sha256"]:
                if unchanged:  # the requested state is already there: success, no version
                    return memory_from_row(current, tx.dialect)
                raise _precondition_failed(memory_id, current, expected_sha256)
            if unchanged:
                return memory_from_row(current, tx.dialect)
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
                (new_path, *content_columns(new_content, tx.dialect), version_id, now, memory_id),
            )
            self._index_memory(tx, store_id, memory_id, new_path, new_content)
            return memory_from_row(self._load_memory(tx, store_id, memory_id), tx.dialect)

        await self._warm_search("", content)
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
            self.search.remove(tx, MEMORY_STORES, store_id, memory_id)
            tx.execute(
                "UPDATE stores SET memory_count = memory_count - 1 WHERE id = ?", (store_id,)
            )

        await self._write(run)
