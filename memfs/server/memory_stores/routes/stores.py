"""The memory store endpoints: create, list, retrieve, update, archive and delete a store.

``StoreRoutes`` reads each request (``validation`` for bodies, ``query`` for parameters and
page cursors), calls ``MemoryStoresStorage`` and renders the store as the API does. Archiving
cannot be undone and archiving an archived store returns it unchanged; the rules that depend on
stored state (an archived store refuses updates, the metadata count after a patch) are the
storage's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from memfs.contract.errors import BadRequestError
from memfs.contract.models import format_time, parse_time
from memfs.server.http import cursor
from memfs.server.http.body import check_fields, read_json_object
from memfs.server.http.query import (
    bad_cursor,
    listing,
    page_position,
    query_bool,
    query_limit,
    query_time,
)
from memfs.server.memory_stores.storage import MemoryStoresStorage, StoreFilter, StorePosition
from memfs.server.memory_stores.validation import (
    metadata_patch,
    store_description,
    store_metadata,
    store_name,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoreRoutes:
    """The store endpoints, bound to one ``MemoryStoresStorage``."""

    storage: MemoryStoresStorage

    async def create_store(self, request: Request) -> Response:
        body = await read_json_object(request)
        check_fields(body, ("name", "description", "metadata"))
        if "name" not in body:
            raise BadRequestError("name: required")
        name = store_name(body["name"])
        description = (
            "" if body.get("description") is None else store_description(body["description"])
        )
        metadata = {} if body.get("metadata") is None else store_metadata(body["metadata"])
        store = await self.storage.create_store(
            name=name, description=description, metadata=metadata
        )
        return JSONResponse(store.to_json())

    async def list_stores(self, request: Request) -> Response:
        flt = StoreFilter(
            include_archived=query_bool(request, "include_archived"),
            created_gte=query_time(request, "created_at[gte]"),
            created_lte=query_time(request, "created_at[lte]"),
        )
        limit = query_limit(request)
        query = cursor.query_digest(
            flt.include_archived,
            flt.created_gte and format_time(flt.created_gte),
            flt.created_lte and format_time(flt.created_lte),
        )
        after = None
        position = page_position(request, "stores", query)
        if position is not None:
            try:
                after = StorePosition(parse_time(position["t"]), str(position["id"]))
            except (KeyError, TypeError, ValueError, AttributeError):
                raise bad_cursor() from None
        result = await self.storage.list_stores(flt, after=after, limit=limit)
        next_page = None
        if result.next is not None:
            next_page = cursor.encode(
                "stores",
                query,
                {"t": format_time(result.next.created_at), "id": result.next.store_id},
            )
        return listing([s.to_json() for s in result.items], next_page)

    async def get_store(self, request: Request) -> Response:
        store = await self.storage.get_store(request.path_params["store_id"])
        return JSONResponse(store.to_json())

    async def update_store(self, request: Request) -> Response:
        body = await read_json_object(request)
        check_fields(body, ("name", "description", "metadata"))
        name = None if body.get("name") is None else store_name(body["name"])
        description = (
            None if body.get("description") is None else store_description(body["description"])
        )
        patch = None if body.get("metadata") is None else metadata_patch(body["metadata"])
        store = await self.storage.update_store(
            request.path_params["store_id"], name=name, description=description, metadata=patch
        )
        return JSONResponse(store.to_json())

    async def archive_store(self, request: Request) -> Response:
        check_fields(await read_json_object(request, allow_empty=True), ())
        store = await self.storage.archive_store(request.path_params["store_id"])
        return JSONResponse(store.to_json())

    async def delete_store(self, request: Request) -> Response:
        store_id = request.path_params["store_id"]
        await self.storage.delete_store(store_id)
        return JSONResponse({"id": store_id, "type": "memory_store_deleted"})
