"""The memory endpoints: create, list, retrieve, update (PATCH or POST) and delete a memory.

``MemoryRoutes`` reads each request (``validation`` for bodies, ``query`` for parameters and
page cursors), calls ``MemoryStoresStorage`` as the request's actor (``auth.actor_of``: its
session, else its API key) and renders the memory: ``view=basic`` leaves the content out. ``null``
in an update means "leave unchanged"; an update's precondition and a delete's
``expected_content_sha256`` are checked by the storage, under the store's lock.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from memfs.contract.errors import BadRequestError
from memfs.contract.models import Memory
from memfs.server.http import cursor
from memfs.server.http.auth import actor_of
from memfs.server.http.body import check_fields, read_json_object
from memfs.server.http.query import (
    bad_cursor,
    listing,
    page_position,
    query_depth,
    query_limit,
    query_path_prefix,
    query_text,
    query_view,
)
from memfs.server.memory_stores.storage import MemoryPosition, MemoryStoresStorage
from memfs.server.memory_stores.validation import (
    memory_content,
    memory_path,
    precondition_sha256,
    sha256_field,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MemoryRoutes:
    """The memory endpoints, bound to one ``MemoryStoresStorage``."""

    storage: MemoryStoresStorage

    async def create_memory(self, request: Request) -> Response:
        full = query_view(request, "basic")
        body = await read_json_object(request)
        check_fields(body, ("path", "content"))
        if "path" not in body:
            raise BadRequestError("path: required")
        path = memory_path(body["path"])
        if body.get("content") is None:
            raise BadRequestError('content: required (pass "" to create an empty memory)')
        content = memory_content(body["content"])
        memory = await self.storage.create_memory(
            request.path_params["store_id"], path=path, content=content, actor=actor_of(request)
        )
        return JSONResponse(memory.to_json(full=full))

    async def list_memories(self, request: Request) -> Response:
        store_id = request.path_params["store_id"]
        full = query_view(request, "basic")
        limit = query_limit(request, full=full)
        prefix = query_path_prefix(request)
        depth = query_depth(request)
        query = cursor.query_digest(store_id, prefix, depth)
        after = None
        position = page_position(request, "memories", query)
        if position is not None:
            key, inclusive = position.get("key"), position.get("inc")
            if not isinstance(key, str) or not isinstance(inclusive, bool):
                raise bad_cursor()
            after = MemoryPosition(key, inclusive)
        result = await self.storage.list_memories(
            store_id, prefix=prefix, depth=depth, after=after, limit=limit, with_content=full
        )
        next_page = None
        if result.next is not None:
            next_page = cursor.encode(
                "memories", query, {"key": result.next.key, "inc": result.next.inclusive}
            )
        data = [
            item.to_json(full=full) if isinstance(item, Memory) else item.to_json()
            for item in result.items
        ]
        return listing(data, next_page)

    async def get_memory(self, request: Request) -> Response:
        full = query_view(request, "full")
        memory = await self.storage.get_memory(
            request.path_params["store_id"], request.path_params["memory_id"]
        )
        return JSONResponse(memory.to_json(full=full))

    async def update_memory(self, request: Request) -> Response:
        full = query_view(request, "basic")
        body = await read_json_object(request)
        check_fields(body, ("content", "path", "precondition"))
        content = None if body.get("content") is None else memory_content(body["content"])
        path = None if body.get("path") is None else memory_path(body["path"])
        precondition = body.get("precondition")
        expected = None if precondition is None else precondition_sha256(precondition)
        memory = await self.storage.update_memory(
            request.path_params["store_id"],
            request.path_params["memory_id"],
            content=content,
            path=path,
            expected_sha256=expected,
            actor=actor_of(request),
        )
        return JSONResponse(memory.to_json(full=full))

    async def delete_memory(self, request: Request) -> Response:
        raw = query_text(request, "expected_content_sha256")
        expected = None if raw is None else sha256_field(raw, "expected_content_sha256")
        memory_id = request.path_params["memory_id"]
        await self.storage.delete_memory(
            request.path_params["store_id"],
            memory_id,
            expected_sha256=expected,
            actor=actor_of(request),
        )
        return JSONResponse({"id": memory_id, "type": "memory_deleted"})
