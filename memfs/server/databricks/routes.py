"""The Databricks Agent Memory endpoints (``/api/2.0/agents/memory-stores…``).

``DatabricksRoutes`` reads each request (``validation`` for fields, proto3 JSON:
unknown fields ignored, ``null``/``""`` unset), calls ``DatabricksStorage`` and renders stores
and entries as the contract (docs/databricks-agent-memory.md, docs/server.md "Databricks
Agent Memory") says: unset fields omitted, RFC 3339 times, ``{}`` for a delete, listings with
``next_page_token`` only when another page exists, search as a ranked top-N without a token.
Errors raised here become ``{"error_code", "message"}`` (``envelope``, chosen by the
path in ``memfs.server.envelopes``). Routes must not contain SQL or know which backend they run on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from memfs.contract.errors import BadRequestError
from memfs.server.databricks import validation as check
from memfs.server.databricks.storage import (
    DatabricksStorage,
    EntryFilter,
    EntryPatch,
    EntryPosition,
    NewEntry,
    SearchRequest,
)
from memfs.server.http import cursor
from memfs.server.http.auth import api_actor_of
from memfs.server.http.body import read_json_object
from memfs.server.http.query import query_one
from memfs.server.search import validate_query

log = logging.getLogger(__name__)

_STORES_PAGE = "dbx_stores"
_ENTRIES_PAGE = "dbx_entries"


def _page_position(request: Request, kind: str, query: str) -> dict[str, Any] | None:
    raw = request.query_params.get("page_token")
    if not raw:
        return None
    try:
        return cursor.decode(raw, kind, query)
    except cursor.CursorError as exc:
        raise BadRequestError(str(exc).replace("page:", "page_token:")) from None


def _bad_token() -> BadRequestError:
    return BadRequestError("page_token: not a valid page token")


def _listing(key: str, items: list[dict[str, Any]], token: str | None) -> JSONResponse:
    body: dict[str, Any] = {key: items}
    if token is not None:
        body["next_page_token"] = token
    return JSONResponse(body)


@dataclass(frozen=True)
class DatabricksRoutes:
    """The Databricks endpoints, bound to one ``DatabricksStorage``."""

    storage: DatabricksStorage

    # -- stores ---------------------------------------------------------------------------------

    async def create_store(self, request: Request) -> Response:
        store_id = check.store_id(request.query_params.get("managed_memory_store_id"))
        body = await read_json_object(request, allow_empty=True)
        display_name = check.optional(body, "display_name")
        if display_name is not None and display_name != store_id:
            # display_name is a deprecated alias of the id, not a second name.
            raise BadRequestError(
                f"display_name: must equal managed_memory_store_id {store_id!r} when given"
            )
        store = await self.storage.create_store(
            store_id,
            description=check.description(check.optional(body, "description")),
            creator=api_actor_of(request).id,
        )
        return JSONResponse(store.to_json())

    async def list_stores(self, request: Request) -> Response:
        size = check.effective_page_size(check.page_size(request.query_params.get("page_size")))
        after = None
        position = _page_position(request, _STORES_PAGE, "")
        if position is not None:
            after = position.get("id")
            if not isinstance(after, str):
                raise _bad_token()
        page = await self.storage.list_stores(after=after, limit=size)
        token = None if page.next is None else cursor.encode(_STORES_PAGE, "", {"id": page.next})
        return _listing("managed_memory_stores", [s.to_json() for s in page.items], token)

    async def get_store(self, request: Request) -> Response:
        store = await self.storage.get_store(request.path_params["store_id"])
        return JSONResponse(store.to_json())

    async def update_store(self, request: Request) -> Response:
        store_id = request.path_params["store_id"]
        mask = check.update_mask(
            request.query_params.get("update_mask"), ("description", "display_name")
        )
        body = await read_json_object(request, allow_empty=True)
        if "display_name" in mask and check.optional(body, "display_name") != store_id:
            raise BadRequestError("display_name: cannot be changed (it is the store's id)")
        if "description" not in mask:
            store = await self.storage.get_store(store_id)  # nothing to change
        else:
            description = check.description(check.optional(body, "description"))
            store = await self.storage.update_store(store_id, description=description)
        return JSONResponse(store.to_json())

    async def delete_store(self, request: Request) -> Response:
        await self.storage.delete_store(request.path_params["store_id"])
        return JSONResponse({})

    # -- entries --------------------------------------------------------------------------------

    async def create_entry(self, request: Request) -> Response:
        raw_id = request.query_params.get("managed_memory_entry_id")
        body = await read_json_object(request)
        entry = NewEntry(
            entry_id=check.entry_id(raw_id) if raw_id else None,
            actor_id=check.actor_id(body.get("actor_id")),
            session_id=check.session_id(body.get("session_id")),
            path=check.new_entry_path(body.get("path")),
            content=check.content(body.get("content")),
            description=check.description(body.get("description")),
            source_type=check.source_type(body.get("source_type")),
        )
        created = await self.storage.create_entry(request.path_params["store_id"], entry)
        return JSONResponse(created.to_json())

    async def get_entry(self, request: Request) -> Response:
        entry = await self.storage.get_entry(
            request.path_params["store_id"],
            request.path_params["entry_id"],
            with_content=check.full_view(request.query_params.get("view")),
        )
        return JSONResponse(entry.to_json())

    async def list_entries(self, request: Request) -> Response:
        params = request.query_params
        path = params.get("path")
        flt = EntryFilter(
            actor_id=check.actor_id(query_one(request, "actor_id")),
            path=check.entry_path(path) if path else None,
            path_prefix=check.path_prefix(params.get("path_prefix")),
            session_id=check.session_id(query_one(request, "session_id")),
        )
        if flt.path is not None and flt.path_prefix is not None:
            raise BadRequestError("path and path_prefix cannot be combined: send one of them")
        with_content = check.full_view(params.get("view"))
        size = check.effective_page_size(check.page_size(params.get("page_size")))
        query = cursor.query_digest(
            request.path_params["store_id"],
            flt.actor_id,
            flt.path,
            flt.path_prefix,
            None if flt.path is not None else flt.session_id,
        )
        after = None
        position = _page_position(request, _ENTRIES_PAGE, query)
        if position is not None:
            try:
                after = EntryPosition(str(position["p"]), str(position["s"]), str(position["i"]))
            except KeyError:
                raise _bad_token() from None
        page = await self.storage.list_entries(
            request.path_params["store_id"],
            flt,
            after=after,
            limit=size,
            with_content=with_content,
        )
        token = None
        if page.next is not None:
            token = cursor.encode(
                _ENTRIES_PAGE,
                query,
                {"p": page.next.path, "s": page.next.session_id, "i": page.next.entry_id},
            )
        return _listing("managed_memory_entries", [e.to_json() for e in page.items], token)

    async def update_entry(self, request: Request) -> Response:
        mask = check.update_mask(
            request.query_params.get("update_mask"), ("content", "description")
        )
        body = await read_json_object(request, allow_empty=True)
        # A masked field absent from the body is cleared (field-mask semantics); identity
        # fields the SDK sends along (actor_id, path, name, times) are ignored.
        fields: dict[str, str | None] = {}
        if "content" in mask:
            fields["content"] = check.content(body.get("content"))
        if "description" in mask:
            fields["description"] = check.description(body.get("description"))
        entry = await self.storage.update_entry(
            request.path_params["store_id"], request.path_params["entry_id"], EntryPatch(fields)
        )
        return JSONResponse(entry.to_json())

    async def delete_entry(self, request: Request) -> Response:
        await self.storage.delete_entry(
            request.path_params["store_id"], request.path_params["entry_id"]
        )
        return JSONResponse({})

    async def search_entries(self, request: Request) -> Response:
        body = await read_json_object(request)
        size = check.page_size(body.get("page_size"))
        limit = check.page_size(body.get("limit"), "limit")
        if size is not None and limit is not None and size != limit:
            raise BadRequestError(
                f"limit ({limit}) and page_size ({size}) differ: send page_size alone"
            )
        session = check.session_id(body.get("session_id"))
        search = SearchRequest(
            actor_id=check.actor_id(body.get("actor_id")),
            query=validate_query(body.get("query")),
            limit=check.effective_page_size(size if size is not None else limit),
            session_id=session,
            path_prefix=check.path_prefix(body.get("path_prefix")),
            session_less=check.session_less(body.get("memfs_session_less"), session),
        )
        hits = await self.storage.search_entries(
            request.path_params["store_id"],
            search,
            with_content=check.full_view(body.get("view")),
        )
        entries = [entry.to_json() for entry, _ in hits]
        # No next_page_token ever: the SDK re-POSTs while one is present.
        return JSONResponse(
            {
                "results": [
                    {"managed_memory_entry": entry, "score": score}
                    for entry, (_, score) in zip(entries, hits, strict=True)
                ],
                "managed_memory_entries": entries,
            }
        )

    # -- the SDK's start-up probe -----------------------------------------------------------------

    async def host_metadata(self, request: Request) -> Response:
        """404: the SDK then keeps its explicit configuration (a 429/503 would stall it)."""
        return JSONResponse(
            {"error_code": "NOT_FOUND", "message": "this server publishes no host metadata"},
            status_code=404,
        )


def databricks_route_table(routes: DatabricksRoutes) -> list[tuple[str, Any, list[str]]]:
    """(URL template, endpoint, methods) of every Databricks route."""
    stores = "/api/2.0/agents/memory-stores"
    store = stores + "/{store_id}"
    entries = store + "/entries"
    entry = entries + "/{entry_id}"
    return [
        ("/.well-known/databricks-config", routes.host_metadata, ["GET"]),
        (stores, routes.create_store, ["POST"]),
        (stores, routes.list_stores, ["GET"]),
        (store, routes.get_store, ["GET"]),
        (store, routes.update_store, ["PATCH"]),
        (store, routes.delete_store, ["DELETE"]),
        (entries + ":search", routes.search_entries, ["POST"]),
        (entries, routes.create_entry, ["POST"]),
        (entries, routes.list_entries, ["GET"]),
        (entry, routes.get_entry, ["GET"]),
        (entry, routes.update_entry, ["PATCH"]),
        (entry, routes.delete_entry, ["DELETE"]),
    ]
