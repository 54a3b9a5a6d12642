"""The memory version endpoints: list, retrieve and redact versions.

``VersionRoutes`` reads each request (``query`` for filters and page cursors), calls
``MemoryStoresStorage`` and renders the versions, newest first. Listing defaults to ``view=basic``
and retrieving to ``view=full``, as the SDK's docstrings say. A redaction is attributed to the API
key (``auth.api_actor_of``), never to a session; refusing the head of a live memory is the storage's
rule.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from memfs.contract.models import MemoryVersion, format_time
from memfs.server.http import cursor
from memfs.server.http.auth import api_actor_of
from memfs.server.http.body import check_fields, read_json_object
from memfs.server.http.query import (
    bad_cursor,
    listing,
    page_position,
    query_limit,
    query_operation,
    query_text,
    query_time,
    query_view,
)
from memfs.server.memory_stores.storage import MemoryStoresStorage, VersionFilter

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VersionRoutes:
    """The version endpoints, bound to one ``MemoryStoresStorage``."""

    storage: MemoryStoresStorage

    async def list_versions(self, request: Request) -> Response:
        store_id = request.path_params["store_id"]
        full = query_view(request, "basic")
        limit = query_limit(request, full=full)
        flt = VersionFilter(
            memory_id=query_text(request, "memory_id"),
            operation=query_operation(request),
            session_id=query_text(request, "session_id"),
            api_key_id=query_text(request, "api_key_id"),
            service_account_id=query_text(request, "service_account_id"),
            created_gte=query_time(request, "created_at[gte]"),
            created_lte=query_time(request, "created_at[lte]"),
        )
        query = cursor.query_digest(
            store_id,
            flt.memory_id,
            flt.operation,
            flt.session_id,
            flt.api_key_id,
            flt.service_account_id,
            flt.created_gte and format_time(flt.created_gte),
            flt.created_lte and format_time(flt.created_lte),
        )
        after = None
        position = page_position(request, "versions", query)
        if position is not None:
            seq = position.get("seq")
            if not isinstance(seq, int) or isinstance(seq, bool):
                raise bad_cursor()
            after = seq
        result = await self.storage.list_versions(
            store_id, flt, after=after, limit=limit, with_content=full
        )
        next_page = None
        if result.next is not None:
            next_page = cursor.encode("versions", query, {"seq": result.next})
        return listing([v.to_json(full=full) for v in result.items], next_page)

    async def get_version(self, request: Request) -> Response:
        full = query_view(request, "full")
        version = await self.storage.get_version(
            request.path_params["store_id"], request.path_params["version_id"]
        )
        return JSONResponse(version.to_json(full=full))

    async def redact_version(self, request: Request) -> Response:
        check_fields(await read_json_object(request, allow_empty=True), ())
        version: MemoryVersion = await self.storage.redact_version(
            request.path_params["store_id"],
            request.path_params["version_id"],
            actor=api_actor_of(request),
        )
        return JSONResponse(version.to_json(full=True))
