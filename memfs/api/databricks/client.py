"""The HTTP client of Databricks Agent Memory's entry endpoints (``/api/2.0/agents/memory-stores``).

``DatabricksClient`` is a ``memfs.api.transport.Transport`` (one pooled httpx client, timeouts,
the one retry policy of ``memfs.contract.retry``: 429 and 503 are retried, with ``Retry-After``)
that speaks the Databricks dialect: a Bearer token, no Anthropic headers, and the error
envelope ``{"error_code": ..., "message": ...}`` mapped to ``memfs.contract.errors``
(``error_for``). Its endpoints return ``Entry`` records; ``memfs.api.databricks.store`` makes
memories of them.

Retried writes stay safe, as ``StoreClient``'s do: a create retried after a lost answer that
meets ``ALREADY_EXISTS`` for an entry with the same key and content is that entry; a delete
retried after a lost answer that meets ``NOT_FOUND`` is done. The wire contract is
``docs/databricks-agent-memory.md``; it must not know files or cache anything.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypedDict, Unpack

import httpx
import trio

from memfs.api.client import CAPABILITIES
from memfs.api.pagination import Pager
from memfs.api.transport import Transport, parse_answer, query_params
from memfs.contract.errors import (
    ApiError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InternalServerError,
    NotFoundError,
    PathConflictError,
    PermissionDeniedError,
    RateLimitError,
    StoreFullError,
    api_error_class,
)
from memfs.contract.models import JsonObject, Page, parse_time
from memfs.contract.retry import retry_after_seconds

log = logging.getLogger(__name__)

# Route templates: the keys of RequestStats and of the DEBUG log (never URLs: paths are data).
STORE = "/api/2.0/agents/memory-stores/{store}"
ENTRIES = "/api/2.0/agents/memory-stores/{store}/entries"
ENTRY = "/api/2.0/agents/memory-stores/{store}/entries/{entry}"
SEARCH = "/api/2.0/agents/memory-stores/{store}/entries:search"

VIEW_BASIC = "MANAGED_MEMORY_ENTRY_VIEW_BASIC"  # no content
VIEW_FULL = "MANAGED_MEMORY_ENTRY_VIEW_FULL"
PAGE_SIZE = 100  # the API's largest page

# error_code -> class; the codes the contract's clients branch on (docs/databricks-agent-memory.md,
# "Errors")
_BY_CODE: dict[str, type[ApiError]] = {
    "NOT_FOUND": NotFoundError,
    "RESOURCE_DOES_NOT_EXIST": NotFoundError,
    "ALREADY_EXISTS": PathConflictError,  # an exclusive create met a taken (actor, session, path)
    "RESOURCE_ALREADY_EXISTS": PathConflictError,
    "INVALID_PARAMETER_VALUE": BadRequestError,
    "UNAUTHENTICATED": AuthenticationError,
    "PERMISSION_DENIED": PermissionDeniedError,
    "ABORTED": ConflictError,
    "REQUEST_LIMIT_EXCEEDED": RateLimitError,
    "UNAVAILABLE": InternalServerError,
    "TEMPORARILY_UNAVAILABLE": InternalServerError,
}


def error_for(status: int, error_code: str | None, message: str) -> type[ApiError]:
    """The ``memfs.contract.errors`` class of a Databricks error answer.

    ``RESOURCE_EXHAUSTED`` means two things: throttling when it comes with 429 (transient,
    retried), a full store otherwise (``StoreFullError``: ENOSPC, the create parked until room
    appears). Unknown codes are classed by status, as the Databricks SDK does."""
    if error_code == "RESOURCE_EXHAUSTED":
        return RateLimitError if status == 429 else StoreFullError
    cls = _BY_CODE.get(error_code or "")
    if cls is not None and not (cls is InternalServerError and status < 500):
        return cls
    return api_error_class(status, None, message)


class FreshHeaders(httpx.Auth):
    """Headers from a factory at every request (the SDK's, for tokens it refreshes), made in
    a worker thread: a refresh is a blocking request of the SDK's own."""

    def __init__(self, factory: Callable[[], dict[str, str]]) -> None:
        self._factory = factory

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        request.headers.update(await trio.to_thread.run_sync(self._factory))
        yield request


class DatabricksTransport(Transport):
    """``Transport`` with the Databricks dialect: no Anthropic headers, its error envelope."""

    def refresh_headers_with(self, factory: Callable[[], dict[str, str]]) -> None:
        """Credential headers from ``factory`` at each request (call before any request)."""
        self._http.auth = FreshHeaders(factory)

    def _api_headers(self) -> dict[str, str]:
        return {}

    def _error_answer(self, response: httpx.Response, route: str) -> ApiError:
        try:
            body = response.json()
        except ValueError:
            body = None
        code: str | None = None
        message = f"HTTP {response.status_code} from {route}"
        if isinstance(body, dict):
            code = body["error_code"] if isinstance(body.get("error_code"), str) else None
            if isinstance(body.get("message"), str) and body["message"]:
                message = body["message"]
        cls = error_for(response.status_code, code, message)
        return cls(
            message,
            status=response.status_code,
            error_type=code or cls.error_type,
            request_id=response.headers.get("x-request-id"),
            body=body if isinstance(body, dict) else None,
            retry_after=retry_after_seconds(response.headers),
        )


@dataclass(frozen=True)
class Entry:
    """One memory entry as the API returns it (``content`` None in the BASIC view)."""

    id: str
    actor_id: str
    session_id: str | None
    path: str
    content: str | None
    description: str
    create_time: datetime
    update_time: datetime

    @classmethod
    def from_json(cls, data: JsonObject) -> Entry:
        name = str(data["name"])  # memory-stores/{store}/entries/{entry}
        entry_id = name.rsplit("/entries/", 1)[1]
        session = data.get("session_id")
        content = data.get("content")
        created = parse_time(data["create_time"])
        return cls(
            id=entry_id,
            actor_id=str(data["actor_id"]),
            session_id=str(session) if session else None,
            path=str(data["path"]),
            content=str(content) if content is not None else None,
            description=str(data.get("description") or ""),
            create_time=created,
            update_time=parse_time(data["update_time"]) if data.get("update_time") else created,
        )


class EntryFilters(TypedDict, total=False):
    """What a listing of an actor's entries selects (unset: no filter; ``view`` VIEW_FULL)."""

    session_id: str | None
    path: str | None
    path_prefix: str | None
    view: str


class DatabricksClient(DatabricksTransport):
    """The entry endpoints of one Databricks workspace (host and token in its ``config``)."""

    async def get_store(self, store_id: str) -> JsonObject:
        return await self._call("GET", STORE, {"store": store_id})

    async def capabilities(self) -> JsonObject:
        """memfs server's extensions, one try (a Databricks workspace answers 404)."""
        return await self.with_options(max_retries=0)._call("GET", CAPABILITIES, {})

    async def list_entries_page(
        self,
        store_id: str,
        actor_id: str,
        *,
        page_token: str | None = None,
        **filters: Unpack[EntryFilters],
    ) -> Page[Entry]:
        query = query_params(
            actor_id=actor_id,
            **{"view": VIEW_FULL, **filters},
            page_size=PAGE_SIZE,
            page_token=page_token,
        )
        data = await self._call("GET", ENTRIES, {"store": store_id}, query=query)
        items = data.get("managed_memory_entries", [])
        if not isinstance(items, list):
            raise ApiError(f"malformed answer from {ENTRIES}: no entry list", status=200)
        token = data.get("next_page_token")
        return Page(
            [parse_answer(Entry.from_json, item, ENTRIES) for item in items],
            token if isinstance(token, str) and token else None,
        )

    def list_entries(
        self, store_id: str, actor_id: str, **filters: Unpack[EntryFilters]
    ) -> AsyncIterator[Entry]:
        """Every entry the filters select, following pages (a repeated token is an error)."""

        async def fetch(token: str | None) -> Page[Entry]:
            return await self.list_entries_page(store_id, actor_id, page_token=token, **filters)

        return Pager(fetch)

    async def get_entry(self, store_id: str, entry_id: str, *, view: str = VIEW_FULL) -> Entry:
        data = await self._call(
            "GET", ENTRY, {"store": store_id, "entry": entry_id}, query=query_params(view=view)
        )
        return parse_answer(Entry.from_json, data, ENTRY)

    async def create_entry(
        self,
        store_id: str,
        actor_id: str,
        session_id: str | None,
        path: str,
        content: str,
        description: str | None = None,
    ) -> Entry:
        """An exclusive create (``PathConflictError`` for a taken key), reconciled after a lost
        answer (module docstring)."""
        body: JsonObject = {"actor_id": actor_id, "path": path, "content": content}
        if session_id is not None:
            body["session_id"] = session_id
        if description:
            body["description"] = description
        body["source_type"] = "MANAGED_MEMORY_ENTRY_SOURCE_TYPE_AGENT"
        reply = await self._exchange("POST", ENTRIES, {"store": store_id}, body=body)
        if reply.error is None:
            return parse_answer(Entry.from_json, reply.data, ENTRIES)
        if reply.lost_answer and isinstance(reply.error, PathConflictError):
            async for entry in self.list_entries(store_id, actor_id, path=path):
                ours = (entry.path, entry.session_id, entry.content) == (path, session_id, content)
                if ours:
                    log.info(
                        "create of %s was applied by an attempt whose answer was lost", entry.id
                    )
                    return entry
        raise reply.error

    async def update_entry(
        self,
        store_id: str,
        entry_id: str,
        *,
        content: str | None = None,
        description: str | None = None,
    ) -> Entry:
        """PATCH the given fields (the mask names them); the whole entry comes back."""
        body: JsonObject = {}
        if content is not None:
            body["content"] = content
        if description is not None:
            body["description"] = description
        mask = ",".join(body)
        data = await self._call(
            "PATCH",
            ENTRY,
            {"store": store_id, "entry": entry_id},
            query=query_params(update_mask=mask),
            body=body,
        )
        return parse_answer(Entry.from_json, data, ENTRY)

    async def delete_entry(self, store_id: str, entry_id: str) -> None:
        reply = await self._exchange("DELETE", ENTRY, {"store": store_id, "entry": entry_id})
        if reply.error is not None:
            if reply.lost_answer and isinstance(reply.error, NotFoundError):
                log.info("entry %s was deleted by an attempt whose answer was lost", entry_id)
                return
            raise reply.error

    async def search_entries(
        self,
        store_id: str,
        actor_id: str,
        query: str,
        *,
        session_id: str | None = None,
        session_less: bool = False,
        path_prefix: str | None = None,
        page_size: int = 10,
    ) -> list[tuple[Entry, float]]:
        """``entries:search``: the best entries of the actor with their contents and scores,
        best first. A search changes nothing: retried like a read. ``results`` is the canonical
        answer; one with only the deprecated ``managed_memory_entries`` has no scores (0.0 each,
        in its order).

        Args:
            session_id: search this session's entries only.
            session_less: search the entries of no session (memfs server's extension
                ``memfs_session_less``; other servers ignore it).
            path_prefix: search below this path only.
            page_size: how many entries (1-100).
        """
        body: JsonObject = {
            "actor_id": actor_id,
            "query": query,
            "page_size": page_size,
            "view": VIEW_FULL,
        }
        if session_id is not None:
            body["session_id"] = session_id
        if session_less:
            body["memfs_session_less"] = True
        if path_prefix is not None:
            body["path_prefix"] = path_prefix
        data = await self._call("POST", SEARCH, {"store": store_id}, body=body)
        results = data.get("results")
        if isinstance(results, list):
            return [
                (
                    parse_answer(Entry.from_json, hit["managed_memory_entry"], SEARCH),
                    float(hit.get("score") or 0.0),
                )
                for hit in results
            ]
        entries = data.get("managed_memory_entries", [])
        if not isinstance(entries, list):
            raise ApiError(f"malformed answer from {SEARCH}: no results", status=200)
        return [(parse_answer(Entry.from_json, item, SEARCH), 0.0) for item in entries]
