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
The ``CANDIDATES`` best by ``-bm25()`` are then read in context, as the server's are
(``memfs.contract.search_context``: each memory with its folder and its neighbours in a
numbered series, so a reply without the query's words follows the turn that has them, the more
when that turn asks). Scores are the context's: higher is better, comparable only within one
answer.

FTS5's ``bm25()`` has fixed parameters (k1 1.2, b 0.75) where the server's BM25 now uses
k1 0.9, b 0.4 (``memfs.server.search.fts_sqlite``): the two rank alike but not identically.

It must not talk to a store or know files and inodes. One index belongs to one trio thread.
"""

from __future__ import annotations

import logging
import sqlite3
import zlib
from dataclasses import dataclass

from memfs.contract import search_context
from memfs.contract.search_words import fts5_match, query_terms

log = logging.getLogger(__name__)

MAX_LIMIT = 100
# How many BM25 candidates are read in context (at least the answer's limit): the server's
# depth (memfs.server.search.index.CANDIDATES), enough to find the best memories' folders.
CANDIDATES = 200
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
        # asks: whether the content ends with a question (``search_context.asks``), known at
        # indexing so that ranking in context never decompresses the candidates
        self._db.execute(
            "CREATE TABLE doc (rowid INTEGER PRIMARY KEY, memory_id TEXT UNIQUE NOT NULL, "
            "sha TEXT NOT NULL, path TEXT NOT NULL, description TEXT NOT NULL, "
            "content BLOB NOT NULL, asks INTEGER NOT NULL)"
        )
        # the members of a folder, read for ranking in context (``_folder_members``)
        self._db.execute("CREATE INDEX doc_path ON doc (path, memory_id)")
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
            "INSERT INTO doc (memory_id, sha, path, description, content, asks) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                memory_id,
                sha,
                path,
                description,
                zlib.compress(content.encode("utf-8")),
                search_context.asks(content),
            ),
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
        paths starting with it (a plain string prefix, as the server's). BM25 ranks the
        candidates, then each is read in context (module docstring); a memory answered for its
        place next to a match holds none of the query's words."""
        expression = match_expression(query)
        if expression is None:
            return []
        limit = max(1, min(MAX_LIMIT, limit))
        # FTS5's bm25() cannot take k1 and b: it ranks with 1.2 and 0.75 (module docstring).
        sql = (
            "SELECT doc.memory_id, doc.path, "
            f"-bm25(fts, {', '.join(map(str, _WEIGHTS))}) AS score, doc.asks "
            "FROM fts JOIN doc ON doc.rowid = fts.rowid WHERE fts MATCH ?"
        )
        params: list[object] = [expression]
        if path_prefix:
            sql += " AND substr(doc.path, 1, ?) = ?"
            params += [len(path_prefix), path_prefix]
        sql += " ORDER BY score DESC, doc.path LIMIT ?"
        params.append(max(limit, CANDIDATES))
        rows = self._db.execute(sql, params).fetchall()
        if not rows:
            return []
        scores = {row[0]: float(row[2]) for row in rows}
        paths = {row[0]: row[1] for row in rows}
        members = self._folder_members(search_context.context_folders(scores, paths))
        if path_prefix:
            members = [(doc, path) for doc, path in members if path.startswith(path_prefix)]
        questions = {row[0] for row in rows if row[3]}
        ranked = search_context.in_context(scores, paths, members, questions)
        best = sorted(ranked.items(), key=lambda item: (-item[1], item[0]))[:limit]
        return self._hits(best)

    def _folder_members(self, folders: set[str]) -> list[tuple[str, str]]:
        """(memory id, path) of the documents directly in any of ``folders`` (each ending in
        ``/``). Each folder is a range of the path index: the paths from ``/a/`` up to ``/a0``
        (``0`` follows ``/``) are exactly those starting with ``/a/`` (SQLite compares text as
        UTF-8 bytes, in code point order), never a LIKE pattern (a user's path may hold ``%``)."""
        if not folders:
            return []
        one = (
            "SELECT memory_id, path FROM doc WHERE path >= ? AND path < ? "
            "AND instr(substr(path, ?), '/') = 0"
        )
        ordered = sorted(folders)
        params = [value for f in ordered for value in (f, f[:-1] + "0", len(f) + 1)]
        rows: list[tuple[str, str]] = self._db.execute(
            " UNION ALL ".join(one for _ in ordered), params
        ).fetchall()
        return rows

    def _hits(self, best: list[tuple[str, float]]) -> list[IndexHit]:
        """The answered documents, in ``best``'s order with its scores; their description and
        content are read only here, for the hits shown."""
        marks = ", ".join("?" for _ in best)
        rows = self._db.execute(
            f"SELECT memory_id, path, description, content FROM doc WHERE memory_id IN ({marks})",
            [doc for doc, _ in best],
        ).fetchall()
        by_id = {row[0]: row for row in rows}
        return [
            IndexHit(doc, by_id[doc][1], by_id[doc][2], _text(by_id[doc][3]), score)
            for doc, score in best
            if doc in by_id
        ]


def _text(compressed: bytes) -> str:
    return zlib.decompress(compressed).decode("utf-8")
