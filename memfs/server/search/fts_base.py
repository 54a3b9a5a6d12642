"""What the SQLite and PostgreSQL search indexes do alike: both keep each document's scope and
embedding in ``search_docs``, so reading and writing embeddings, and naming one document (or a
whole store) in a WHERE clause, is the same SQL on both. Only where the text lives differs
(SQLite: the FTS5 table ``search_text``; PostgreSQL: columns of ``search_docs``), which each
subclass says in ``_UNEMBEDDED_SQL``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from memfs.contract.search_context import WHITE_SPACE
from memfs.server.search.document import DocumentKind, SearchScope, Tx
from memfs.server.search.terms import scope_sql

log = logging.getLogger(__name__)


def doc_where(kind: DocumentKind, store_id: str, doc_id: str | None) -> tuple[str, tuple[str, ...]]:
    """The WHERE condition (and parameters) naming one document of ``search_docs``, or (``doc_id``
    None) every document of the store."""
    if doc_id is None:
        return "kind = ? AND store_id = ?", (kind, store_id)
    return "kind = ? AND store_id = ? AND doc_id = ?", (kind, store_id, doc_id)


class FtsBase:
    """The methods of ``SearchIndex``'s backends that are the same SQL on both databases."""

    # SELECT of (kind, store_id, doc_id, description, path, content) of documents whose
    # embedding_model is not the first parameter, at most the second parameter of them.
    _UNEMBEDDED_SQL: str
    # Where a document's content is read beside ``search_docs d`` (FROM clause), and as what.
    _CONTENT_FROM: str
    _CONTENT_COLUMN: str

    def vectors(self, tx: Tx, scope: SearchScope, model: str) -> list[Any]:
        """(doc_id, embedding) of the scope's documents embedded by ``model``."""
        where, params = scope_sql(scope, "d")
        rows = tx.execute(
            f"SELECT d.doc_id, d.embedding FROM search_docs d WHERE {where} "
            "AND d.embedding_model = ?",
            (*params, model),
        ).fetchall()
        return [(row["doc_id"], bytes(row["embedding"])) for row in rows]

    def paths(self, tx: Tx, scope: SearchScope, doc_ids: Sequence[str]) -> dict[str, str]:
        """doc_id -> path of the scope's documents among ``doc_ids``."""
        if not doc_ids:
            return {}
        where, params = scope_sql(scope, "d")
        marks = ", ".join("?" for _ in doc_ids)
        rows = tx.execute(
            f"SELECT d.doc_id, d.path FROM search_docs d WHERE {where} AND d.doc_id IN ({marks})",
            (*params, *doc_ids),
        ).fetchall()
        return {row["doc_id"]: row["path"] for row in rows}

    def folder_members(
        self, tx: Tx, scope: SearchScope, folders: Sequence[str]
    ) -> list[tuple[str, str]]:
        """(doc_id, path) of the scope's documents under any of ``folders`` (each ending in
        ``/``; deeper documents too: the caller keeps the direct ones)."""
        if not folders:
            return []
        where, params = scope_sql(scope, "d")
        under = " OR ".join("substr(d.path, 1, ?) = ?" for _ in folders)
        rows = tx.execute(
            f"SELECT d.doc_id, d.path FROM search_docs d WHERE {where} AND ({under})",
            (*params, *(value for folder in folders for value in (len(folder), folder))),
        ).fetchall()
        return [(row["doc_id"], row["path"]) for row in rows]

    def texts(
        self, tx: Tx, scope: SearchScope, doc_ids: Sequence[str], chars: int
    ) -> dict[str, str]:
        """doc_id -> the first ``chars`` characters of the content of the scope's documents
        among ``doc_ids``."""
        if not doc_ids:
            return {}
        where, params = scope_sql(scope, "d")
        marks = ", ".join("?" for _ in doc_ids)
        rows = tx.execute(
            f"SELECT d.doc_id, substr({self._CONTENT_COLUMN}, 1, ?) AS content "
            f"FROM {self._CONTENT_FROM} WHERE {where} AND d.doc_id IN ({marks})",
            (chars, *params, *doc_ids),
        ).fetchall()
        return {row["doc_id"]: row["content"] for row in rows}

    def questions(self, tx: Tx, scope: SearchScope, doc_ids: Sequence[str]) -> set[str]:
        """The scope's documents among ``doc_ids`` whose content ends with a question (its last
        character but white space is ``?``: ``memfs.contract.search_context.asks``)."""
        if not doc_ids:
            return set()
        where, params = scope_sql(scope, "d")
        marks = ", ".join("?" for _ in doc_ids)
        rows = tx.execute(
            f"SELECT d.doc_id FROM {self._CONTENT_FROM} WHERE {where} "
            f"AND d.doc_id IN ({marks}) AND rtrim({self._CONTENT_COLUMN}, ?) LIKE ?",
            (*params, *doc_ids, WHITE_SPACE, "%?"),
        ).fetchall()
        return {row["doc_id"] for row in rows}

    def unembedded(self, tx: Tx, model: str, limit: int) -> list[Any]:
        """Up to ``limit`` documents not embedded by ``model``: (kind, store_id, doc_id, text)."""
        rows = tx.execute(self._UNEMBEDDED_SQL, (model, limit)).fetchall()
        return [
            (r["kind"], r["store_id"], r["doc_id"], (r["description"], r["path"], r["content"]))
            for r in rows
        ]

    def set_embedding(
        self, tx: Tx, kind: str, store_id: str, doc_id: str, embedding: bytes, model: str
    ) -> None:
        tx.execute(
            "UPDATE search_docs SET embedding = ?, embedding_model = ? "
            "WHERE kind = ? AND store_id = ? AND doc_id = ?",
            (embedding, model, kind, store_id, doc_id),
        )
