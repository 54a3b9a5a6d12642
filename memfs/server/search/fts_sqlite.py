"""The search index on SQLite: ``search_docs`` (one row per document: its identity, scope and
embedding) and the FTS5 table ``search_text`` (description, path, content) sharing its rowid.

Ranking is FTS5's own ``bm25()`` (k1 = 1.2, b = 0.75) with the column weights of
``COLUMN_WEIGHTS``. FTS5 computes its statistics (document count, average length, how many
documents hold a word) over the whole table, every store and both APIs, not over the scope:
scores depend a little on other stores' documents. The rows of the scope are filtered after the
MATCH, which reads each matching word's full posting list (fine at the reference server's scale).
"""

from __future__ import annotations

import logging
from typing import Any

from memfs.server.search.document import DocumentKind, SearchDocument, SearchScope, Tx
from memfs.server.search.fts_base import FtsBase, doc_where
from memfs.server.search.terms import fts5_match, scope_sql

log = logging.getLogger(__name__)

# bm25() weights of (description, path, content): a description is a curated summary, so a
# word there counts twice; a path word counts like a content word.
COLUMN_WEIGHTS = (2.0, 1.0, 1.0)


class SqliteFts(FtsBase):
    """The SQLite half of ``SearchIndex`` (same methods, run inside the caller's ``Tx``)."""

    _UNEMBEDDED_SQL = (
        "SELECT d.kind, d.store_id, d.doc_id, t.description, t.path, t.content "
        "FROM search_docs d JOIN search_text t ON t.rowid = d.id "
        "WHERE d.embedding_model IS NULL OR d.embedding_model <> ? LIMIT ?"
    )

    def index(
        self, tx: Tx, doc: SearchDocument, embedding: bytes | None, model: str | None
    ) -> None:
        row = tx.execute(
            "SELECT id FROM search_docs WHERE kind = ? AND store_id = ? AND doc_id = ?",
            (doc.kind, doc.store_id, doc.doc_id),
        ).fetchone()
        scope = (doc.path, doc.actor_id, doc.session_id, embedding, model)
        text = (doc.description, doc.path, doc.content)
        if row is None:
            rowid = tx.execute(
                "INSERT INTO search_docs (kind, store_id, doc_id, path, actor_id, session_id, "
                "embedding, embedding_model) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (doc.kind, doc.store_id, doc.doc_id, *scope),
            ).fetchone()["id"]
            tx.execute(
                "INSERT INTO search_text (rowid, description, path, content) VALUES (?, ?, ?, ?)",
                (rowid, *text),
            )
            return
        tx.execute(
            "UPDATE search_docs SET path = ?, actor_id = ?, session_id = ?, embedding = ?, "
            "embedding_model = ? WHERE id = ?",
            (*scope, row["id"]),
        )
        tx.execute(
            "UPDATE search_text SET description = ?, path = ?, content = ? WHERE rowid = ?",
            (*text, row["id"]),
        )

    def remove(self, tx: Tx, kind: DocumentKind, store_id: str, doc_id: str | None) -> None:
        """Forget one document, or (``doc_id`` None) every document of the store."""
        where, params = doc_where(kind, store_id, doc_id)
        tx.execute(
            f"DELETE FROM search_text WHERE rowid IN (SELECT id FROM search_docs WHERE {where})",
            params,
        )
        tx.execute(f"DELETE FROM search_docs WHERE {where}", params)

    def bm25(self, tx: Tx, scope: SearchScope, terms: list[str], limit: int) -> list[Any]:
        """(doc_id, score) rows of the best ``limit`` matches of any of ``terms``, best first."""
        where, params = scope_sql(scope, "d")
        weights = ", ".join(str(w) for w in COLUMN_WEIGHTS)
        rows = tx.execute(
            f"SELECT d.doc_id, -bm25(search_text, {weights}) AS score "
            "FROM search_text JOIN search_docs d ON d.id = search_text.rowid "
            f"WHERE search_text MATCH ? AND {where} ORDER BY score DESC, d.doc_id LIMIT ?",
            (fts5_match(terms), *params, limit),
        ).fetchall()
        return [(row["doc_id"], float(row["score"])) for row in rows]
