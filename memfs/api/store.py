"""One store of the Memory Stores API as a ``memfs.contract.store_api.StoreAPI``: what a mount uses.

A thin binding of a ``StoreClient`` (retries, deadlines, lost answers, errors) to one store id;
it adds no behaviour of its own. The daemon makes two, over clients with different deadlines:
one for calls a syscall waits on, one for background uploads, with the capabilities
``memory_stores_capabilities`` finds: the hosted API's limits, and NUL refused in a content when
the server says it refuses one (``refuses_nul``: a memfs server before its schema step 10;
the hosted API and memfs server now say nothing).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from datetime import datetime
from typing import Any

from memfs.api.capabilities import server_extensions
from memfs.api.changes import CHANGE_STREAM_EXTENSION, ChangeStream, server_offers_change_stream
from memfs.api.client import SEARCH_EXTENSION, StoreClient
from memfs.contract.errors import NotFoundError
from memfs.contract.models import ListItem, Memory, MemoryVersion, Page
from memfs.contract.store_api import Capabilities, ChangeEvent, SearchResult

# The hosted API's limits (docs/memory-api.md): 100 KiB per memory, 2,000 memories per store.
MEMORY_STORES = Capabilities(
    preconditions=True,
    versions=True,
    rename_keeps_identity=True,
    max_content_bytes=102_400,
    max_memories=2_000,
)

PAGE = 100  # the API's largest page


async def memory_stores_capabilities(client: StoreClient) -> Capabilities:
    """``MEMORY_STORES``, refusing NUL if the server does: EINVAL at once, not a 400 a retry."""
    return capabilities_with(await server_extensions(client))


def capabilities_with(extensions: frozenset[str]) -> Capabilities:
    """``memory_stores_capabilities`` of a server that offers ``extensions``."""
    if "refuses_nul" in extensions:
        return replace(MEMORY_STORES, refused_characters="\x00")
    return MEMORY_STORES


class MemoryStoresAPI:
    """The Memory Stores API, bound to the store ``store_id``."""

    def __init__(
        self,
        client: StoreClient,
        store_id: str,
        capabilities: Capabilities = MEMORY_STORES,
        extensions: frozenset[str] | None = None,
    ) -> None:
        self.client = client
        self._store_id = store_id
        self.capabilities = capabilities
        # the server's extensions, when the caller asked already (``server_extensions``): then
        # the change stream and search are not asked again
        self._extensions = extensions
        self._offers_search: bool | None = None  # asked once (the server's capabilities)

    def __repr__(self) -> str:
        return f"MemoryStoresAPI({self._store_id})"

    @property
    def store_id(self) -> str:
        return self._store_id

    async def list_directory_page(
        self,
        prefix: str | None,
        *,
        with_content: bool = False,
        cursor: str | None = None,
        limit: int = PAGE,
    ) -> Page[ListItem]:
        return await self.client.list_memories_page(
            self._store_id,
            path_prefix=prefix,
            depth=1,
            limit=limit,
            view="full" if with_content else "basic",
            page=cursor,
        )

    async def list_subtree_page(
        self, prefix: str | None, *, cursor: str | None = None, limit: int = 20
    ) -> Page[Memory]:
        page = await self.client.list_memories_page(
            self._store_id, path_prefix=prefix, limit=limit, view="full", page=cursor
        )
        return Page([m for m in page.data if isinstance(m, Memory)], page.next_page)

    async def list_below(self, prefix: str | None) -> AsyncIterator[Memory]:
        async for item in self.client.list_memories(
            self._store_id, path_prefix=prefix, limit=PAGE, view="basic"
        ):
            if isinstance(item, Memory):
                yield item

    async def find(self, path: str) -> Memory | None:
        return await self.client.find_memory(self._store_id, path)

    async def read(self, memory_id: str, *, with_content: bool = True) -> Memory:
        view = "full" if with_content else "basic"
        return await self.client.get_memory(self._store_id, memory_id, view=view)

    async def store_exists(self) -> bool:
        try:
            await self.client.get_store(self._store_id)
        except NotFoundError:
            return False
        return True

    async def create(self, path: str, content: str, *, description: str | None = None) -> Memory:
        assert description is None, "Memory Stores memories have no description"
        return await self.client.create_memory(self._store_id, path, content)

    async def update(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        path: str | None = None,
        expected_sha256: str | None = None,
        description: str | None = None,
    ) -> Memory:
        assert description is None, "Memory Stores memories have no description"
        return await self.client.update_memory(
            self._store_id, memory_id, content=content, path=path, expected_sha256=expected_sha256
        )

    async def delete(self, memory_id: str, *, expected_sha256: str | None = None) -> None:
        await self.client.delete_memory(self._store_id, memory_id, expected_sha256=expected_sha256)

    async def recent_changes(self, *, since: datetime | None, limit: int) -> Page[MemoryVersion]:
        return await self.client.list_versions_page(
            self._store_id, created_gte=since, limit=limit, view="basic"
        )

    async def offers_change_stream(self) -> bool:
        if self._extensions is not None:
            return CHANGE_STREAM_EXTENSION in self._extensions
        return await server_offers_change_stream(self.client)

    def change_stream(self) -> AbstractAsyncContextManager[AsyncIterable[ChangeEvent]]:
        return ChangeStream(self.client, self._store_id)

    async def offers_search(self) -> bool:
        if self._offers_search is None and self._extensions is not None:
            self._offers_search = SEARCH_EXTENSION in self._extensions
        if self._offers_search is None:
            self._offers_search = await self.client.offers_search()
        return self._offers_search

    async def search(
        self, query: str, *, limit: int = 10, path_prefix: str | None = None
    ) -> list[SearchResult]:
        hits = await self.client.search_memories(
            self._store_id, query, limit=limit, path_prefix=path_prefix
        )
        return [
            SearchResult(memory.path, score, memory.description or "", memory.id, memory.content)
            for memory, score in hits
        ]

    def list_versions(
        self, *, memory_id: str | None = None, since: datetime | None = None
    ) -> AsyncIterator[MemoryVersion]:
        return self.client.list_versions(
            self._store_id, memory_id=memory_id, created_gte=since, limit=PAGE, view="basic"
        )

    async def get_version(self, version_id: str) -> MemoryVersion:
        return await self.client.get_version(self._store_id, version_id)

    def request_counts(self) -> dict[str, Any]:
        return self.client.stats.snapshot()
