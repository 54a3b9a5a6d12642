"""A full-text index of one store's memories, in memory: SQLite FTS5 ranked by BM25.

What a mount (or ``memfs search`` without a mount) searches when the server has no search of
its own (the hosted Memory Stores API): ``memfs.search.engine.LocalSearch`` fills and refreshes
it; this module only holds documents and ranks them. SQLite's FTS5 comes with the standard
library's ``sqlite3`` (no new dependency) and ranks with BM25 (``bm25()``), as the reference
server's engine does, with the same query rules (``match_expression``): every word of the
user's text is quoted and the words are OR-ed, so no input is ever an FTS syntax error, and a
text without a word (blank, punctuation only) finds nothing.

Documents are (memory id, path, description, content); a match in the description weighs twice
a match in the path or the content (the server's weights: a description is a curated summary).
Scores are ``-bm25()``: higher is better, comparable only within one answer.

It must not talk to a store or know files and inodes. One index belongs to one trio thread.
"""

from __future__ import annotations

import logging
import sqlite3
import zlib
from dataclasses import dataclass

from memfs.contract.search_words import fts5_match, query_terms

log = logging.getLogger(__name__)

MAX_LIMIT = 100
# weights of the columns path, description, content in bm25()
_WEIGHTS = (1.0, 2.0, 1.0)


def match_expression(query: str) -> str | None:
    """The FTS5 MATCH expression of ``query`` (``memfs.contract.search_words``: the server's rule);
    None without a word."""
    terms = query_terms(query)
    return fts5_match(terms) if terms else None


@dataclass(frozen=True)
class IndexHit:
    memory_id: str
    path: str
    description: str
    content: str
    score: float  # higher is better


class SearchIndex:
    """The documents of one store and their full-text index (module docstring).

    The full-text table is contentless (``content=''``: the inverted index only); each
    document's text is kept once, zlib-compressed, in ``doc`` (a third to a fifth of its size),
    and read back for the hits an answer shows. Removing a document from a contentless table
    takes the values it was indexed with (FTS5's ``'delete'`` command), read back from ``doc``.
    """

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:")
        self._db.execute(
            "CREATE TABLE doc (rowid INTEGER PRIMARY KEY, memory_id TEXT UNIQUE NOT NULL, "
            "sha TEXT NOT NULL, path TEXT NOT NULL, description TEXT NOT NULL, "
            "content BLOB NOT NULL)"
        )
        # porter: "searching" finds "search"; unicode61 folds case and diacritics
        self._db.execute(
            "CREATE VIRTUAL TABLE fts USING fts5(path, description, content, content='', "
            "tokenize = 'porter unicode61 remove_diacritics 2')"
        )

    def __len__(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM doc").fetchone()[0])

    @property
    def bytes(self) -> int:
        """The size of the in-memory database (documents and their full-text index)."""
        pages = self._db.execute("PRAGMA page_count").fetchone()[0]
        return int(pages) * int(self._db.execute("PRAGMA page_size").fetchone()[0])

    def shas(self) -> dict[str, str]:
        """memory id -> the sha256 of the content indexed for it."""
        return dict(self._db.execute("SELECT memory_id, sha FROM doc").fetchall())

    def path_of(self, memory_id: str) -> str | None:
        row = self._db.execute("SELECT path FROM doc WHERE memory_id = ?", (memory_id,)).fetchone()
        return None if row is None else str(row[0])

    def put(
        self, memory_id: str, path: str, content: str, *, sha: str, description: str = ""
    ) -> None:
        """Index (or re-index) a memory."""
        with self._db:
            self._remove(memory_id)
            self._insert(memory_id, path, description, content, sha=sha)

    def move(self, memory_id: str, path: str) -> None:
        """The memory is at ``path`` now (its content unchanged)."""
        row = self._db.execute(
            "SELECT sha, description, content FROM doc WHERE memory_id = ?", (memory_id,)
        ).fetchone()
        if row is None:
            return
        with self._db:
            self._remove(memory_id)
            self._insert(memory_id, path, row[1], _text(row[2]), sha=row[0])

    def remove(self, memory_id: str) -> None:
        with self._db:
            self._remove(memory_id)

    def clear(self) -> None:
        with self._db:
            self._db.execute("DELETE FROM doc")
            self._db.execute("INSERT INTO fts (fts) VALUES ('delete-all')")
        self._db.execute("VACUUM")  # give the pages back (an in-memory database keeps them)

    def _insert(
        self, memory_id: str, path: str, description: str, content: str, *, sha: str
    ) -> None:
        cursor = self._db.execute(
            "INSERT INTO doc (memory_id, sha, path, description, content) VALUES (?, ?, ?, ?, ?)",
            (memory_id, sha, path, description, zlib.compress(content.encode("utf-8"))),
        )
        self._db.execute(
            "INSERT INTO fts (rowid, path, description, content) VALUES (?, ?, ?, ?)",
            (cursor.lastrowid, path, description, content),
        )

    def _remove(self, memory_id: str) -> None:
        row = self._db.execute(
            "SELECT rowid, path, description, content FROM doc WHERE memory_id = ?", (memory_id,)
        ).fetchone()
        if row is not None:
            rowid, path, description, content = row
            self._db.execute(
                "INSERT INTO fts (fts, rowid, path, description, content) "
                "VALUES ('delete', ?, ?, ?, ?)",
                (rowid, path, description, _text(content)),
            )
            self._db.execute("DELETE FROM doc WHERE rowid = ?", (rowid,))

    def search(
        self, query: str, *, limit: int = 10, path_prefix: str | None = None
    ) -> list[IndexHit]:
        """The best ``limit`` (1-100) matches of ``query``, best first; ``path_prefix``: only
        paths starting with it (a plain string prefix, as the server's)."""
        expression = match_expression(query)
        if expression is None:
            return []
        limit = max(1, min(MAX_LIMIT, limit))
        sql = (
            "SELECT doc.memory_id, doc.path, doc.description, doc.content, "
            f"-bm25(fts, {', '.join(map(str, _WEIGHTS))}) AS score "
            "FROM fts JOIN doc ON doc.rowid = fts.rowid WHERE fts MATCH ?"
        )
        params: list[object] = [expression]
        if path_prefix:
            sql += " AND substr(doc.path, 1, ?) = ?"
            params += [len(path_prefix), path_prefix]
        sql += " ORDER BY score DESC, doc.path LIMIT ?"
        params.append(limit)
        rows = self._db.execute(sql, params).fetchall()
        return [IndexHit(row[0], row[1], row[2], _text(row[3]), float(row[4])) for row in rows]


def _text(compressed: bytes) -> str:
    return zlib.decompress(compressed).decode("utf-8")
