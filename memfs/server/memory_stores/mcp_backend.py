"""The MCP tools' ``MemoryBackend`` over the Memory Stores API's own storage, for the tools
``memfs server`` serves over streamable HTTP (``memfs.server.mcp.endpoint``).

``MemoryStoresBackend``, built for one request (stateless: nothing outlives it): a store of the
Memory Stores API, written as the request's actor (its key, or its session). The preconditions
are the storage's own: ``expected_sha256`` is checked inside the write's transaction.

What the model sends is checked as the REST routes check a body (``validation``,
``search.validate_query``: paths, sizes, NUL), since the storage leaves those checks to the
HTTP layer; a refusal is the tool's one-line error. Errors become the backend's through
``memfs.mcp.api_records.translated`` (the same table the client's adapter uses). This module
must not import the client (``memfs.api``) nor the client's adapter
(``memfs.mcp.store_backend``): import-linter contracts.
"""

from __future__ import annotations

import logging

from memfs.contract.models import Actor, Memory
from memfs.contract.search_words import best_line
from memfs.mcp.api_records import stored, translated, version_record
from memfs.mcp.backend import (
    Listed,
    Match,
    MissingError,
    StoredMemory,
    StoreInfo,
    Version,
)
from memfs.server.memory_stores import validation
from memfs.server.memory_stores.storage import MemoryPosition, MemoryStoresStorage, VersionFilter
from memfs.server.search import validate_query

log = logging.getLogger(__name__)

PAGE = 200  # memories a listing asks the storage for at once
# a deleted memory's history is found by its path among the store's newest versions: at most
# this many are looked at (as memfs mcp's HISTORY_SCAN)
HISTORY_SCAN = 2_000


class MemoryStoresBackend:
    """The store ``store_id`` of the Memory Stores API, written as ``actor``."""

    def __init__(
        self, storage: MemoryStoresStorage, store_id: str, actor: Actor, info: StoreInfo
    ) -> None:
        self.storage = storage
        self.store_id = store_id
        self.actor = actor
        self._info = info

    @property
    def info(self) -> StoreInfo:
        return self._info

    async def read(self, path: str) -> StoredMemory | None:
        with translated():
            memory = await self.storage.memory_at(self.store_id, path, with_content=True)
        return None if memory is None else stored(memory)

    async def list_below(self, prefix: str) -> list[Listed]:
        found: list[Listed] = []
        after: MemoryPosition | None = None
        with translated():
            while True:
                page = await self.storage.list_memories(
                    self.store_id, prefix=prefix, depth=0, after=after, limit=PAGE,
                    with_content=False,
                )  # fmt: skip
                found += [
                    Listed(m.id, m.path, m.content_size_bytes, m.content_sha256)
                    for m in page.items
                    if isinstance(m, Memory)
                ]
                if page.next is None:
                    return found
                after = page.next

    async def create(self, path: str, content: str, *, description: str = "") -> StoredMemory:
        with translated():
            memory = await self.storage.create_memory(
                self.store_id,
                path=validation.memory_path(path),
                content=validation.memory_content(content),
                actor=self.actor,
            )
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
            memory = await self.storage.update_memory(
                self.store_id,
                memory_id,
                content=None if content is None else validation.memory_content(content),
                path=None if path is None else validation.memory_path(path),
                expected_sha256=expected_sha256,
                actor=self.actor,
            )
        return stored(memory, content)

    async def delete(self, memory_id: str, *, expected_sha256: str) -> None:
        with translated():
            await self.storage.delete_memory(
                self.store_id, memory_id, expected_sha256=expected_sha256, actor=self.actor
            )

    async def history(self, path: str, limit: int) -> list[Version]:
        found = await self.read(path)
        memory_id = found.id if found is not None else await self._last_at(path)
        if memory_id is None:
            raise MissingError(f"No memory was ever at {path}.")
        with translated():
            page = await self.storage.list_versions(
                self.store_id,
                VersionFilter(memory_id=memory_id),
                after=None,
                limit=limit,
                with_content=False,
            )
        return [version_record(v) for v in page.items]

    async def _last_at(self, path: str) -> str | None:
        """The id of the memory last seen at ``path`` among the newest ``HISTORY_SCAN``
        versions of the store."""
        with translated():
            page = await self.storage.list_versions(
                self.store_id, VersionFilter(), after=None, limit=HISTORY_SCAN, with_content=False
            )
        return next((v.memory_id for v in page.items if v.path == path), None)

    async def version(self, version_id: str) -> Version:
        with translated():
            return version_record(await self.storage.get_version(self.store_id, version_id))

    async def search(self, query: str, limit: int) -> list[Match]:
        with translated():
            hits = await self.storage.search_memories(
                self.store_id, validate_query(query), limit=limit, path_prefix=None
            )
        return [Match(m.path, score, best_line(m.content or "", query)) for m, score in hits]
