"""Full-text (and optionally semantic) search over the reference server's documents.

One engine for both store APIs: Memory Stores memories (``kind="memory_stores"``) and Databricks
Agent Memory entries (``kind="databricks"``). The index lives in the same database as the
documents (migration step 3 of ``memfs.server.db.schema``) and is written *inside the caller's
write transaction* (a ``memfs.server.db.transaction.Tx``), so a search that starts after a write
commits finds it, and a rolled-back write leaves no trace in the index.

How to use it (everything a caller needs):

- the storage holds one ``SearchIndex`` as ``self.search`` (``SqlBase``); call it from inside
  ``_write``/``_read`` transactions with the ``Tx`` you were given;
- after creating or changing a document: ``search.index(tx, SearchDocument(...))`` (replaces
  any previous text of the same ``(kind, store_id, doc_id)``: path, content, description,
  actor and session all come from the new document);
- optional, with ``memfs server --semantic``: before the write transaction, in a worker thread,
  ``search.warm(description, content)`` (``SqlBase._warm_search`` does it) so ``index`` finds
  the document's vector ready instead of running the model under the write lock;
- after deleting one: ``search.remove(tx, kind, store_id, doc_id)`` (no error if absent);
- after deleting a whole store: ``search.remove_store(tx, kind, store_id)``;
- to search: ``search.search(tx, SearchScope(...), query, limit)`` returns ``SearchHit``
  ``(doc_id, score)`` best first, higher score = more relevant, at most ``limit``. ``query`` is
  free text from the user: it can never cause an SQL or FTS syntax error (each word is quoted
  and the words are OR-ed); a query with no word in it (blank, only punctuation) finds nothing.
  Rejecting a blank query with 400 is the route's job (``validate_query``).

Scope rule (the Databricks contract's, used for both kinds): ``actor_id`` None = every actor
(Memory Stores documents have ``actor_id=""``); ``session_id`` given = that session's documents
only, session-less ones excluded; ``session_id`` None = the whole actor (with or without a
session), or with ``session_less`` its session-less documents only. ``path_prefix`` None = every
path; else a raw string prefix of ``path`` (callers that want whole segments pass a prefix ending
in ``/``).

Statistics rule: a score depends on the scope's documents only. BM25's document count, average
length and document frequencies are counted among the documents of the scope (the whole filter,
``path_prefix`` included), and semantic ranking compares the query with the scope's vectors
only, so no answer tells anything about another store, actor, session or API.

Modules: ``document`` (the types), ``index`` (``SearchIndex``, which dispatches on the
dialect), ``terms`` (free text to safe terms, the scope as SQL), ``fts_sqlite`` /
``fts_postgres`` (the BM25 of each database, on the SQL they share: ``fts_base``),
``semantic`` (optional embeddings fused by reciprocal rank). This package must not open
connections to the database or start transactions (the backends do; ``fts_sqlite`` keeps one
private in-memory SQLite connection as its query tokenizer) and must not know HTTP (the routes
do).
"""

from __future__ import annotations

import logging

from memfs.server.search.document import (
    DocumentKind,
    SearchDocument,
    SearchHit,
    SearchScope,
    validate_query,
)
from memfs.server.search.index import SearchIndex

log = logging.getLogger(__name__)

__all__ = [
    "DocumentKind",
    "SearchDocument",
    "SearchHit",
    "SearchIndex",
    "SearchScope",
    "validate_query",
]
