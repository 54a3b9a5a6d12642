"""The search engine's interface: documents, scopes, hits and ``SearchIndex`` (see the package
docstring for how callers use it). Dialect-specific SQL lives in ``fts_sqlite``/``fts_postgres``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol

from memfs.errors import BadRequestError

log = logging.getLogger(__name__)

DocumentKind = Literal["memory_stores", "databricks"]

MAX_QUERY_CHARS = 4096  # longer queries are refused: a query is a few words, not a document


class _Dialect(Protocol):
    @property
    def name(self) -> str: ...


class Tx(Protocol):
    """What the index uses of ``memfs.server.sql.Tx`` (one transaction, ``?`` placeholders).

    Structural, so this package need not import ``sql``, which imports it (``SqlBase.search``).
    """

    @property
    def dialect(self) -> _Dialect: ...

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Any: ...


@dataclass(frozen=True)
class SearchDocument:
    """One searchable document; ``(kind, store_id, doc_id)`` identifies it in the index."""

    kind: DocumentKind
    store_id: str
    doc_id: str  # memory id / entry id: what a hit returns
    path: str
    content: str
    description: str = ""
    actor_id: str = ""  # Memory Stores memories have no actor: ""
    session_id: str | None = None


@dataclass(frozen=True)
class SearchScope:
    """Which documents a search considers (the rule is in the package docstring)."""

    kind: DocumentKind
    store_id: str
    actor_id: str | None = None
    session_id: str | None = None
    path_prefix: str | None = None


class SearchHit(NamedTuple):
    doc_id: str
    score: float  # higher = more relevant; comparable only within one answer


def validate_query(query: object) -> str:
    """A search query from a request body, or ``BadRequestError`` (blank, not text, too long)."""
    if not isinstance(query, str):
        raise BadRequestError("query: must be a string")
    if not query.strip():
        raise BadRequestError("query: must not be empty")
    if len(query) > MAX_QUERY_CHARS:
        raise BadRequestError(f"query: at most {MAX_QUERY_CHARS} characters")
    return query


class SearchIndex:
    """BM25 full-text search (plus semantic ranking when built with an embedder), kept in the
    database beside the documents and written in the caller's transactions."""

    def index(self, tx: Tx, doc: SearchDocument) -> None:
        """Add ``doc`` or replace the indexed text of the same ``(kind, store_id, doc_id)``."""
        raise NotImplementedError

    def remove(self, tx: Tx, kind: DocumentKind, store_id: str, doc_id: str) -> None:
        """Forget one document (nothing happens if it is not indexed)."""
        raise NotImplementedError

    def remove_store(self, tx: Tx, kind: DocumentKind, store_id: str) -> None:
        """Forget every document of a store."""
        raise NotImplementedError

    def search(self, tx: Tx, scope: SearchScope, query: str, limit: int) -> list[SearchHit]:
        """The at most ``limit`` documents in ``scope`` best matching ``query``, best first."""
        raise NotImplementedError
