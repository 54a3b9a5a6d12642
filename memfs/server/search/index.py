"""``SearchIndex``: the one search engine of the reference server (see the package docstring).

It turns a search into the dialect's BM25 query (``fts_sqlite`` / ``fts_postgres``, picked by
``tx.dialect.name``) and, when built with an ``Embedder``, fuses that ranking with the cosine
ranking of the stored embeddings (``semantic``). Writes store an embedding only when an
embedder is present; otherwise they clear it, so a stale vector never outlives its text.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

from memfs.contract import search_context, search_dates
from memfs.server.search import semantic
from memfs.server.search.document import DocumentKind, SearchDocument, SearchHit, SearchScope, Tx
from memfs.server.search.fts_postgres import PostgresFts
from memfs.server.search.fts_sqlite import SqliteFts
from memfs.server.search.terms import query_terms

log = logging.getLogger(__name__)

VECTOR_CACHE = 256  # recently embedded documents kept (a rename re-indexes the same text)
# How many candidates each ranking contributes (at least the answer's limit): enough that the
# context (``memfs.contract.search_context``) finds the best memories' folders and neighbours.
CANDIDATES = 200

_BACKENDS: dict[str, SqliteFts | PostgresFts] = {
    "sqlite": SqliteFts(),
    "postgresql": PostgresFts(),
}


class SearchIndex:
    """BM25 full-text search (fused with semantic ranking when built with an ``embedder``),
    kept in the database beside the documents and written in the caller's transactions."""

    def __init__(self, embedder: semantic.Embedder | None = None) -> None:
        self.embedder = embedder
        # Recently embedded texts (see ``warm``); guarded by its lock (worker threads).
        self._vectors: OrderedDict[tuple[str, ...], bytes] = OrderedDict()
        self._vectors_lock = threading.Lock()

    @property
    def semantic(self) -> bool:
        return self.embedder is not None

    def index(self, tx: Tx, doc: SearchDocument) -> None:
        """Add ``doc`` or replace the indexed text of the same ``(kind, store_id, doc_id)``."""
        embedding = model = None
        if self.embedder is not None:
            embedding = self._embedding(semantic.document_chunks(doc.description, doc.content))
            model = self.embedder.name
        _BACKENDS[tx.dialect.name].index(tx, doc, embedding, model)

    def warm(self, description: str, content: str) -> None:
        """Optional, before a write transaction, in a worker thread: embed the text a document
        is about to get, so ``index`` inside the transaction finds its vector ready instead of
        holding the write lock while the model runs (~25-250 ms). No-op without a model."""
        if self.embedder is not None:
            self._embedding(semantic.document_chunks(description, content))

    def _embedding(self, chunks: tuple[str, ...]) -> bytes:
        assert self.embedder is not None
        with self._vectors_lock:
            if chunks in self._vectors:
                self._vectors.move_to_end(chunks)
                return self._vectors[chunks]
        blob = semantic.to_bytes(self.embedder.passages(chunks))
        with self._vectors_lock:
            self._vectors[chunks] = blob
            while len(self._vectors) > VECTOR_CACHE:
                self._vectors.popitem(last=False)
        return blob

    def remove(self, tx: Tx, kind: DocumentKind, store_id: str, doc_id: str) -> None:
        """Forget one document (nothing happens if it is not indexed)."""
        _BACKENDS[tx.dialect.name].remove(tx, kind, store_id, doc_id)

    def remove_store(self, tx: Tx, kind: DocumentKind, store_id: str) -> None:
        """Forget every document of a store."""
        _BACKENDS[tx.dialect.name].remove(tx, kind, store_id, None)

    def search(self, tx: Tx, scope: SearchScope, query: str, limit: int) -> list[SearchHit]:
        """The at most ``limit`` documents in ``scope`` best matching ``query``, best first:
        BM25 (fused with the embeddings' cosine when semantic), preferring the memories whose
        days meet the days the query names (``memfs.contract.search_dates``), then read in
        context (each document with its folder and its neighbours in a numbered series:
        ``memfs.contract.search_context``)."""
        backend = _BACKENDS[tx.dialect.name]
        terms = query_terms(query)
        depth = max(limit, CANDIDATES)
        lexical = backend.bm25(tx, scope, terms, depth) if terms else []
        if self.embedder is None:
            scores = dict(lexical)
        elif not query.strip():
            return []
        else:
            vectors = backend.vectors(tx, scope, self.embedder.name)
            meaning = semantic.cosine_scores(self.embedder.query(query), vectors, depth)
            scores = semantic.fuse(lexical, meaning)
        if not scores:
            return []
        window = search_dates.query_window(query)
        if window is not None:
            texts = backend.texts(tx, scope, search_dates.best_of(scores), search_dates.MAX_CHARS)
            scores = search_dates.dated(scores, texts, window)
        paths = backend.paths(tx, scope, list(scores))
        folders = search_context.context_folders(scores, paths)
        members = backend.folder_members(tx, scope, sorted(folders))
        near = [doc for doc, path in paths.items() if search_context.folder_of(path) in folders]
        questions = backend.questions(tx, scope, near)
        ranked = search_context.in_context(scores, paths, members, questions)
        best = sorted(ranked.items(), key=lambda item: (-item[1], item[0]))[:limit]
        return [SearchHit(doc_id, score) for doc_id, score in best]

    def backfill(self, tx: Tx, batch: int = 32) -> int:
        """Embed up to ``batch`` documents that lack this embedder's vector; how many were.
        Run in write transactions until it returns 0 (the server does at start-up)."""
        if self.embedder is None:
            return 0
        backend = _BACKENDS[tx.dialect.name]
        rows = backend.unembedded(tx, self.embedder.name, batch)
        if rows:
            chunks = [
                semantic.document_chunks(description, content)
                for *_, (description, _, content) in rows
            ]
            vectors = self.embedder.passages([chunk for each in chunks for chunk in each])
            start = 0
            for (kind, store_id, doc_id, _), each in zip(rows, chunks, strict=True):
                blob = semantic.to_bytes(vectors[start : start + len(each)])
                start += len(each)
                backend.set_embedding(tx, kind, store_id, doc_id, blob, self.embedder.name)
        return len(rows)
