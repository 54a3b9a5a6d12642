"""Databricks Agent Memory in SQL: stores and entries in ``dbx_stores`` and ``dbx_entries``.

``SqlDatabricks`` implements ``DatabricksStorage`` on a SQL backend (``SqlBase``), whose
``_read``/``_write`` transactions it runs: the same database, connections and locking as the
Memory Stores tables. Each mutation of a store's entries first locks its ``dbx_stores`` row
(the dialect's ``lock_clause``; SQLite has one writer), so the free-key check, the entry count
and the write cannot race between requests or PostgreSQL replicas. Deleting a store deletes its
entries in the same transaction.

An entry's key is ``(actor_id, session_id, path)`` with ``session_id = ''`` for "no session":
unique per store by a table constraint as well as by the check here (which names the taken key).
Listings walk ``dbx_entries_by_path`` in (path, session, id) order; the page position is the
last entry's triple. Times are integer microseconds (``rows.to_us``); an update moves
``updated_us`` by at least 1 µs, so a client comparing ``update_time`` sees every change.

Search: every write of an entry (create, update, delete, store delete) updates the search index
(``memfs.server.search``, kind ``databricks``) in the same transaction, so a search that starts
after a write commits sees it; ``search_entries`` asks the index for the best ids in scope and
reads those entries in the same snapshot.

Change log: every write of an entry that changes something, and every store delete, appends one
``dbx_changes`` row in its transaction (``_record``), after the store's row lock, numbered by
the store's next ``ordinal`` (counted in ``dbx_stores.change_seq``): ordinals are 1, 2, 3… in
commit order within a store, so a stream's ids (the ordinals) reveal nothing of other stores'
writes, as the database-wide ``seq`` did. The transaction then announces the store's topic
(``_announce``: PostgreSQL ``NOTIFY``, delivered only on commit). A store delete drops the
store's older change rows and leaves one ``store_deleted`` row, which ends the streams of that
store (and of any later store under the same id that resumes before it); a store created again
under the id numbers on after that row and has its history after it (``change_bounds``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from memfs.contract.databricks_limits import MAX_ENTRIES_PER_STORE
from memfs.contract.errors import NotFoundError, PreconditionFailedError
from memfs.contract.models import sha256_hex
from memfs.server.databricks.storage import (
    AlreadyExistsError,
    ChangeBounds,
    ChangeKind,
    DatabricksStorage,
    DbxChange,
    DbxEntry,
    DbxStore,
    EntryFilter,
    EntryPatch,
    EntryPosition,
    NewEntry,
    Page,
    ResourceExhaustedError,
    SearchRequest,
    change_topic,
)
from memfs.server.db.clock import from_us
from memfs.server.db.transaction import Dialect, Row, Tx
from memfs.server.search import DocumentKind, SearchDocument, SearchIndex, SearchScope

log = logging.getLogger(__name__)

R = TypeVar("R")
# The columns an update may set (``EntryPatch`` names them; they go into the SQL text).
MUTABLE_FIELDS = ("content", "description")


class Backend(Protocol):
    """What ``SqlDatabricks`` uses of its ``SqlBase`` (see ``memory_stores.sql.base``)."""

    dialect: Dialect
    search: SearchIndex

    def _now_us(self) -> int: ...

    def _announce(self, tx: Tx, topic: str) -> None: ...

    async def _warm_search(self, description: str, content: str | None) -> None: ...

    async def _read(self, fn: Callable[[Tx], R]) -> R: ...

    async def _write(self, fn: Callable[[Tx], R]) -> R: ...


_STORE_COLUMNS = "id, description, creator, created_us, updated_us"
_ENTRY_TAIL = "description, source_type, created_us, updated_us"
_ENTRY_FULL = f"store_id, id, actor_id, session_id, path, content, {_ENTRY_TAIL}"
_ENTRY_BASIC = f"store_id, id, actor_id, session_id, path, NULL AS content, {_ENTRY_TAIL}"
KIND: DocumentKind = "databricks"  # the search index's name for these documents
_CHANGE_COLUMNS = (
    "ordinal, store_id, kind, entry_id, actor_id, session_id, path, update_us, content_sha256, "
    "content_size"
)


def _store(row: Row) -> DbxStore:
    return DbxStore(
        id=row["id"],
        description=row["description"],
        creator=row["creator"],
        create_time=from_us(row["created_us"]),
        update_time=from_us(row["updated_us"]),
    )


def _entry(row: Row) -> DbxEntry:
    return DbxEntry(
        store_id=row["store_id"],
        id=row["id"],
        actor_id=row["actor_id"],
        session_id=row["session_id"] or None,
        path=row["path"],
        content=row["content"],
        description=row["description"],
        source_type=row["source_type"],
        create_time=from_us(row["created_us"]),
        update_time=from_us(row["updated_us"]),
    )


def _check_content(row: Row, expected_sha256: str | None, field: str = "content") -> None:
    """The write's precondition on ``field`` (its SHA-256, ``""`` hashed when it is null),
    checked under the store's write lock (the API has none: the server's MCP tools and the
    console use it, so their compare-then-write leaves no window)."""
    if expected_sha256 is None:
        return
    actual = sha256_hex(row[field] or "")
    if actual != expected_sha256:
        raise PreconditionFailedError(
            f"entry {row['id']!r} changed since it was read ({field} SHA-256 {actual}, "
            f"not {expected_sha256})"
        )


def _change(row: Row) -> DbxChange:
    return DbxChange(
        ordinal=int(row["ordinal"]),
        store_id=row["store_id"],
        kind=row["kind"],
        entry_id=row["entry_id"],
        actor_id=row["actor_id"],
        session_id=row["session_id"] or None,
        path=row["path"],
        update_time=from_us(row["update_us"]),
        content_sha256=row["content_sha256"],
        content_size=row["content_size"],
    )


def _document(row: Row) -> SearchDocument:
    """An entry row (with content) as the search index's document."""
    return SearchDocument(
        KIND,
        row["store_id"],
        row["id"],
        row["path"],
        row["content"] or "",
        row["description"] or "",
        row["actor_id"],
        row["session_id"] or None,
    )


def _store_missing(store_id: str) -> NotFoundError:
    return NotFoundError(f"memory store 'memory-stores/{store_id}' does not exist")


def _key_text(actor_id: str, session_id: str, path: str) -> str:
    session = f"session {session_id!r}" if session_id else "no session"
    return f"actor {actor_id!r}, {session}, path {path!r}"


class SqlDatabricks(DatabricksStorage):
    """``DatabricksStorage`` on the transactions of one SQL backend (see the module doc)."""

    def __init__(self, backend: Backend, *, max_entries: int = MAX_ENTRIES_PER_STORE) -> None:
        self._backend = backend
        self.max_entries = max_entries

    def _now_us(self) -> int:
        return self._backend._now_us()

    def _lock(self) -> str:
        return self._backend.dialect.lock_clause

    def _load_store(self, tx: Tx, store_id: str, *, lock: bool = False) -> Row:
        sql = f"SELECT {_STORE_COLUMNS}, entry_count FROM dbx_stores WHERE id = ?"
        row = tx.one(sql + (self._lock() if lock else ""), (store_id,))
        if row is None:
            raise _store_missing(store_id)
        return row

    @staticmethod
    def _load_entry(tx: Tx, store_id: str, entry_id: str, *, with_content: bool = True) -> Row:
        columns = _ENTRY_FULL if with_content else _ENTRY_BASIC
        row = tx.one(
            f"SELECT {columns} FROM dbx_entries WHERE store_id = ? AND id = ?", (store_id, entry_id)
        )
        if row is None:
            raise NotFoundError(
                f"memory entry 'memory-stores/{store_id}/entries/{entry_id}' does not exist"
            )
        return row

    # -- stores ---------------------------------------------------------------------------------

    async def create_store(
        self, store_id: str, *, description: str | None, creator: str
    ) -> DbxStore:
        def run(tx: Tx) -> DbxStore:
            now = self._now_us()
            # ON CONFLICT: two replicas creating one id both get past any check made first.
            inserted = tx.execute(
                "INSERT INTO dbx_stores (id, description, creator, created_us, updated_us) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (store_id, description, creator, now, now),
            ).rowcount
            if inserted != 1:
                raise AlreadyExistsError(f"memory store 'memory-stores/{store_id}' already exists")
            return _store(self._load_store(tx, store_id))

        return await self._backend._write(run)

    async def get_store(self, store_id: str) -> DbxStore:
        return await self._backend._read(lambda tx: _store(self._load_store(tx, store_id)))

    async def list_stores(self, *, after: str | None, limit: int) -> Page[DbxStore, str]:
        def run(tx: Tx) -> Page[DbxStore, str]:
            rows = tx.execute(
                f"SELECT {_STORE_COLUMNS} FROM dbx_stores WHERE id > ? ORDER BY id LIMIT ?",
                (after or "", limit + 1),
            ).fetchall()
            stores = [_store(row) for row in rows[:limit]]
            return Page(stores, stores[-1].id if len(rows) > limit else None)

        return await self._backend._read(run)

    async def update_store(self, store_id: str, *, description: str | None) -> DbxStore:
        def run(tx: Tx) -> DbxStore:
            current = self._load_store(tx, store_id, lock=True)
            if current["description"] != description:
                tx.execute(
                    "UPDATE dbx_stores SET description = ?, updated_us = ? WHERE id = ?",
                    (description, self._next_us(current), store_id),
                )
            return _store(self._load_store(tx, store_id))

        return await self._backend._write(run)

    async def delete_store(self, store_id: str) -> None:
        def run(tx: Tx) -> None:
            self._load_store(tx, store_id, lock=True)
            self._backend.search.remove_store(tx, KIND, store_id)
            tx.execute("DELETE FROM dbx_entries WHERE store_id = ?", (store_id,))
            tx.execute("DELETE FROM dbx_changes WHERE store_id = ?", (store_id,))
            self._record(tx, "store_deleted", store_id, None, self._now_us())  # reads change_seq
            tx.execute("DELETE FROM dbx_stores WHERE id = ?", (store_id,))

        await self._backend._write(run)

    # -- entries --------------------------------------------------------------------------------

    async def create_entry(self, store_id: str, entry: NewEntry) -> DbxEntry:
        session = entry.session_id or ""
        await self._backend._warm_search(entry.description or "", entry.content or "")

        def run(tx: Tx) -> DbxEntry:
            store = self._load_store(tx, store_id, lock=True)
            entry_id = entry.entry_id or str(uuid.uuid4())
            taken = tx.one(
                "SELECT id FROM dbx_entries WHERE store_id = ? AND id = ?", (store_id, entry_id)
            )
            if taken is not None:
                raise AlreadyExistsError(
                    f"memory entry 'memory-stores/{store_id}/entries/{entry_id}' already exists"
                )
            taken = tx.one(
                "SELECT id FROM dbx_entries WHERE store_id = ? AND actor_id = ? "
                "AND session_id = ? AND path = ?",
                (store_id, entry.actor_id, session, entry.path),
            )
            if taken is not None:
                raise AlreadyExistsError(
                    f"an entry already exists for {_key_text(entry.actor_id, session, entry.path)}"
                    f": memory-stores/{store_id}/entries/{taken['id']}"
                )
            if int(store["entry_count"]) >= self.max_entries:
                raise ResourceExhaustedError(
                    f"memory store 'memory-stores/{store_id}' is full: it holds "
                    f"{self.max_entries} entries; delete some before creating more"
                )
            now = self._now_us()
            tx.execute(
                "INSERT INTO dbx_entries (store_id, id, actor_id, session_id, path, content, "
                "description, source_type, created_us, updated_us) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    store_id,
                    entry_id,
                    entry.actor_id,
                    session,
                    entry.path,
                    entry.content,
                    entry.description,
                    entry.source_type,
                    now,
                    now,
                ),
            )
            tx.execute(
                "UPDATE dbx_stores SET entry_count = entry_count + 1 WHERE id = ?", (store_id,)
            )
            row = self._load_entry(tx, store_id, entry_id)
            self._backend.search.index(tx, _document(row))
            self._record(tx, "created", store_id, row, int(row["updated_us"]))
            return _entry(row)

        return await self._backend._write(run)

    async def get_entry(self, store_id: str, entry_id: str, *, with_content: bool) -> DbxEntry:
        def run(tx: Tx) -> DbxEntry:
            self._load_store(tx, store_id)
            return _entry(self._load_entry(tx, store_id, entry_id, with_content=with_content))

        return await self._backend._read(run)

    async def list_entries(
        self,
        store_id: str,
        flt: EntryFilter,
        *,
        after: EntryPosition | None,
        limit: int,
        with_content: bool,
    ) -> Page[DbxEntry, EntryPosition]:
        clauses = ["store_id = ?", "actor_id = ?"]
        params: list[Any] = [store_id, flt.actor_id]
        if flt.path is not None:
            clauses.append("path = ?")
            params.append(flt.path)
        elif flt.session_id is not None:
            clauses.append("session_id = ?")
            params.append(flt.session_id)
        if flt.path_prefix is not None:
            clauses.append("path >= ? AND substr(path, 1, ?) = ?")
            params.extend([flt.path_prefix, len(flt.path_prefix), flt.path_prefix])
        if after is not None:
            clauses.append("(path, session_id, id) > (?, ?, ?)")
            params.extend([after.path, after.session_id, after.entry_id])
        columns = _ENTRY_FULL if with_content else _ENTRY_BASIC
        sql = (
            f"SELECT {columns} FROM dbx_entries WHERE {' AND '.join(clauses)} "
            "ORDER BY path, session_id, id LIMIT ?"
        )

        def run(tx: Tx) -> Page[DbxEntry, EntryPosition]:
            self._load_store(tx, store_id)
            rows = tx.execute(sql, (*params, limit + 1)).fetchall()
            entries = [_entry(row) for row in rows[:limit]]
            if len(rows) <= limit:
                return Page(entries, None)
            last = rows[limit - 1]
            return Page(entries, EntryPosition(last["path"], last["session_id"], last["id"]))

        return await self._backend._read(run)

    async def update_entry(
        self,
        store_id: str,
        entry_id: str,
        patch: EntryPatch,
        *,
        expected_sha256: str | None = None,
        expected_description_sha256: str | None = None,
    ) -> DbxEntry:
        if self._backend.search.semantic:
            # Embed the new text before the write lock; a race only costs a cache miss.
            current = await self.get_entry(store_id, entry_id, with_content=True)
            text = {"description": current.description, "content": current.content}
            text.update(patch.fields)
            await self._backend._warm_search(text["description"] or "", text["content"] or "")

        def run(tx: Tx) -> DbxEntry:
            self._load_store(tx, store_id, lock=True)
            current = self._load_entry(tx, store_id, entry_id)
            _check_content(current, expected_sha256)
            _check_content(current, expected_description_sha256, "description")
            if not set(patch.fields) <= set(MUTABLE_FIELDS):
                raise ValueError(f"only {MUTABLE_FIELDS} can change, not {sorted(patch.fields)}")
            changed = {k: v for k, v in patch.fields.items() if current[k] != v}
            if changed:
                assignments = ", ".join(f"{name} = ?" for name in changed)
                tx.execute(
                    f"UPDATE dbx_entries SET {assignments}, updated_us = ? "
                    "WHERE store_id = ? AND id = ?",
                    (*changed.values(), self._next_us(current), store_id, entry_id),
                )
            row = self._load_entry(tx, store_id, entry_id)
            if changed:
                self._backend.search.index(tx, _document(row))
                self._record(tx, "updated", store_id, row, int(row["updated_us"]))
            return _entry(row)

        return await self._backend._write(run)

    async def delete_entry(
        self, store_id: str, entry_id: str, *, expected_sha256: str | None = None
    ) -> None:
        def run(tx: Tx) -> None:
            self._load_store(tx, store_id, lock=True)
            gone = self._load_entry(
                tx, store_id, entry_id, with_content=expected_sha256 is not None
            )
            _check_content(gone, expected_sha256)
            tx.execute(
                "DELETE FROM dbx_entries WHERE store_id = ? AND id = ?", (store_id, entry_id)
            )
            self._record(tx, "deleted", store_id, gone, self._next_us(gone))
            self._backend.search.remove(tx, KIND, store_id, entry_id)
            tx.execute(
                "UPDATE dbx_stores SET entry_count = entry_count - 1 WHERE id = ?", (store_id,)
            )

        await self._backend._write(run)

    async def search_entries(
        self, store_id: str, request: SearchRequest, *, with_content: bool
    ) -> list[tuple[DbxEntry, float]]:
        scope = SearchScope(
            KIND,
            store_id,
            request.actor_id,
            request.session_id,
            request.path_prefix,
            session_less=request.session_less,
        )
        columns = _ENTRY_FULL if with_content else _ENTRY_BASIC

        def run(tx: Tx) -> list[tuple[DbxEntry, float]]:
            self._load_store(tx, store_id)
            hits = self._backend.search.search(tx, scope, request.query, request.limit)
            if not hits:
                return []
            marks = ", ".join("?" for _ in hits)
            rows = tx.execute(
                f"SELECT {columns} FROM dbx_entries WHERE store_id = ? AND id IN ({marks})",
                (store_id, *(hit.doc_id for hit in hits)),
            ).fetchall()
            by_id = {row["id"]: _entry(row) for row in rows}
            # The index and the table change in the same transactions: every hit has its row.
            return [(by_id[hit.doc_id], hit.score) for hit in hits if hit.doc_id in by_id]

        return await self._backend._read(run)

    # -- the change log ---------------------------------------------------------------------------

    async def list_changes(
        self, store_id: str, *, after: int, actor_id: str | None, limit: int
    ) -> list[DbxChange]:
        clauses = "store_id = ? AND ordinal > ?"
        params: list[Any] = [store_id, after]
        if actor_id is not None:
            clauses += " AND (actor_id = ? OR kind = 'store_deleted')"
            params.append(actor_id)
        sql = f"SELECT {_CHANGE_COLUMNS} FROM dbx_changes WHERE {clauses} ORDER BY ordinal LIMIT ?"

        def run(tx: Tx) -> list[DbxChange]:
            return [_change(row) for row in tx.execute(sql, (*params, limit)).fetchall()]

        return await self._backend._read(run)

    async def change_bounds(self, store_id: str) -> ChangeBounds:
        # One statement, so one snapshot on PostgreSQL too: a store deleted meanwhile is either
        # absent here or its deletion is after ``newest`` (a stream starting there sees it).
        sql = (
            "SELECT (SELECT 1 FROM dbx_stores WHERE id = ?) AS present, "
            "(SELECT MAX(ordinal) FROM dbx_changes WHERE store_id = ? AND kind = 'store_deleted') "
            "AS start, (SELECT MAX(ordinal) FROM dbx_changes WHERE store_id = ?) AS newest"
        )

        def run(tx: Tx) -> ChangeBounds:
            row = tx.one(sql, (store_id, store_id, store_id))
            if row is None or row["present"] is None:
                raise _store_missing(store_id)
            start = int(row["start"] or 0)
            return ChangeBounds(start, max(start, int(row["newest"] or 0)))

        return await self._backend._read(run)

    @staticmethod
    def prune_changes(tx: Tx, cutoff_us: int) -> None:
        """Retention (in the caller's transaction): drop changes made before ``cutoff_us``."""
        tx.execute("DELETE FROM dbx_changes WHERE update_us < ?", (cutoff_us,))

    def _record(
        self, tx: Tx, kind: ChangeKind, store_id: str, row: Row | None, update_us: int
    ) -> None:
        """Append the change ``kind`` of the entry ``row`` (None: the store) and announce it;
        inside the transaction of the change, after the store's lock and while its row exists
        (see the module doc)."""
        written = row is not None and kind in ("created", "updated")
        content = (row["content"] or "") if row is not None and written else None
        ordinal = self._next_ordinal(tx, store_id)
        tx.execute(
            "INSERT INTO dbx_changes (ordinal, store_id, kind, entry_id, actor_id, session_id, "
            "path, update_us, content_sha256, content_size) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                ordinal,
                store_id,
                kind,
                row["id"] if row is not None else "",
                row["actor_id"] if row is not None else "",
                row["session_id"] if row is not None else "",
                row["path"] if row is not None else "",
                update_us,
                None if content is None else sha256_hex(content),
                None if content is None else len(content.encode("utf-8")),
            ),
        )
        tx.execute("UPDATE dbx_stores SET change_seq = ? WHERE id = ?", (ordinal, store_id))
        self._backend._announce(tx, change_topic(store_id))

    @staticmethod
    def _next_ordinal(tx: Tx, store_id: str) -> int:
        """The (locked) store's next change ordinal: after its counter, and after any change
        logged under its id (a deleted store's ``store_deleted`` row: a store created again
        numbers on, so an old cursor still meets that row). The counter outlives retention,
        which may drop every logged change of an idle store."""
        row = tx.one(
            "SELECT (SELECT change_seq FROM dbx_stores WHERE id = ?) AS counted, "
            "(SELECT MAX(ordinal) FROM dbx_changes WHERE store_id = ?) AS logged",
            (store_id, store_id),
        )
        assert row is not None  # a SELECT of two subqueries has one row
        return max(int(row["counted"] or 0), int(row["logged"] or 0)) + 1

    # -- helpers ----------------------------------------------------------------------------------

    def _next_us(self, current: Row) -> int:
        """The new ``updated_us`` of a changed row: now, but always later than before."""
        return max(self._now_us(), int(current["updated_us"]) + 1)
