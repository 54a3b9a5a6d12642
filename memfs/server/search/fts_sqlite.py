"""The search index on SQLite: ``search_docs`` (one row per document: its identity, scope, token
count and embedding) and the FTS5 table ``search_text`` (description, path, content) sharing its
rowid; ``search_terms`` (an ``fts5vocab`` ``instance`` table) lists every token occurrence.

Ranking is BM25 with FTS5's own formula (k1 = 0.9, b = 0.4 as Anserini's, the column weights of
``COLUMN_WEIGHTS``; written out in ``fts_postgres``), computed in SQL over the *scope* only: the
document count, average length and how many documents hold a word are counted among the scope's
documents, so a score never depends on another store, actor, session or API (FTS5's ``bm25()``
counts over the whole table: a score in one store told whether a word existed in another). A
search reads each query token's occurrences from ``search_terms`` (one posting list per token,
as a MATCH does), keeps those of the scope's documents and aggregates them; |D| is the document's
token count over its three columns, kept in ``search_docs.doc_len`` (read from FTS5's
``search_text_docsize`` when the document is written). Every write also keeps the document count
and token total of each (kind, store, actor, session) in ``search_scope_stats``, where a search
without a path prefix reads its N and average length (with one: from the scope's documents).

A query's words become FTS5 tokens by FTS5's own tokenizer (``QueryTokens``: stemmed, folded;
"api_key" is the two tokens "api" and "key", as on PostgreSQL), and a document matches when it
holds any of them.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from typing import Any

from memfs.server.db.schema import SQLITE_TOKENIZER
from memfs.server.search.document import DocumentKind, SearchDocument, SearchScope, Tx
from memfs.server.search.fts_base import FtsBase, doc_where
from memfs.server.search.terms import content_terms, scope_sql

log = logging.getLogger(__name__)

# BM25 weights of (description, path, content): a description is a curated summary, so a
# word there counts twice; a path word counts like a content word.
COLUMN_WEIGHTS = (2.0, 1.0, 1.0)
K1, B = 0.9, 0.4  # Anserini's defaults: better than FTS5's 1.2, 0.75 on short memories (LoCoMo)
_WEIGHT_OF_COLUMN = (
    f"CASE v.col WHEN 'description' THEN {COLUMN_WEIGHTS[0]} "
    f"WHEN 'path' THEN {COLUMN_WEIGHTS[1]} ELSE {COLUMN_WEIGHTS[2]} END"
)


def varints(blob: bytes) -> list[int]:
    """The integers of SQLite's varint encoding (big-endian groups of 7 bits, the high bit set on
    all but the last byte; a 9th byte holds 8 bits): how FTS5's ``_docsize`` rows store the
    token count of each column."""
    values: list[int] = []
    i = 0
    while i < len(blob):
        value = 0
        for n in range(9):
            byte = blob[i]
            i += 1
            if n == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if byte < 0x80:
                break
        values.append(value)
    return values


def _scope_of(doc: SearchDocument) -> dict[str, Any]:
    return {
        "kind": doc.kind,
        "store_id": doc.store_id,
        "actor_id": doc.actor_id,
        "session_id": doc.session_id,
    }


def _count(tx: Tx, scope: Any, docs: int, tokens: int) -> None:
    """Add ``docs`` documents of ``tokens`` tokens (negative: remove) to the counts of the
    scope of ``scope`` (a row or mapping with kind, store_id, actor_id and session_id)."""
    tx.execute(
        "INSERT INTO search_scope_stats (kind, store_id, actor_id, session_key, docs, tokens) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (kind, store_id, actor_id, session_key) "
        "DO UPDATE SET docs = docs + excluded.docs, tokens = tokens + excluded.tokens",
        (
            scope["kind"],
            scope["store_id"],
            scope["actor_id"],
            scope["session_id"] or "",
            docs,
            tokens,
        ),
    )


def _stats_sql(scope: SearchScope, where: str, params: list[Any]) -> tuple[str, list[Any]]:
    """A SELECT of the scope's document count ``n`` and average length ``avgdl`` (at least 1):
    from the kept counts (``search_scope_stats``), or, for a path prefix, which they do not
    break down, from the scope's documents (``where``/``params``: ``scope_sql`` as ``d``)."""
    if scope.path_prefix:
        return (
            "SELECT count(*) AS n, max(coalesce(avg(d.doc_len), 0), 1) AS avgdl "
            f"FROM search_docs d WHERE {where}",
            params,
        )
    clauses = ["kind = ?", "store_id = ?"]
    values: list[Any] = [scope.kind, scope.store_id]
    if scope.actor_id is not None:
        clauses.append("actor_id = ?")
        values.append(scope.actor_id)
    if scope.session_id is not None or scope.session_less:
        clauses.append("session_key = ?")
        values.append(scope.session_id or "")
    return (
        "SELECT coalesce(sum(docs), 0) AS n, "
        "max(coalesce(1.0 * sum(tokens) / sum(docs), 0), 1) AS avgdl "
        f"FROM search_scope_stats WHERE {' AND '.join(clauses)}",
        values,
    )


class QueryTokens:
    """The FTS5 tokens of a query's words, by the index's own tokenizer (a private in-memory
    FTS5 table: the tokenizer has no SQL function of its own). Thread-safe: transactions run in
    worker threads, one tokenization at a time (it takes microseconds)."""

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._db.execute(f"CREATE VIRTUAL TABLE t USING fts5 (x, tokenize = '{SQLITE_TOKENIZER}')")
        self._db.execute("CREATE VIRTUAL TABLE v USING fts5vocab (t, 'row')")
        self._lock = threading.Lock()

    def __call__(self, words: list[str]) -> list[str]:
        with self._lock:
            self._db.execute("INSERT INTO t (rowid, x) VALUES (1, ?)", (" ".join(words),))
            try:
                return [row[0] for row in self._db.execute("SELECT term FROM v ORDER BY term")]
            finally:
                self._db.execute("DELETE FROM t")


class SqliteFts(FtsBase):
    """The SQLite half of ``SearchIndex`` (same methods, run inside the caller's ``Tx``)."""

    _UNEMBEDDED_SQL = (
        "SELECT d.kind, d.store_id, d.doc_id, t.description, t.path, t.content "
        "FROM search_docs d JOIN search_text t ON t.rowid = d.id "
        "WHERE d.embedding_model IS NULL OR d.embedding_model <> ? LIMIT ?"
    )
    _CONTENT_FROM = "search_docs d JOIN search_text t ON t.rowid = d.id"
    _CONTENT_COLUMN = "t.content"

    def __init__(self) -> None:
        self._tokens = QueryTokens()

    def index(
        self, tx: Tx, doc: SearchDocument, embedding: bytes | None, model: str | None
    ) -> None:
        row = tx.execute(
            "SELECT id, kind, store_id, actor_id, session_id, doc_len FROM search_docs "
            "WHERE kind = ? AND store_id = ? AND doc_id = ?",
            (doc.kind, doc.store_id, doc.doc_id),
        ).fetchone()
        if row is not None:
            _count(tx, row, -1, -int(row["doc_len"]))
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
        else:
            rowid = row["id"]
            tx.execute(
                "UPDATE search_docs SET path = ?, actor_id = ?, session_id = ?, embedding = ?, "
                "embedding_model = ? WHERE id = ?",
                (*scope, rowid),
            )
            tx.execute(
                "UPDATE search_text SET description = ?, path = ?, content = ? WHERE rowid = ?",
                (*text, rowid),
            )
        # |D| of BM25: the tokens FTS5 counted in the three columns (written with the text)
        size = tx.execute("SELECT sz FROM search_text_docsize WHERE id = ?", (rowid,)).fetchone()
        length = sum(varints(bytes(size["sz"]))) if size is not None else 0
        tx.execute("UPDATE search_docs SET doc_len = ? WHERE id = ?", (length, rowid))
        _count(tx, _scope_of(doc), 1, length)

    def remove(self, tx: Tx, kind: DocumentKind, store_id: str, doc_id: str | None) -> None:
        """Forget one document, or (``doc_id`` None) every document of the store."""
        where, params = doc_where(kind, store_id, doc_id)
        if doc_id is None:
            tx.execute(
                "DELETE FROM search_scope_stats WHERE kind = ? AND store_id = ?", (kind, store_id)
            )
        else:
            for row in tx.execute(
                f"SELECT kind, store_id, actor_id, session_id, doc_len FROM search_docs "
                f"WHERE {where}",
                params,
            ).fetchall():
                _count(tx, row, -1, -int(row["doc_len"]))
        tx.execute(
            f"DELETE FROM search_text WHERE rowid IN (SELECT id FROM search_docs WHERE {where})",
            params,
        )
        tx.execute(f"DELETE FROM search_docs WHERE {where}", params)

    def bm25(self, tx: Tx, scope: SearchScope, terms: list[str], limit: int) -> list[Any]:
        """(doc_id, score) rows of the best ``limit`` matches of any of ``terms``, best first,
        every statistic counted within ``scope`` (module docstring)."""
        tokens = self._tokens(content_terms(terms))
        if not tokens:
            return []
        where, params = scope_sql(scope, "d")
        stats, stats_params = _stats_sql(scope, where, params)
        marks = ", ".join("?" for _ in tokens)
        rows = tx.execute(
            f"WITH stats AS ({stats}), "
            "hits AS MATERIALIZED (SELECT d.doc_id, d.doc_len, v.term, "
            f"sum({_WEIGHT_OF_COLUMN}) AS tf FROM search_terms v "
            f"JOIN search_docs d ON d.id = v.doc WHERE v.term IN ({marks}) AND {where} "
            "GROUP BY d.id, v.term), "
            "df AS (SELECT term, count(*) AS n FROM hits GROUP BY term) "
            "SELECT h.doc_id, sum(max(ln((s.n - df.n + 0.5) / (df.n + 0.5)), 1e-6) "
            f"* h.tf * {K1 + 1} / (h.tf + {K1} * (1 - {B} + {B} * h.doc_len / s.avgdl))) "
            "AS score FROM hits h JOIN df USING (term) CROSS JOIN stats s "
            "GROUP BY h.doc_id ORDER BY score DESC, h.doc_id LIMIT ?",
            (*stats_params, *tokens, *params, limit),
        ).fetchall()
        return [(row["doc_id"], float(row["score"])) for row in rows]
