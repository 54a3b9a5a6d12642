"""One SQL transaction as the shared SQL sees it: the driver surface, the dialect and ``Tx``.

``Tx`` wraps one transaction's connection and speaks the shared SQL, written with ``?``
placeholders: it rewrites them for the dialect (``%s`` for psycopg). So shared SQL must hold no
literal ``?`` or ``%``. ``Dialect`` is everything the shared SQL needs to know about a database.
``Row``, ``Cursor`` and ``Connection`` are the part of a DB-API driver this package uses (sqlite3
and psycopg both provide it).

This module must not open connections or start transactions: that is the backends' job.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

log = logging.getLogger(__name__)


class Row(Protocol):
    def __getitem__(self, key: str, /) -> Any: ...


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...

    def close(self) -> None: ...


class Connection(Protocol):
    def execute(self, sql: str, params: Sequence[Any], /) -> Any: ...


@dataclass(frozen=True)
class Dialect:
    """What the shared SQL needs to know about a database."""

    name: str  # "sqlite" or "postgresql": picks the dialect's own SQL where it must differ (search)
    placeholder: str  # "?" (sqlite3) or "%s" (psycopg)
    lock_clause: str  # appended to the SELECT of a store row that a mutation is about to guard
    # Rows one ``depth=1`` seek fetches at most (None: as many as the page wants). A driver that
    # reads a whole result at once wants a small batch, since a subdirectory ends the batch.
    rollup_batch: int | None
    # Whether a text column holds U+0000 as it is: SQLite's does, PostgreSQL's ``text`` cannot,
    # so there a content is stored escaped (``rows.stored_content``) and read back unescaped.
    holds_nul: bool


class Tx:
    """One transaction's connection, speaking the shared SQL (``?`` placeholders)."""

    __slots__ = ("announced", "conn", "dialect")

    def __init__(self, conn: Connection, dialect: Dialect) -> None:
        self.conn = conn
        self.dialect = dialect
        # The change topics this transaction announced (a backend that publishes them itself
        # does so once it has committed: never a change that was rolled back).
        self.announced: list[str] = []

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        if self.dialect.placeholder != "?":
            sql = sql.replace("?", self.dialect.placeholder)
        cursor: Cursor = self.conn.execute(sql, params)
        return cursor

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        row: Row | None = self.execute(sql, params).fetchone()
        return row
