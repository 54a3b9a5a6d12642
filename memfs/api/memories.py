"""The memory endpoints of ``StoreClient`` (``/v1/memory_stores/{store}/memories``): list, find,
create, read, update (content, path, precondition) and delete memories.

Retried writes stay safe (``StoreClient``'s retry rules, ``memfs.api.client``):
- ``create_memory`` is retried too: if an earlier attempt may have been applied and the retry
  meets ``memory_path_conflict_error`` for a memory with the same path and content, that memory
  is the result (no duplicate, no spurious conflict);
- a ``delete_memory`` retried after a lost answer that gets 404 is done.

An answer without content (``view=basic``) gets the content we sent when its hash says it is
that content. It must not send anything except through ``Transport``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import replace

from memfs.api.pagination import Pager, page_from
from memfs.api.transport import Transport, parse_answer, query_params
from memfs.contract.errors import NotFoundError, PathConflictError
from memfs.contract.models import (
    JsonObject,
    ListItem,
    Memory,
    MemoryPrefix,
    Page,
    list_item_from_json,
    sha256_hex,
)
from memfs.contract.paths import as_prefix, parent

log = logging.getLogger(__name__)

# Route templates: the keys of RequestStats and of the DEBUG log.
MEMORIES = "/v1/memory_stores/{store}/memories"
MEMORY = "/v1/memory_stores/{store}/memories/{memory}"


def _with_content(memory: Memory, content: str | None) -> Memory:
    """Fill in ``content`` the server left out (view=basic) when we know it is what we sent."""
    known = content is not None and memory.content_sha256 == sha256_hex(content)
    return replace(memory, content=content) if memory.content is None and known else memory


class MemoryEndpoints(Transport):
    """The memory methods of ``StoreClient``, sent by its ``Transport``."""

    async def list_memories_page(
        self,
        store_id: str,
        *,
        path_prefix: str | None = None,
        depth: int | None = None,
        limit: int | None = None,
        view: str | None = None,
        page: str | None = None,
    ) -> Page[Memory | MemoryPrefix]:
        query = query_params(
            path_prefix=path_prefix, depth=depth, limit=limit, view=view, page=page
        )
        data = await self._call("GET", MEMORIES, {"store": store_id}, query=query)
        return page_from(list_item_from_json, data, MEMORIES)

    def list_memories(
        self,
        store_id: str,
        *,
        path_prefix: str | None = None,
        depth: int | None = None,
        limit: int | None = None,
        view: str | None = None,
    ) -> AsyncIterator[Memory | MemoryPrefix]:
        """Every memory (and, with ``depth=1``, prefix) below ``path_prefix``, in path order."""

        async def fetch(cursor: str | None) -> Page[ListItem]:
            return await self.list_memories_page(
                store_id, path_prefix=path_prefix, depth=depth, limit=limit, view=view, page=cursor
            )

        return Pager(fetch)

    async def find_memory(self, store_id: str, path: str) -> Memory | None:
        """The live memory at ``path`` (``view=basic``), or None. Lists the parent directory."""
        directory = as_prefix(parent(path))
        async for item in self.list_memories(
            store_id, path_prefix=None if directory == "/" else directory, depth=1, limit=100
        ):
            if isinstance(item, Memory) and item.path == path:
                return item
        return None

    async def create_memory(self, store_id: str, path: str, content: str) -> Memory:
        """Create a memory; never overwrites (PathConflictError if the path is taken)."""
        body: JsonObject = {"path": path, "content": content}
        reply = await self._exchange("POST", MEMORIES, {"store": store_id}, body=body)
        if reply.error is None:
            memory = parse_answer(Memory.from_json, reply.data, MEMORIES)
            return _with_content(memory, content)
        error = reply.error
        if reply.lost_answer and isinstance(error, PathConflictError):
            existing = await self._created_by_lost_attempt(store_id, path, content, error)
            if existing is not None:
                return existing
        raise error

    async def _created_by_lost_attempt(
        self, store_id: str, path: str, content: str, error: PathConflictError
    ) -> Memory | None:
        """The memory an earlier attempt created, if the conflicting one is exactly ours."""
        if error.conflicting_memory_id:
            try:
                existing: Memory | None = await self.get_memory(
                    store_id, error.conflicting_memory_id, view="basic"
                )
            except NotFoundError:
                return None
        else:
            existing = await self.find_memory(store_id, path)
        if existing is None or existing.path != path:
            return None
        if existing.content_sha256 != sha256_hex(content):
            return None
        log.info("create of %s was applied by an attempt whose answer was lost", existing.id)
        return _with_content(existing, content)

    async def get_memory(self, store_id: str, memory_id: str, *, view: str = "full") -> Memory:
        data = await self._call(
            "GET", MEMORY, {"store": store_id, "memory": memory_id}, query=query_params(view=view)
        )
        return parse_answer(Memory.from_json, data, MEMORY)

    async def update_memory(
        self,
        store_id: str,
        memory_id: str,
        *,
        content: str | None = None,
        path: str | None = None,
        expected_sha256: str | None = None,
    ) -> Memory:
        """Change content and/or path (a rename keeps the id).

        With ``expected_sha256`` the update applies only if the stored content has that hash
        (else PreconditionFailedError), unless the memory already is as requested.
        """
        body: JsonObject = {}
        if content is not None:
            body["content"] = content
        if path is not None:
            body["path"] = path
        if expected_sha256 is not None:
            body["precondition"] = {"type": "content_sha256", "content_sha256": expected_sha256}
        data = await self._call("POST", MEMORY, {"store": store_id, "memory": memory_id}, body=body)
        return _with_content(parse_answer(Memory.from_json, data, MEMORY), content)

    async def delete_memory(
        self, store_id: str, memory_id: str, *, expected_sha256: str | None = None
    ) -> None:
        reply = await self._exchange(
            "DELETE",
            MEMORY,
            {"store": store_id, "memory": memory_id},
            query=query_params(expected_content_sha256=expected_sha256),
        )
        if reply.error is not None:
            if reply.lost_answer and isinstance(reply.error, NotFoundError):
                log.info("memory %s was deleted by an attempt whose answer was lost", memory_id)
                return
            raise reply.error
