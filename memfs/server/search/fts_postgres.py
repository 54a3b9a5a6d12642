"""The search index on PostgreSQL: ``search_docs`` holds each document's identity, scope, text,
``tsvector`` (``search_tsvector()`` of the schema: description A, path words B, content C),
token count and embedding; a GIN index on the ``tsvector`` finds the matches.

PostgreSQL has no BM25 (``ts_rank`` has no inverse document frequency), so the score is
computed here in SQL with FTS5's formula: for each query lexeme, IDF = max(ln((N - n + 0.5) /
(n + 0.5)), 1e-6) times f·(k1 + 1) / (f + k1·(1 - b + b·|D| / avgdl)), k1 = 0.9, b = 0.4,
where f is the lexeme's occurrences weighted per column (``COLUMN_WEIGHTS``, as on SQLite) and
|D| the document's token count. N, n and avgdl are counted over the *scope*, as on SQLite, so a
score never depends on another store, actor, session or API. Differences from SQLite
(docs/server.md): the ``english`` configuration drops stop
words and keeps URLs, e-mail addresses and numbers like ``3.14`` as single tokens; diacritics
are folded for Latin letters only; a ``tsvector`` keeps at most 256 positions of one lexeme and
none past 16,383, so f and |D| saturate in very long documents.
"""

from __future__ import annotations

import logging
from typing import Any

from memfs.server.db.schema import PG_TS_CONFIG
from memfs.server.search.document import DocumentKind, SearchDocument, SearchScope, Tx
from memfs.server.search.fts_base import FtsBase, doc_where
from memfs.server.search.fts_sqlite import COLUMN_WEIGHTS
from memfs.server.search.terms import scope_sql

log = logging.getLogger(__name__)

K1, B = 0.9, 0.4  # Anserini's defaults: better than FTS5's 1.2, 0.75 on short memories (LoCoMo)
_DESCRIPTION, _PATH, _CONTENT = COLUMN_WEIGHTS


def _tsquery(lexemes: list[str]) -> str:
    """A tsquery matching any of ``lexemes``, each a quoted literal (no operator survives)."""
    return " | ".join("'" + lex.replace("\\", "\\\\").replace("'", "''") + "'" for lex in lexemes)


class PostgresFts(FtsBase):
    """The PostgreSQL half of ``SearchIndex`` (same methods as ``SqliteFts``)."""

    _UNEMBEDDED_SQL = (
        "SELECT kind, store_id, doc_id, description, path, content FROM search_docs "
        "WHERE embedding_model IS NULL OR embedding_model <> ? LIMIT ?"
    )
    _CONTENT_FROM = "search_docs d"
    _CONTENT_COLUMN = "d.content"

    def index(
        self, tx: Tx, doc: SearchDocument, embedding: bytes | None, model: str | None
    ) -> None:
        tx.execute(
            "INSERT INTO search_docs (kind, store_id, doc_id, path, actor_id, session_id, "
            "description, content, tsv, doc_len, embedding, embedding_model) "
            "SELECT ?, ?, ?, ?, ?, ?, ?, ?, v.tsv, "
            "(SELECT coalesce(sum(cardinality(u.positions)), 0) FROM unnest(v.tsv) u), ?, ? "
            "FROM (SELECT search_tsvector(?, ?, ?) AS tsv) v "
            "ON CONFLICT (kind, store_id, doc_id) DO UPDATE SET path = excluded.path, "
            "actor_id = excluded.actor_id, session_id = excluded.session_id, "
            "description = excluded.description, content = excluded.content, "
            "tsv = excluded.tsv, doc_len = excluded.doc_len, embedding = excluded.embedding, "
            "embedding_model = excluded.embedding_model",
            (
                doc.kind,
                doc.store_id,
                doc.doc_id,
                doc.path,
                doc.actor_id,
                doc.session_id,
                doc.description,
                doc.content,
                embedding,
                model,
                doc.description,
                doc.path,
                doc.content,
            ),
        )

    def remove(self, tx: Tx, kind: DocumentKind, store_id: str, doc_id: str | None) -> None:
        where, params = doc_where(kind, store_id, doc_id)
        tx.execute(f"DELETE FROM search_docs WHERE {where}", params)

    def bm25(self, tx: Tx, scope: SearchScope, terms: list[str], limit: int) -> list[Any]:
        lexemes = [
            row["lexeme"]
            for row in tx.execute(
                "SELECT DISTINCT lexeme FROM "
                f"unnest(to_tsvector('{PG_TS_CONFIG}', search_fold(?)))",
                (" ".join(terms),),
            ).fetchall()
        ]
        if not lexemes:  # only stop words
            return []
        where, params = scope_sql(scope, "d")
        tf = (
            f"{_DESCRIPTION} * cardinality(array_positions(u.weights, 'A')) + "
            f"{_PATH} * cardinality(array_positions(u.weights, 'B')) + "
            f"{_CONTENT} * cardinality(array_positions(u.weights, 'C'))"
        )
        rows = tx.execute(
            "WITH stats AS (SELECT count(*)::float8 AS n, "
            "greatest(coalesce(avg(d.doc_len), 0), 1)::float8 AS avgdl "
            f"FROM search_docs d WHERE {where}), "
            f"hits AS (SELECT d.doc_id, d.doc_len, u.lexeme, ({tf})::float8 AS tf "
            "FROM search_docs d CROSS JOIN LATERAL unnest(d.tsv) u "
            f"WHERE {where} AND d.tsv @@ ?::tsquery AND u.lexeme = ANY(?::text[])), "
            "df AS (SELECT lexeme, count(*)::float8 AS n FROM hits GROUP BY lexeme) "
            "SELECT h.doc_id, sum(greatest(ln((s.n - df.n + 0.5) / (df.n + 0.5)), 1e-6) "
            f"* h.tf * {K1 + 1} / (h.tf + {K1} * (1 - {B} + {B} * h.doc_len / s.avgdl))) AS score "
            "FROM hits h JOIN df USING (lexeme) CROSS JOIN stats s "
            "GROUP BY h.doc_id ORDER BY score DESC, h.doc_id LIMIT ?",
            (*params, *params, _tsquery(lexemes), lexemes, limit),
        ).fetchall()
        return [(row["doc_id"], float(row["score"])) for row in rows]
