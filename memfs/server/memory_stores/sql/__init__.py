"""The SQL core of the reference server: every ``Storage`` rule, once, for both SQL backends.

``SqlStorage`` implements each ``Storage`` operation as one function of a transaction (``Tx``):
the checks (existence, archived store, free path, the memory limit, content preconditions, the
head of a live memory) and the writes they guard, the no-op rules, version appending, redaction,
retention, the ``depth=1`` roll-up and the page positions. Its modules, by concern:

- ``base``: ``SqlBase``, what a backend subclass (``memfs.server.backends.sqlite``,
  ``memfs.server.backends.postgres``) must provide (``_read``/``_write`` transactions, ``dialect``,
  ``_announce``, ``_claim_pruning``: read its docstring before writing a backend), the checks
  every operation shares and ``_append_version``, the one writer of versions;
- ``stores``, ``memories``, ``versions``, ``search``: the operations on each
  (``StoreQueries``, ``MemoryQueries``, ``VersionQueries``, ``SearchQueries``), which
  ``SqlStorage`` combines (the search index itself is ``memfs.server.search``);
- ``transaction``: ``Tx`` (one transaction, rewriting ``?`` placeholders for the dialect),
  ``Dialect`` and the driver surface used;
- ``rows``: the columns read, rows to models, and times as integer microseconds since the
  epoch (``to_us`` / ``from_us``).

Shared SQL is written with ``?`` placeholders and must hold no literal ``?`` or ``%``: ``Tx``
rewrites the placeholders for the dialect. It uses only what both SQLite (3.15+: row values) and
PostgreSQL accept; text compares in byte order on both (``db.schema`` declares ``COLLATE "C"`` on
PostgreSQL).

This package must not open connections, start transactions or know a driver: that is the
backends' job. Nothing above the backends sees a row.
"""

from __future__ import annotations

import logging

from memfs.server.memory_stores.sql.memories import MemoryQueries
from memfs.server.memory_stores.sql.search import SearchQueries
from memfs.server.memory_stores.sql.stores import StoreQueries
from memfs.server.memory_stores.sql.versions import VersionQueries

log = logging.getLogger(__name__)


class SqlMemoryStores(StoreQueries, MemoryQueries, VersionQueries, SearchQueries):
    """``MemoryStoresStorage`` on a SQL database; a backend subclass runs the transactions (see
    ``base``)."""


__all__ = ["SqlMemoryStores"]
