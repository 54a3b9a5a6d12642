"""``StoreBackend``: the MCP tools' ``MemoryBackend`` over the client seam (``StoreAPI``), for
``memfs mcp STORE``: a Memory Stores store (``MemoryStoresAPI``) or one actor's entries of a
Databricks store (``DatabricksStore``).

The seam's errors (``memfs.contract.errors``) become the backend's here, with one-line messages; the
preconditions are the seam's own (``expected_sha256``: the server checks it on Memory Stores,
``DatabricksStore`` compares just before the write). Search is ``memfs.search.engine``'s:
the server's where offered, else a local index of the store, brought up to date before each
search. The reference server never imports this module (an import-linter contract): when it
serves these tools it will give them a backend over its own storage.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from memfs.contract.errors import ApiConnectionError, ApiError, NotFoundError
from memfs.contract.store_api import ChangeEvent, StoreAPI
from memfs.mcp.api_records import stored, translated, version_record
from memfs.mcp.backend import (
    Change,
    Listed,
    Match,
    MissingError,
    RefusedError,
    StoredMemory,
    StoreInfo,
    Version,
)

if TYPE_CHECKING:
    from memfs.search.engine import StoreSearch

log = logging.getLogger(__name__)

# a deleted memory's history is found by its path among the store's newest versions: at most
# this many are looked at (a path deleted longer ago than that has no history to show)
HISTORY_SCAN = 2_000


class StoreBackend:
    """One store behind the seam, as the MCP tools use it."""

    def __init__(self, store: StoreAPI, info: StoreInfo) -> None:
        self.store = store
        self._info = info
        # made by the first search: a session that never searches never loads the engine, and
        # ``memfs mcp`` answers initialize without its import (tests/commands/test_startup.py)
        self._search: StoreSearch | None = None

    @property
    def info(self) -> StoreInfo:
        return self._info

    async def read(self, path: str) -> StoredMemory | None:
        with translated():
            found = await self.store.find(path)
            if found is None:
                return None
            try:
                memory = await self.store.read(found.id, with_content=True)
            except NotFoundError:
                return None  # deleted between the two requests
        return stored(memory)

    async def list_below(self, prefix: str) -> list[Listed]:
        with translated():
            return [
                Listed(m.id, m.path, m.content_size_bytes, m.content_sha256, m.description or "")
                async for m in self.store.list_below(None if prefix == "/" else prefix)
            ]

    async def create(self, path: str, content: str, *, description: str = "") -> StoredMemory:
        with translated():
            if self._info.descriptions:
                memory = await self.store.create(path, content, description=description)
            else:
                memory = await self.store.create(path, content)
        return stored(memory, content)

    async def update(
        self,
        memory_id: str,
        *,
        expected_sha256: str,
        content: str | None = None,
        path: str | None = None,
        description: str | None = None,
    ) -> StoredMemory:
        with translated():
            memory = await self.store.update(
                memory_id,
                content=content,
                path=path,
                expected_sha256=expected_sha256,
                description=description if self._info.descriptions else None,
            )
        return stored(memory, content)

    async def delete(self, memory_id: str, *, expected_sha256: str) -> None:
        with translated():
            await self.store.delete(memory_id, expected_sha256=expected_sha256)

    async def history(self, path: str, limit: int) -> list[Version]:
        if not self._info.history:
            raise RefusedError("This store keeps no history.")
        with translated():
            found = await self.store.find(path)
            memory_id = found.id if found is not None else await self._last_at(path)
            if memory_id is None:
                raise MissingError(f"No memory was ever at {path}.")
            versions: list[Version] = []
            async for version in self.store.list_versions(memory_id=memory_id):
                versions.append(version_record(version))
                if len(versions) >= limit:
                    break
        return versions

    async def _last_at(self, path: str) -> str | None:
        """The id of the memory last seen at ``path`` among the newest ``HISTORY_SCAN``
        versions of the store."""
        seen = 0
        async for version in self.store.list_versions():
            if version.path == path:
                return version.memory_id
            seen += 1
            if seen >= HISTORY_SCAN:
                break
        return None

    async def version(self, version_id: str) -> Version:
        if not self._info.history:
            raise RefusedError("This store keeps no history.")
        with translated():
            return version_record(await self.store.get_version(version_id))

    async def search(self, query: str, limit: int) -> list[Match]:
        if self._search is None:
            from memfs.search.engine import StoreSearch

            self._search = StoreSearch(self.store)
        with translated():
            hits = await self._search.search(query, limit=limit)
        return [Match(hit.path, hit.score, hit.line, hit.description) for hit in hits]

    async def offers_changes(self) -> bool:
        """True if the store pushes its changes (``changes``); any doubt is a no."""
        try:
            return await self.store.offers_change_stream()
        except (ApiError, ApiConnectionError) as exc:  # optional: a failed probe turns it off
            log.warning("no change stream, so no resource subscriptions: %s", exc)
            return False

    @asynccontextmanager
    async def changes(self) -> AsyncIterator[AsyncIterable[Change | None]]:
        """The store's pushed changes, as the mount's change feed reads them (``ChangeFeed``)."""
        async with self.store.change_stream() as stream:
            yield _changes_of(stream)


async def _changes_of(stream: AsyncIterable[ChangeEvent]) -> AsyncIterator[Change | None]:
    async for event in stream:
        version = event.version
        if event.kind == "ready":
            yield None
        elif event.kind == "memory_version" and version is not None and version.path:
            yield Change(version.memory_id, version.path, str(version.operation))


@asynccontextmanager
async def open_memory_stores(
    store: str,
    *,
    read_only: bool,
    api_key_file: str | None = None,
    base_url: str | None = None,
    session_id: str | None = None,
) -> AsyncIterator[StoreBackend]:
    """The backend of the Memory Stores store ``store`` (id or exact name), with the key and
    base URL ``memfs mount`` takes (``ConfigError``; the ``ApiError`` of the first request)."""
    from memfs.api import StoreClient
    from memfs.api.capabilities import server_extensions
    from memfs.api.config import ClientConfig
    from memfs.api.store import MemoryStoresAPI, capabilities_with

    config = ClientConfig.from_env(
        api_key_file=api_key_file, base_url=base_url, session_id=session_id
    )
    async with StoreClient(config) as client:
        # a tool call waits on these: a long retry-after is an error, not a wait
        quick = client.with_options(timeout=10.0, max_retries=2, deadline=30.0)
        found = await quick.resolve_store(store)
        # asked once: the limits, the change stream (subscriptions) and search come from it
        extensions = await server_extensions(quick)
        capabilities = capabilities_with(extensions)
        info = StoreInfo(
            api="memory-stores",
            name=found.name,
            read_only=read_only,
            history=capabilities.versions,
            descriptions=False,
            renames_keep_id=capabilities.rename_keeps_identity,
            description=found.description,
        )
        yield StoreBackend(MemoryStoresAPI(quick, found.id, capabilities, extensions), info)


@asynccontextmanager
async def open_databricks(
    store: str,
    actor: str,
    session: str | None,
    *,
    read_only: bool,
    profile: str | None = None,
) -> AsyncIterator[StoreBackend]:
    """The backend of ``actor``'s entries (``session``'s, or the session-less ones) of the
    Databricks store ``store``; the workspace as ``memfs mount --api databricks`` finds it."""
    from memfs.api.databricks import open_store

    async with open_store(store, actor, session, profile=profile) as opened:
        caps = opened.quick.capabilities
        in_session = f", session {session}" if session else ""
        info = StoreInfo(
            api="databricks",
            name=f"{store} (actor {actor}{in_session})",
            read_only=read_only,
            history=caps.versions,
            descriptions=caps.descriptions,
            renames_keep_id=caps.rename_keeps_identity,
            description=opened.description,
        )
        yield StoreBackend(opened.quick, info)
