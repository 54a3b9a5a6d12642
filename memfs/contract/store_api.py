"""The seam between the filesystem and a memory API: what a mount needs from any store.

The core (``memfs.core``), the ``.versions/`` tree and the mount's change feed talk to one
store through a ``StoreAPI`` and nothing else: they never see HTTP, routes, store ids in
requests or an API's own names. An implementation binds a client of one API to one store:
``memfs.api.store.MemoryStoresAPI`` for Anthropic's Memory Stores API. A second API plugs in by
implementing this protocol and saying what it can do in ``Capabilities``; the daemon builds the
core from it (``memfs.core.build``), and a feature the API lacks is switched off there, from
the capabilities, not by ``if`` chains in the core. ``docs/architecture.md`` ("A second store
API") lists what an API without versions, preconditions or renames has to provide.

Records are the shared wire models of ``memfs.contract.models``: a ``Memory`` (id, path, content and
its SHA-256, size, times), a ``MemoryPrefix`` (a directory in a listing), a ``MemoryVersion`` (one
change, as the change feed and ``.versions/`` see it). An API maps its own records into these.

Errors are those of ``memfs.contract.errors``: ``NotFoundError``, ``PathConflictError`` (create on a
taken path), ``PreconditionFailedError`` (the expected hash is not the stored one),
``StoreFullError``, ``ApiConnectionError`` and other ``ApiError``s; ``memfs.contract.retry``'s
``is_transient`` says which are worth a retry. Retries, deadlines and lost answers (a create or
delete whose reply never came) are the implementation's business: a call returns what the store
now holds, or raises.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from memfs.contract.models import ListItem, Memory, MemoryVersion, Page


@dataclass(frozen=True)
class Capabilities:
    """What a store API can do; the daemon turns features on or off from these."""

    # updates and deletes can be guarded by the content hash the writer saw (expected_sha256);
    # without it a writer must detect a concurrent change itself before each write
    preconditions: bool = True
    # a memory's history can be listed (``list_versions``, ``get_version``): ``.versions/``
    versions: bool = True
    # ``update(path=...)`` moves a memory and keeps its id; else a rename is create + delete
    rename_keeps_identity: bool = True
    # each memory has a description (``Memory.description``; ``create``/``update`` take one):
    # the ``user.description`` extended attribute of its file
    descriptions: bool = False
    # the limits the store enforces, so the mount refuses early with the right errno
    max_content_bytes: int = 102_400
    max_memories: int | None = 2_000
    max_description_bytes: int = 0
    # characters the store refuses in a content or a description (a request holding one is a
    # 400): a save holding one is refused by the mount (EINVAL), never journaled nor uploaded
    refused_characters: str = ""


@dataclass(frozen=True)
class SearchResult:
    """One answer of ``StoreAPI.search``: a memory and how well it matches (higher is better,
    comparable only within one answer). ``content`` when the answer carries it (the line that
    matches best is shown from it), else None."""

    path: str
    score: float
    description: str = ""
    memory_id: str = ""
    content: str | None = None


@dataclass(frozen=True)
class ChangeEvent:
    """One event of a pushed change stream.

    ``ready`` once per (re)connection, when every change committed from then on will arrive;
    ``memory_version`` for each committed change, oldest first. ``cursor`` is its position.
    ``interrupted`` when the connection is lost and a reconnect is on its way (``detail``: why,
    one line without URLs): until the next ``ready``, changes may arrive late, not be lost.
    """

    kind: Literal["ready", "memory_version", "interrupted"]
    cursor: str
    version: MemoryVersion | None = None
    detail: str = ""


class StoreAPI(Protocol):
    """One memory store, as a mount uses it. Every method may raise
    ``memfs.contract.errors.ApiError``s."""

    @property
    def store_id(self) -> str:
        """The store's id: names its journal and cache directories, and its log lines."""

    @property
    def capabilities(self) -> Capabilities: ...

    # -- reading ---------------------------------------------------------------------------

    async def list_directory_page(
        self,
        prefix: str | None,
        *,
        with_content: bool = False,
        cursor: str | None = None,
        limit: int = 100,
    ) -> Page[ListItem]:
        """One page of the memories and prefixes right below ``prefix`` ("/a/b/"; None: root),
        in path order; ``with_content``: each memory with its content (the bulk fetch)."""

    async def list_subtree_page(
        self, prefix: str | None, *, cursor: str | None = None, limit: int = 20
    ) -> Page[Memory]:
        """One page of every memory below ``prefix`` ("/a/b/"; None: root) at any depth, each
        with its content, in path order: the walk readahead's bulk fetch of a whole sub-tree
        (one page of 20 may span several small directories)."""

    def list_below(self, prefix: str | None) -> AsyncIterator[Memory]:
        """Every memory below ``prefix`` at any depth, without content, in path order."""

    async def find(self, path: str) -> Memory | None:
        """The live memory at ``path`` (no content), or None."""

    async def read(self, memory_id: str, *, with_content: bool = True) -> Memory: ...

    async def store_exists(self) -> bool:
        """False once the store is gone (deleted while mounted); raises on other errors."""

    # -- writing ---------------------------------------------------------------------------

    async def create(self, path: str, content: str, *, description: str | None = None) -> Memory:
        """A new memory; never overwrites (``PathConflictError`` if ``path`` is taken).
        ``description`` only if ``capabilities.descriptions``."""

    async def update(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        path: str | None = None,
        expected_sha256: str | None = None,
        description: str | None = None,
    ) -> Memory:
        """New content, path and/or description. With ``expected_sha256`` it applies only if
        the stored content has that hash, else ``PreconditionFailedError`` (an API without
        ``preconditions`` checks it itself, just before the write). A new ``path`` keeps the
        memory's id only if ``rename_keeps_identity`` (else the answer is a new memory, its
        description kept); ``description`` only if ``capabilities.descriptions``."""

    async def delete(self, memory_id: str, *, expected_sha256: str | None = None) -> None: ...

    # -- changes and history -----------------------------------------------------------------

    async def recent_changes(self, *, since: datetime | None, limit: int) -> Page[MemoryVersion]:
        """Changes made at or after ``since`` (None: the newest), newest first, no content."""

    async def offers_change_stream(self) -> bool:
        """True if the store pushes changes (``change_stream``); any doubt is a no."""

    def change_stream(self) -> AbstractAsyncContextManager[AsyncIterable[ChangeEvent]]:
        """The pushed changes from now on (reconnects on its own; ends by raising)."""

    # -- search (optional) -------------------------------------------------------------------

    async def offers_search(self) -> bool:
        """True if the store ranks queries itself (``search``); any doubt is a no, and the
        mount searches its own copy of the store (``memfs.search.engine``). Asked once."""

    async def search(
        self, query: str, *, limit: int = 10, path_prefix: str | None = None
    ) -> list[SearchResult]:
        """The best ``limit`` (1-100) memories for the free text ``query``, best first; only
        paths starting with ``path_prefix`` if given. Only if ``offers_search``."""

    # -- history -----------------------------------------------------------------------------

    def list_versions(
        self, *, memory_id: str | None = None, since: datetime | None = None
    ) -> AsyncIterator[MemoryVersion]:
        """Versions (of one memory, or of all made at or after ``since``), newest first, no
        content. Only if ``capabilities.versions``."""

    async def get_version(self, version_id: str) -> MemoryVersion:
        """One version with its content. Only if ``capabilities.versions``."""

    def request_counts(self) -> dict[str, Any]:
        """Requests made so far, for ``memfs status`` (deterministic, unlike timings)."""


async def list_directory(store: StoreAPI, prefix: str | None) -> list[ListItem]:
    """Every memory and prefix right below ``prefix`` (no content), following pages."""
    items: list[ListItem] = []
    cursor: str | None = None
    while True:
        page = await store.list_directory_page(prefix, cursor=cursor)
        items.extend(page.data)
        if page.next_page is None:
            return items
        cursor = page.next_page
