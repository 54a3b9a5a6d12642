"""What the search engine speaks: documents, scopes, hits, the transaction it writes in, and
the validation of a query (see the package docstring for how callers use them)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol

from memfs.contract.errors import BadRequestError
from memfs.server.http.body import text_field

log = logging.getLogger(__name__)

DocumentKind = Literal["memory_stores", "databricks"]

MAX_QUERY_CHARS = 4096  # longer queries are refused: a query is a few words, not a document


class _Dialect(Protocol):
    @property
    def name(self) -> str: ...


class Tx(Protocol):
    """What the index uses of ``memfs.server.db.transaction.Tx`` (one transaction, ``?``
    placeholders): structural, so the index asks of a transaction only these two."""

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

    def __post_init__(self) -> None:
        # NUL is never part of a word, and PostgreSQL's text cannot hold it: the index (both
        # backends alike) reads a content's NULs as spaces.
        if "\0" in self.content:
            object.__setattr__(self, "content", self.content.replace("\0", " "))


@dataclass(frozen=True)
class SearchScope:
    """Which documents a search considers (the rule is in the package docstring)."""

    kind: DocumentKind
    store_id: str
    actor_id: str | None = None
    session_id: str | None = None
    path_prefix: str | None = None
    # only the documents without a session (``session_id`` must be None): what a session-less
    # Databricks mount shows
    session_less: bool = False


class SearchHit(NamedTuple):
    doc_id: str
    score: float  # higher = more relevant; comparable only within one answer


def validate_query(query: object) -> str:
    """A search query from a request body, or ``BadRequestError`` (not a string, not valid
    Unicode, blank, too long)."""
    text_field(query, "query")
    assert isinstance(query, str)
    if not query.strip():
        raise BadRequestError("query: must not be empty")
    if len(query) > MAX_QUERY_CHARS:
        raise BadRequestError(f"query: at most {MAX_QUERY_CHARS} characters")
    return query
