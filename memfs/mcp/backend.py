"""``MemoryBackend``: what the MCP tools need from one memory store, and nothing more.

The tools (``memfs.mcp.memory_tool`` and the others) are written against this protocol alone,
so one set of tools serves a store reached through the client seam (``store_backend``, for
``memfs mcp``) and, later, one served by ``memfs server`` from its own storage.

Paths are the store's (``/a/b.md``), never the tool's ``/memories/...``. Every write that
replaces or removes content takes ``expected_sha256``, the SHA-256 of the content the tool
read: the backend writes only if the store still holds it (an API without preconditions
compares just before the write), else raises ``ChangedError``. No write is ever blind.

Errors are the classes below; a backend turns its own into them, and the tools turn them into
messages. Anything else escaping a backend is a bug (the server answers it as a tool error).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

log = logging.getLogger(__name__)

ApiKind = Literal["memory-stores", "databricks"]


class BackendError(Exception):
    """A store refused or failed a call; the message is one line, safe to show the model."""


class MissingError(BackendError):
    """No memory (or version) there."""


class TakenError(BackendError):
    """A create or a move onto a path that holds a memory."""


class ChangedError(BackendError):
    """The stored content is no longer the one the write was based on (a concurrent writer)."""


class RefusedError(BackendError):
    """The store refused the content or path (too large, full, bad characters...)."""


class UnavailableError(BackendError):
    """The store did not answer (network, overload); nothing is known to have changed."""


@dataclass(frozen=True)
class StoreInfo:
    """What the tools offered depend on: the store's API, name and abilities."""

    api: ApiKind
    name: str
    read_only: bool
    history: bool  # versions can be listed and restored
    descriptions: bool  # each memory has a description (Databricks)
    renames_keep_id: bool
    description: str = ""


@dataclass(frozen=True)
class StoredMemory:
    """A live memory with its content."""

    id: str
    path: str
    content: str
    sha256: str
    description: str = ""


@dataclass(frozen=True)
class Listed:
    """A live memory in a listing: no content, but its hash (a precondition for a write)."""

    id: str
    path: str
    size: int
    sha256: str
    description: str = ""


@dataclass(frozen=True)
class Version:
    """One change of a memory's history. ``content`` only from ``version()``."""

    id: str
    memory_id: str
    path: str
    operation: str  # created, modified, deleted
    created_at: datetime
    author: str  # who wrote it, e.g. "session session_01..." ("" when unknown)
    size: int | None
    content: str | None = None


@dataclass(frozen=True)
class Match:
    """One search result: the memory's path, its score (comparable within one answer), the
    line that matches best and its description."""

    path: str
    score: float
    snippet: str
    description: str = ""


class MemoryBackend(Protocol):
    """One memory store as the MCP tools use it (module docstring)."""

    @property
    def info(self) -> StoreInfo: ...

    async def read(self, path: str) -> StoredMemory | None:
        """The live memory at ``path`` with its content and hash, or None."""

    async def list_below(self, prefix: str) -> list[Listed]:
        """Every live memory below ``prefix`` ("/" or "/a/b/"), at any depth, in path order."""

    async def create(self, path: str, content: str, *, description: str = "") -> StoredMemory:
        """A new memory; ``TakenError`` if ``path`` holds one (never an overwrite)."""

    async def update(
        self,
        memory_id: str,
        *,
        expected_sha256: str,
        content: str | None = None,
        path: str | None = None,
        description: str | None = None,
    ) -> StoredMemory:
        """New content, path or description, only if the memory still holds the content
        hashed ``expected_sha256`` (else ``ChangedError``; ``MissingError`` if it is gone;
        ``TakenError`` if ``path`` holds another memory). A new path keeps the id only if
        ``info.renames_keep_id``."""

    async def delete(self, memory_id: str, *, expected_sha256: str) -> None:
        """Remove the memory, only if it still holds the content hashed ``expected_sha256``
        (else ``ChangedError``; ``MissingError`` if it is already gone)."""

    async def history(self, path: str, limit: int) -> list[Version]:
        """The newest ``limit`` versions of the memory at ``path`` (or of the last one that
        was there, if it was deleted), newest first; ``MissingError`` if none ever was."""

    async def version(self, version_id: str) -> Version:
        """One version with its content (None for a deletion); ``MissingError``."""

    async def search(self, query: str, limit: int) -> list[Match]:
        """The best ``limit`` memories for ``query``, best first."""


@dataclass(frozen=True)
class Change:
    """One committed change of a memory, as a change feed tells it (no content)."""

    memory_id: str
    path: str  # its path after the change (a deleted memory's last)
    operation: str  # created, modified, deleted


class ChangeFeed(Protocol):
    """The store's changes as they are committed, for resource subscriptions (optional: only
    ``memfs mcp`` over stdio has a client to push them to)."""

    def changes(self) -> AbstractAsyncContextManager[AsyncIterable[Change | None]]:
        """The changes, oldest first; None once connected (every change committed from then
        on will arrive) and after each reconnection. Reconnects on its own, ends by raising."""
