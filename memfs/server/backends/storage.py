"""The database of the reference server: ``Storage``, what every surface is given.

``Storage`` is the Memory Stores API's storage (``MemoryStoresStorage``) with the Databricks
API's beside it (``databricks``, in the same database), the transactions both run in
(``_read``/``_write``: every backend is SQL, and the console's own queries,
``memfs.server.console.sql``, run in them too), and its lifecycle (``ping``, ``aclose``).
``SqlStorage`` puts the two APIs' SQL together on one backend; ``sqlite`` and ``postgres``
subclass it with their connections (``memory_stores.sql.base`` says what a backend provides).

This module joins the APIs: it must hold no rule of either (those are ``memory_stores.sql`` and
``databricks.sql``).
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from memfs.contract.databricks_limits import MAX_ENTRIES_PER_STORE
from memfs.server.databricks.sql import SqlDatabricks
from memfs.server.databricks.storage import DatabricksStorage
from memfs.server.db.clock import utc_now
from memfs.server.db.transaction import Tx
from memfs.server.memory_stores.sql import SqlMemoryStores
from memfs.server.memory_stores.storage import MAX_MEMORIES_PER_STORE, MemoryStoresStorage
from memfs.server.search import SearchIndex

log = logging.getLogger(__name__)

R = TypeVar("R")


class Storage(MemoryStoresStorage):
    """The Memory Stores and Databricks APIs' storage in one database (see the module doc)."""

    max_memories: int  # a Memory Stores store's limit (the console shows it)

    @property
    @abc.abstractmethod
    def databricks(self) -> DatabricksStorage:
        """The Databricks Agent Memory stores and entries, kept in the same database."""

    @abc.abstractmethod
    async def _read(self, fn: Callable[[Tx], R]) -> R:
        """Run ``fn`` in one read-only transaction (one snapshot) in a worker thread."""

    @abc.abstractmethod
    async def _write(self, fn: Callable[[Tx], R]) -> R:
        """Run ``fn`` in one transaction in a worker thread; commit, or roll back on error."""

    @abc.abstractmethod
    async def ping(self) -> None:
        """Raise if the storage cannot answer (used by /healthz)."""

    @abc.abstractmethod
    async def aclose(self) -> None: ...


class SqlStorage(SqlMemoryStores, Storage):
    """``Storage`` on a SQL database; a backend subclass runs the transactions."""

    def __init__(
        self,
        *,
        clock: Callable[[], datetime] = utc_now,
        max_memories: int = MAX_MEMORIES_PER_STORE,
        max_dbx_entries: int = MAX_ENTRIES_PER_STORE,
        search: SearchIndex | None = None,
    ) -> None:
        super().__init__(clock=clock, max_memories=max_memories, search=search)
        self._databricks = SqlDatabricks(self, max_entries=max_dbx_entries)

    @property
    def databricks(self) -> DatabricksStorage:
        return self._databricks

    def _retain_more(self, tx: Tx, cutoff_us: int) -> None:
        self._databricks.prune_changes(tx, cutoff_us)  # the same retention for its change log

    async def ping(self) -> None:
        await self._read(lambda tx: tx.execute("SELECT 1").fetchone())
