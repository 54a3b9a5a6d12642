"""The Memory Stores API's storage: every operation its routes, stream and MCP tools need.

``MemoryStoresStorage`` is the abstract class; ``memory_stores.sql`` implements every rule
once, for both SQL backends (``memfs.server.backends``). The HTTP layer
validates input (types, paths, sizes, limits of a page) and renders output; a backend owns the
state and enforces every rule that depends on it: existence, archived stores, path uniqueness,
the 2,000-memory limit, content preconditions, the head move, version sequencing and retention.
Each mutation is one transaction, so these checks cannot race.

Backends raise ``memfs.contract.errors`` ApiError subclasses (``NotFoundError``,
``StoreArchivedError``,
``StoreFullError``, ``PathConflictError``, ``PreconditionFailedError``, ``BadRequestError``);
the HTTP layer turns them into the error envelope (a database that cannot be reached is a 503:
``memfs.server.db.availability``). Nothing here knows about HTTP or SQL.

Invariants every backend keeps:
- a memory's ``memory_version_id`` is its newest version; a no-op update writes no version
  (nor does a failed precondition when the stored state already equals the requested one), and
  a no-op store update leaves ``updated_at`` alone;
- paths are unique within a store, and a store never holds more than its memory limit;
- versions of one store get a store-wide sequence (``seq``) that strictly increases in commit
  order, and ``created_at`` strictly increases with it (bumped by 1 µs when the clock did not
  move), so ``created_at[gte]`` feeds and cursors are reliable;
- the head of a live memory is never redacted, and retention never prunes the newest version
  of any memory (so never a live memory's head).
"""

from __future__ import annotations

import abc
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from memfs.contract.models import Actor, Memory, MemoryPrefix, MemoryStore, MemoryVersion, Operation

log = logging.getLogger(__name__)

MAX_MEMORIES_PER_STORE = 2000
MAX_METADATA_PAIRS = 16

T = TypeVar("T")
P = TypeVar("P")


@dataclass(frozen=True)
class Slice(Generic[T, P]):
    """Items of one page and the position after the last one (``None``: no more items)."""

    items: list[T]
    next: P | None


@dataclass(frozen=True)
class StorePosition:
    """Where a store listing (newest first) continues: strictly after this store."""

    created_at: datetime
    store_id: str


@dataclass(frozen=True)
class MemoryPosition:
    """Where a memory listing (byte order of paths) continues.

    The next item is the first path ``> key`` (after a memory) or ``>= key`` (after a rolled-up
    ``memory_prefix``, where ``key`` is the first path beyond that directory's range).
    """

    key: str
    inclusive: bool


@dataclass(frozen=True)
class StoreFilter:
    include_archived: bool = False
    created_gte: datetime | None = None
    created_lte: datetime | None = None


@dataclass(frozen=True)
class VersionFilter:
    memory_id: str | None = None
    operation: Operation | None = None
    session_id: str | None = None
    api_key_id: str | None = None
    service_account_id: str | None = None
    created_gte: datetime | None = None
    created_lte: datetime | None = None


@dataclass(frozen=True)
class MetadataPatch:
    """Changes to a store's metadata: a value sets a key, ``None`` deletes it."""

    changes: dict[str, str | None]


ListItem = Memory | MemoryPrefix


class MemoryStoresStorage(abc.ABC):
    """Async storage of stores, memories and versions. Every mutation is one transaction."""

    # -- stores ---------------------------------------------------------------------------------

    @abc.abstractmethod
    async def create_store(
        self, *, name: str, description: str, metadata: dict[str, str]
    ) -> MemoryStore: ...

    @abc.abstractmethod
    async def get_store(self, store_id: str) -> MemoryStore:
        """The store, or NotFoundError."""

    @abc.abstractmethod
    async def list_stores(
        self, flt: StoreFilter, *, after: StorePosition | None, limit: int
    ) -> Slice[MemoryStore, StorePosition]:
        """Stores newest first (``created_at`` then id, descending)."""

    @abc.abstractmethod
    async def update_store(
        self,
        store_id: str,
        *,
        name: str | None = None,
        description: str | None = None,
        metadata: MetadataPatch | None = None,
    ) -> MemoryStore:
        """Patch a store; StoreArchivedError if archived; BadRequestError past 16 pairs."""

    @abc.abstractmethod
    async def archive_store(self, store_id: str) -> MemoryStore:
        """Archive for ever; archiving an archived store returns it unchanged."""

    @abc.abstractmethod
    async def delete_store(self, store_id: str) -> None:
        """Delete the store with all its memories and versions (works when archived)."""

    # -- memories -------------------------------------------------------------------------------

    @abc.abstractmethod
    async def create_memory(
        self, store_id: str, *, path: str, content: str, actor: Actor
    ) -> Memory:
        """Create at a free path (PathConflictError otherwise); StoreFullError past the limit."""

    @abc.abstractmethod
    async def get_memory(self, store_id: str, memory_id: str) -> Memory:
        """The memory with its content, or NotFoundError."""

    @abc.abstractmethod
    async def list_memories(
        self,
        store_id: str,
        *,
        prefix: str,
        depth: int,
        after: MemoryPosition | None,
        limit: int,
        with_content: bool,
    ) -> Slice[ListItem, MemoryPosition]:
        """Memories below ``prefix`` in byte order of path; ``depth=1`` rolls up subdirectories
        into ``MemoryPrefix`` items (found by index seeks, not by scanning the subtree)."""

    async def memory_at(self, store_id: str, path: str, *, with_content: bool) -> Memory | None:
        """The live memory at ``path``, or None: one listing that seeks the path within its
        folder (a listing's prefix is a folder)."""
        page = await self.list_memories(
            store_id,
            prefix=path[: path.rindex("/") + 1],
            depth=0,
            after=MemoryPosition(path, inclusive=True),
            limit=1,
            with_content=with_content,
        )
        first = page.items[0] if page.items else None
        return first if isinstance(first, Memory) and first.path == path else None

    @abc.abstractmethod
    async def update_memory(
        self,
        store_id: str,
        memory_id: str,
        *,
        content: str | None,
        path: str | None,
        expected_sha256: str | None,
        actor: Actor,
    ) -> Memory:
        """Change content and/or path (``None``: keep). A precondition that fails is a
        PreconditionFailedError unless the stored state already equals the requested one."""

    @abc.abstractmethod
    async def delete_memory(
        self, store_id: str, memory_id: str, *, expected_sha256: str | None, actor: Actor
    ) -> None:
        """Delete, appending a ``deleted`` version (works when the store is archived)."""

    @abc.abstractmethod
    async def search_memories(
        self, store_id: str, query: str, *, limit: int, path_prefix: str | None
    ) -> list[tuple[Memory, float]]:
        """The at most ``limit`` memories (with content) best matching ``query``, best first,
        with their scores (higher = better); ``path_prefix``: only paths starting with it.
        NotFoundError for an unknown store (memfs.server.search has the ranking rules)."""

    # -- versions -------------------------------------------------------------------------------

    @abc.abstractmethod
    async def list_versions(
        self,
        store_id: str,
        flt: VersionFilter,
        *,
        after: int | None,
        limit: int,
        with_content: bool,
        oldest_first: bool = False,
    ) -> Slice[MemoryVersion, int]:
        """Versions newest first (by store sequence), or oldest first (the change stream's
        replay); ``after`` is the last sequence seen."""

    @abc.abstractmethod
    async def get_version(self, store_id: str, version_id: str) -> MemoryVersion: ...

    @abc.abstractmethod
    async def redact_version(
        self, store_id: str, version_id: str, *, actor: Actor
    ) -> MemoryVersion:
        """Scrub a version; BadRequestError for the head of a live memory; a redacted version is
        returned unchanged."""

    @abc.abstractmethod
    async def prune_versions(self, older_than: datetime) -> int:
        """Delete versions created before ``older_than``, except each memory's newest version.
        Returns how many were deleted."""
