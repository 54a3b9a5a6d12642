"""The HTTP layer of the reference server: routes, input validation, auth, the error envelope.

``create_app(storage, api_keys)`` returns an ASGI app. The stack, outside in:
1. ``ApiMiddleware`` (pure ASGI): mints the request id (``request-id`` header and envelope
   field), authenticates (``x-api-key`` or ``Authorization: Bearer``, which must agree when both
   are sent; GET /healthz and GET /metrics are open; the admin endpoints take the admin key
   only), checks ``anthropic-beta``, decides the actor, records metrics, and turns any
   unexpected exception into a logged 500 ``api_error`` envelope;
2. the *fault slot*: an optional ``fault_middleware(app) -> app`` wrapper for fault injection
   (``memfs.server.faults``; nothing is installed by default);
3. a Starlette app whose exception handlers render ``ApiError`` and routing errors (404, 405)
   as the envelope.

Actors: a request is attributed to ``{"type": "api_actor", "api_key_id": "apikey_…"}`` where the
id is a digest of the key (``ids.api_key_id``), or, when it carries the header
``memfs.models.SESSION_HEADER`` (``x-memfs-session-id: sesn_…``, URL-safe characters only, else
400), to ``{"type": "session_actor", "session_id": …}``. Redactions are always attributed to the
API key, since sessions have no redact capability.

The change stream (a memfs extension, only when ``create_app`` gets a ``ChangeHub``):
``GET /v1/memory_stores/{store_id}/memfs/changes`` answers Server-Sent Events, one
``memory_version`` event per committed version in commit order, ``id:`` = a resume cursor;
``GET /v1/memfs/capabilities`` says whether it is offered (see ``memfs.server.changes`` and
docs/server.md).

This module validates everything that does not depend on stored state and leaves the rest to
``Storage``. It must not contain SQL or know which backend it runs on.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import time
import unicodedata
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

import trio
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memfs import paths
from memfs.errors import (
    ApiError,
    AuthenticationError,
    BadRequestError,
    NotFoundError,
    OverloadedError,
    PermissionDeniedError,
    RequestTooLargeError,
)
from memfs.models import SESSION_HEADER, Actor, Memory, MemoryVersion, format_time, parse_time
from memfs.server import changes, cursor, ids, json_body
from memfs.server.metrics import CONTENT_TYPE, Metrics
from memfs.server.storage import (
    MAX_METADATA_PAIRS,
    MemoryPosition,
    MetadataPatch,
    Storage,
    StoreFilter,
    StorePosition,
    VersionFilter,
)

log = logging.getLogger(__name__)

MAX_CONTENT_BYTES = 102_400
MAX_BODY_BYTES = 1024 * 1024  # a full-size content with every character \u-escaped fits
MAX_NAME_CHARS = 255
MAX_DESCRIPTION_CHARS = 1024
MAX_METADATA_KEY_CHARS = 64
MAX_METADATA_VALUE_CHARS = 512
DEFAULT_LIMIT = 20
MAX_LIMIT = 100
MAX_FULL_VIEW_LIMIT = 20
MEMORY_BETA = "agent-memory-2026-07-22"
OLD_BETA = "managed-agents-2026-04-01"
OPEN_PATHS = frozenset({"/healthz", "/metrics"})
FAULTS_PATH = "/v1/memfs/faults"  # answered by memfs.server.faults when it is installed
# The operator's endpoints: they take the admin key (``create_app(admin_key=…)``), never an API
# key, and are off (404) when the server has none.
ADMIN_PATHS = frozenset({FAULTS_PATH})
MISSING_KEY = "invalid or missing API key (send it as x-api-key or Authorization: Bearer)"
MISSING_ADMIN_KEY = "invalid or missing admin key (send it as x-api-key or Authorization: Bearer)"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")

FaultMiddleware = Callable[[ASGIApp], ASGIApp]


# ---------------------------------------------------------------------------------------------
# The error envelope


def error_body(
    error_type: str, message: str, request_id: str, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    error: dict[str, Any] = {"type": error_type, "message": message}
    error.update(extra or {})
    return {"type": "error", "error": error, "request_id": request_id}


def api_error_response(exc: ApiError, request_id: str) -> JSONResponse:
    extra = {}
    details = exc.body.get("error") if isinstance(exc.body, dict) else None
    if isinstance(details, dict):
        extra = {k: v for k, v in details.items() if k not in ("type", "message")}
    return JSONResponse(
        error_body(exc.error_type, exc.message, request_id, extra), status_code=exc.status
    )


def _request_id(scope: Scope) -> str:
    return str(scope.get("state", {}).get("request_id", ""))


# ---------------------------------------------------------------------------------------------
# Input validation helpers (pure; raise BadRequestError / RequestTooLargeError)


def _bad(message: str) -> BadRequestError:
    return BadRequestError(message)


async def read_json_object(request: Request, *, allow_empty: bool = False) -> dict[str, Any]:
    """The request body as a JSON object; 413 past MAX_BODY_BYTES, 400 if it is not one."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise RequestTooLargeError(f"request body is larger than {MAX_BODY_BYTES} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise RequestTooLargeError(f"request body is larger than {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        if allow_empty:
            return {}
        raise _bad("request body must be a JSON object")
    data = json_body.decode(raw)
    if not isinstance(data, dict):
        raise _bad("request body must be a JSON object")
    return data


def check_fields(body: Mapping[str, Any], allowed: Sequence[str], *, where: str = "") -> None:
    for key in body:
        if key not in allowed:
            location = f" in {where}" if where else ""
            expected = ", ".join(allowed) if allowed else "none"
            raise _bad(f"unknown field {key!r}{location} (expected: {expected})")


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "string"


def text_field(value: Any, name: str) -> str:
    """``value`` as a string that is valid Unicode (no lone surrogates)."""
    if not isinstance(value, str):
        raise _bad(f"{name}: expected a string, got {_type_name(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _bad(f"{name}: not valid Unicode (contains a lone surrogate)") from None
    return value


def memory_path(value: Any, name: str = "path") -> str:
    path = text_field(value, name)
    try:
        return paths.validate_path(path)
    except paths.PathError as exc:
        raise _bad(f"{name}: {exc}") from None


def memory_content(value: Any) -> str:
    content = text_field(value, "content")
    size = len(content.encode("utf-8"))
    if size > MAX_CONTENT_BYTES:
        raise RequestTooLargeError(
            f"content: {size} bytes is more than the maximum of {MAX_CONTENT_BYTES} bytes"
        )
    return content


def sha256_field(value: Any, name: str) -> str:
    text = text_field(value, name)
    if not _SHA256.match(text):
        raise _bad(f"{name}: expected 64 lowercase hexadecimal characters")
    return text


def store_name(value: Any) -> str:
    name = text_field(value, "name")
    if not 1 <= len(name) <= MAX_NAME_CHARS:
        raise _bad(f"name: must be 1 to {MAX_NAME_CHARS} characters long")
    if any(unicodedata.category(ch) == "Cc" for ch in name):
        raise _bad("name: must not contain control characters")
    return name


def store_description(value: Any) -> str:
    description = text_field(value, "description")
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise _bad(f"description: must be at most {MAX_DESCRIPTION_CHARS} characters long")
    return description


def metadata_key(key: str) -> str:
    text_field(key, "metadata key")
    if not 1 <= len(key) <= MAX_METADATA_KEY_CHARS:
        raise _bad(f"metadata: keys must be 1 to {MAX_METADATA_KEY_CHARS} characters long")
    return key


def metadata_value(value: Any, key: str) -> str:
    text = text_field(value, f"metadata[{key!r}]")
    if len(text) > MAX_METADATA_VALUE_CHARS:
        raise _bad(
            f"metadata[{key!r}]: values must be at most {MAX_METADATA_VALUE_CHARS} characters"
        )
    return text


def store_metadata(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise _bad(f"metadata: expected an object, got {_type_name(value)}")
    if len(value) > MAX_METADATA_PAIRS:
        raise _bad(f"metadata: at most {MAX_METADATA_PAIRS} key-value pairs")
    return {metadata_key(k): metadata_value(v, k) for k, v in value.items()}


def metadata_patch(value: Any) -> MetadataPatch:
    if not isinstance(value, dict):
        raise _bad(f"metadata: expected an object, got {_type_name(value)}")
    changes: dict[str, str | None] = {}
    for key, item in value.items():
        changes[metadata_key(key)] = None if item is None else metadata_value(item, key)
    return MetadataPatch(changes)


def query_limit(request: Request, *, full: bool = False) -> int:
    raw = request.query_params.get("limit")
    if raw is None or raw == "":
        limit = DEFAULT_LIMIT
    else:
        try:
            limit = int(raw)
        except ValueError:
            raise _bad(f"limit: expected an integer from 1 to {MAX_LIMIT}") from None
        if not 1 <= limit <= MAX_LIMIT:
            raise _bad(f"limit: must be from 1 to {MAX_LIMIT}, got {limit}")
    return min(limit, MAX_FULL_VIEW_LIMIT) if full else limit


def query_view(request: Request, default: str) -> bool:
    """True for ``view=full``."""
    view = request.query_params.get("view") or default
    if view not in ("basic", "full"):
        raise _bad(f"view: expected 'basic' or 'full', got {view!r}")
    return view == "full"


def query_bool(request: Request, name: str) -> bool:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return False
    lowered = raw.lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise _bad(f"{name}: expected true or false, got {raw!r}")


def query_time(request: Request, name: str) -> Any:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        return parse_time(raw)
    except (ValueError, OverflowError):
        raise _bad(f"{name}: expected an RFC 3339 timestamp, got {raw!r}") from None


def query_text(request: Request, name: str) -> str | None:
    raw = request.query_params.get(name)
    return None if raw is None or raw == "" else raw


def page_position(request: Request, kind: str, query: str) -> dict[str, Any] | None:
    raw = request.query_params.get("page")
    if raw is None or raw == "":
        return None
    try:
        return cursor.decode(raw, kind, query)
    except cursor.CursorError as exc:
        raise _bad(str(exc)) from None


def _bad_cursor() -> BadRequestError:
    return _bad("page: not a valid page cursor")


def listing(data: list[dict[str, Any]], next_page: str | None) -> JSONResponse:
    return JSONResponse({"data": data, "next_page": next_page})


# ---------------------------------------------------------------------------------------------
# Routes


class Handlers:
    """The endpoint functions, bound to one ``Storage``."""

    def __init__(self, storage: Storage, hub: changes.ChangeHub | None = None) -> None:
        self.storage = storage
        self.hub = hub

    @staticmethod
    def actor(request: Request) -> Actor:
        return cast(Actor, request.state.actor)

    # -- stores -----------------------------------------------------------------------------------

    async def create_store(self, request: Request) -> Response:
        body = await read_json_object(request)
        check_fields(body, ("name", "description", "metadata"))
        if "name" not in body:
            raise _bad("name: required")
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
                raise _bad_cursor() from None
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

    # -- memories ---------------------------------------------------------------------------------

    async def create_memory(self, request: Request) -> Response:
        full = query_view(request, "basic")
        body = await read_json_object(request)
        check_fields(body, ("path", "content"))
        if "path" not in body:
            raise _bad("path: required")
        path = memory_path(body["path"])
        if body.get("content") is None:
            raise _bad('content: required (pass "" to create an empty memory)')
        content = memory_content(body["content"])
        memory = await self.storage.create_memory(
            request.path_params["store_id"], path=path, content=content, actor=self.actor(request)
        )
        return JSONResponse(memory.to_json(full=full))

    async def list_memories(self, request: Request) -> Response:
        store_id = request.path_params["store_id"]
        full = query_view(request, "basic")
        limit = query_limit(request, full=full)
        prefix = query_text(request, "path_prefix")
        if prefix is None:
            prefix = "/"
        else:
            text_field(prefix, "path_prefix")
            if not prefix.endswith("/"):
                raise _bad("path_prefix: must end with '/' (it matches whole segments)")
            try:
                paths.validate_prefix(prefix)
            except paths.PathError as exc:
                raise _bad(f"path_prefix: {exc}") from None
        raw_depth = query_text(request, "depth")
        if raw_depth is None or raw_depth == "0":
            depth = 0
        elif raw_depth == "1":
            depth = 1
        else:
            raise _bad(f"depth: expected 0 (whole subtree) or 1 (children only), got {raw_depth!r}")
        query = cursor.query_digest(store_id, prefix, depth)
        after = None
        position = page_position(request, "memories", query)
        if position is not None:
            key, inclusive = position.get("key"), position.get("inc")
            if not isinstance(key, str) or not isinstance(inclusive, bool):
                raise _bad_cursor()
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
        expected = None
        precondition = body.get("precondition")
        if precondition is not None:
            if not isinstance(precondition, dict):
                raise _bad(f"precondition: expected an object, got {_type_name(precondition)}")
            check_fields(precondition, ("type", "content_sha256"), where="precondition")
            if precondition.get("type") != "content_sha256":
                raise _bad("precondition.type: the only supported type is 'content_sha256'")
            if "content_sha256" not in precondition:
                raise _bad("precondition.content_sha256: required")
            expected = sha256_field(precondition["content_sha256"], "precondition.content_sha256")
        memory = await self.storage.update_memory(
            request.path_params["store_id"],
            request.path_params["memory_id"],
            content=content,
            path=path,
            expected_sha256=expected,
            actor=self.actor(request),
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
            actor=self.actor(request),
        )
        return JSONResponse({"id": memory_id, "type": "memory_deleted"})

    # -- versions ---------------------------------------------------------------------------------

    async def list_versions(self, request: Request) -> Response:
        store_id = request.path_params["store_id"]
        full = query_view(request, "basic")
        limit = query_limit(request, full=full)
        operation = query_text(request, "operation")
        if operation is not None and operation not in ("created", "modified", "deleted"):
            raise _bad(f"operation: expected 'created', 'modified' or 'deleted', got {operation!r}")
        flt = VersionFilter(
            memory_id=query_text(request, "memory_id"),
            operation=cast(Any, operation),
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
                raise _bad_cursor()
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
            actor=cast(Actor, request.state.api_actor),
        )
        return JSONResponse(version.to_json(full=True))

    # -- the change stream (memfs extension) -------------------------------------------------------

    async def capabilities(self, request: Request) -> Response:
        return JSONResponse(
            {
                "type": "memfs_capabilities",
                "change_stream": self.hub is not None,
                "change_stream_path": "/v1/memory_stores/{store_id}/memfs/changes",
            }
        )

    async def change_stream(self, request: Request) -> Response:
        hub = self.hub
        assert hub is not None  # the route exists only with a hub
        store_id = request.path_params["store_id"]
        full = query_view(request, "basic")
        raw = request.headers.get("last-event-id") or query_text(request, "after")
        if hub.closed:
            raise OverloadedError("the server is shutting down; reconnect to another replica")
        await self.storage.get_store(store_id)  # 404 before the stream starts
        sub = hub.subscribe(store_id)  # before reading storage: no change slips between
        try:
            if raw is None:
                newest = await self.storage.list_versions(
                    store_id, VersionFilter(), after=None, limit=1, with_content=False
                )
                start = newest.items[0].created_at if newest.items else changes.ORIGIN
            elif raw.startswith("memver_"):
                try:
                    start = (await self.storage.get_version(store_id, raw)).created_at
                except NotFoundError:
                    raise _bad(
                        f"after: memory version {raw!r} is not in this store (pruned?); "
                        "resynchronise and reconnect without it"
                    ) from None
            else:
                decoded = changes.decode_cursor(raw)
                if decoded is None:
                    raise _bad("after: expected a change-stream cursor or a memory version id")
                start = decoded
        except BaseException:
            sub.__exit__(None, None, None)
            raise
        return StreamingResponse(
            self._change_events(sub, start, full),
            media_type="text/event-stream",
            headers={
                "cache-control": "no-store",
                "x-accel-buffering": "no",
                "connection": "close",  # a reconnect opens a fresh connection (another replica)
            },
        )

    async def _versions_after(
        self, store_id: str, after: datetime, full: bool
    ) -> AsyncIterator[list[MemoryVersion]]:
        """Every version of the store created after ``after``, oldest first, a page at a time
        (a long backlog after a reconnect is never held in memory at once)."""
        flt = VersionFilter(created_gte=after + timedelta(microseconds=1))
        page: int | None = None
        while True:
            result = await self.storage.list_versions(
                store_id, flt, after=page, limit=MAX_LIMIT, with_content=full, oldest_first=True
            )
            yield result.items
            if result.next is None:
                return
            page = result.next

    async def _change_events(
        self, sub: changes.Subscription, position: datetime, full: bool
    ) -> AsyncIterator[str]:
        hub = sub.hub
        with sub:
            cursor_text = changes.encode_cursor(position)
            ready = json.dumps({"type": "ready", "cursor": cursor_text})
            yield f"event: ready\nid: {cursor_text}\ndata: {ready}\n\n"
            while True:
                try:
                    async for versions in self._versions_after(sub.store_id, position, full):
                        for version in versions:
                            position = version.created_at
                            data = json.dumps(version.to_json(full=full), separators=(",", ":"))
                            yield (
                                f"event: memory_version\nid: {changes.encode_cursor(position)}\n"
                                f"data: {data}\n\n"
                            )
                except NotFoundError as exc:  # the store was deleted
                    body = json.dumps(error_body(exc.error_type, exc.message, ""))
                    yield f"event: error\ndata: {body}\n\n"
                    return
                if hub.closed:
                    return
                with trio.move_on_after(hub.heartbeat) as idle:
                    await sub.wait()
                if hub.closed:
                    return
                if idle.cancelled_caught:
                    yield ": heartbeat\n\n"

    # -- operations -------------------------------------------------------------------------------

    async def healthz(self, request: Request) -> Response:
        await self.storage.ping()
        return JSONResponse({"status": "ok"})


def _routes(handlers: Handlers, metrics: Metrics) -> list[Route]:
    async def metrics_endpoint(request: Request) -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    stores = "/v1/memory_stores"
    store = stores + "/{store_id}"
    memory = store + "/memories/{memory_id}"
    version = store + "/memory_versions/{version_id}"
    h = handlers
    return [
        Route("/healthz", h.healthz, methods=["GET"]),
        Route("/metrics", metrics_endpoint, methods=["GET"]),
        Route(stores, h.create_store, methods=["POST"]),
        Route(stores, h.list_stores, methods=["GET"]),
        Route(store, h.get_store, methods=["GET"]),
        Route(store, h.update_store, methods=["POST"]),
        Route(store, h.delete_store, methods=["DELETE"]),
        Route(store + "/archive", h.archive_store, methods=["POST"]),
        Route(store + "/memories", h.list_memories, methods=["GET"]),
        Route(store + "/memories", h.create_memory, methods=["POST"]),
        Route(memory, h.get_memory, methods=["GET"]),
        # The contract says PATCH; the official SDK sends POST. Both update.
        Route(memory, h.update_memory, methods=["PATCH", "POST"]),
        Route(memory, h.delete_memory, methods=["DELETE"]),
        Route(store + "/memory_versions", h.list_versions, methods=["GET"]),
        Route(version, h.get_version, methods=["GET"]),
        Route(version + "/redact", h.redact_version, methods=["POST"]),
        Route("/v1/memfs/capabilities", h.capabilities, methods=["GET"]),
        *(
            [Route(store + "/memfs/changes", h.change_stream, methods=["GET"])]
            if h.hub is not None
            else []
        ),
    ]


async def _on_api_error(request: Request, exc: Exception) -> Response:
    return api_error_response(cast(ApiError, exc), _request_id(request.scope))


async def _on_http_error(request: Request, exc: Exception) -> Response:
    http = cast(HTTPException, exc)
    rid = _request_id(request.scope)
    where = f"{request.method} {request.url.path}"
    if http.status_code == 404:
        body = error_body("not_found_error", f"no such endpoint: {where}", rid)
    elif http.status_code == 405:
        body = error_body("invalid_request_error", f"method not allowed: {where}", rid)
    else:
        body = error_body("invalid_request_error", str(http.detail), rid)
    return JSONResponse(body, status_code=http.status_code, headers=http.headers)


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    # ApiMiddleware logs the traceback (Starlette re-raises after this response).
    return JSONResponse(
        error_body("api_error", "internal server error", _request_id(request.scope)),
        status_code=500,
    )


# ---------------------------------------------------------------------------------------------
# The outer middleware


class ApiMiddleware:
    """Request id, auth, beta check, actor, metrics and the last-resort 500 (see module doc)."""

    def __init__(
        self,
        app: ASGIApp,
        api_keys: Sequence[str],
        metrics: Metrics,
        routes: Sequence[Route] = (),
        admin_key: str | None = None,
    ) -> None:
        self.app = app
        self._routes = list(routes)
        self._keys = [key.encode("utf-8") for key in api_keys if key]
        self._admin_key = admin_key.encode("utf-8") if admin_key else None
        self.metrics = metrics

    def _is_api_key(self, presented: bytes) -> bool:
        found = False
        for key in self._keys:  # every key compared: the time taken tells nothing
            found |= hmac.compare_digest(presented, key)
        return found

    def _admit_admin(self, scope: Scope) -> ApiError | None:
        """Admin endpoints take the admin key only; without one configured they are off."""
        if self._admin_key is None:
            return NotFoundError(
                f"{scope['path']} is off: this server has no admin key "
                "(start it with MEMFS_ADMIN_KEY or --admin-key-file)"
            )
        presented = presented_key(scope, missing=MISSING_ADMIN_KEY)
        if isinstance(presented, ApiError):
            return presented
        if hmac.compare_digest(presented, self._admin_key):
            return None
        if self._is_api_key(presented):
            return PermissionDeniedError(f"{scope['path']} needs the admin key, not an API key")
        return AuthenticationError(MISSING_ADMIN_KEY)

    def _admit(self, scope: Scope) -> ApiError | None:
        """Check auth, beta header and session header; put the actors into ``scope['state']``."""
        if scope["method"] in ("GET", "HEAD") and scope["path"] in OPEN_PATHS:
            return None
        if scope["path"] in ADMIN_PATHS:
            return self._admit_admin(scope)
        presented = presented_key(scope)
        if isinstance(presented, ApiError):
            return presented
        if not self._is_api_key(presented):
            return AuthenticationError(MISSING_KEY)
        key = presented.decode("utf-8")
        query = scope.get("query_string", b"")
        if "\x00" in scope["path"] or b"%00" in query or b"\x00" in query:
            # No id, path or filter holds one, and PostgreSQL text cannot carry one at all.
            return BadRequestError("the URL must not contain NUL characters (%00)")
        betas: set[str] = set()
        session: str | None = None
        for name, value in scope.get("headers", []):
            lowered = name.decode("latin-1").lower()
            if lowered == "anthropic-beta":
                betas.update(b.strip() for b in value.decode("latin-1").split(","))
            elif lowered == SESSION_HEADER:
                session = value.decode("latin-1").strip()
        if MEMORY_BETA in betas and OLD_BETA in betas:
            return BadRequestError(
                f"anthropic-beta: send {MEMORY_BETA} without {OLD_BETA}, not both"
            )
        api_actor = Actor("api_actor", ids.api_key_id(key))
        state = scope.setdefault("state", {})
        state["api_actor"] = api_actor
        state["actor"] = api_actor
        if session is not None:
            if not ids.is_session_id(session):
                return BadRequestError(
                    f"{SESSION_HEADER}: expected 'sesn_' followed by letters, digits, '-' or '_'"
                )
            state["actor"] = Actor("session_actor", session)
        return None

    def _match(self, scope: Scope) -> Route | None:
        """The route a refused request was meant for (for its metrics label)."""
        for route in self._routes:
            match, _ = route.matches(scope)
            if match is not Match.NONE:
                return route
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = ids.new_request_id()
        scope.setdefault("state", {})["request_id"] = request_id
        started = time.perf_counter()
        status = 500
        response_started = False

        async def send_wrapper(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                response_started = True
                status = int(message["status"])
                MutableHeaders(scope=message)["request-id"] = request_id
            await send(message)

        try:
            refusal = self._admit(scope)
            if refusal is not None:
                scope.setdefault("route", self._match(scope))
                response = api_error_response(refusal, request_id)
                await response(scope, receive, send_wrapper)
            else:
                await self.app(scope, receive, send_wrapper)
        except Exception:
            log.exception(
                "unexpected error answering %s %s (request_id %s)",
                scope["method"],
                _route_of(scope),
                request_id,
            )
            if not response_started:
                response = JSONResponse(
                    error_body("api_error", "internal server error", request_id), status_code=500
                )
                await response(scope, receive, send_wrapper)
        finally:
            self.metrics.observe(
                scope["method"], _route_of(scope), status, time.perf_counter() - started
            )


def presented_key(scope: Scope, missing: str = MISSING_KEY) -> bytes | AuthenticationError:
    """The one key the request presents, or why it presents none.

    Every credential counts: each ``x-api-key`` header and each ``Authorization`` header. They
    must all name the same key: a request whose credentials disagree (a valid key and a wrong
    one, or two different keys) is refused rather than judged by whichever comes first. An
    ``Authorization`` header that is not ``Bearer <token>`` is a credential no key matches.
    """
    presented: set[bytes | None] = set()
    for name, value in scope.get("headers", []):
        lowered = name.lower()
        if lowered == b"x-api-key":
            presented.add(value.strip())
        elif lowered == b"authorization":
            scheme, _, token = value.strip().partition(b" ")
            is_bearer = scheme.lower() == b"bearer" and token.strip()
            presented.add(token.strip() if is_bearer else None)
    if len(presented) > 1:
        return AuthenticationError(
            "the request carries different credentials (x-api-key and Authorization, or the "
            "same header twice); send one key"
        )
    key = presented.pop() if presented else None
    if not key:
        return AuthenticationError(missing)
    return key


def _route_of(scope: Scope) -> str:
    route = scope.get("route")
    template = getattr(route, "path", None)
    return template if isinstance(template, str) else "unmatched"


def create_app(
    storage: Storage,
    api_keys: Sequence[str],
    *,
    metrics: Metrics | None = None,
    fault_middleware: FaultMiddleware | None = None,
    change_hub: changes.ChangeHub | None = None,
    admin_key: str | None = None,
) -> ApiMiddleware:
    """The ASGI app of the reference server on ``storage``, accepting ``api_keys``.

    With ``change_hub`` the change stream is offered; the hub must be fed (``NotifyingStorage``
    around ``storage``, or a ``PgListener``). ``admin_key`` opens the admin endpoints
    (``ADMIN_PATHS``: fault control, when ``fault_middleware`` provides it) to that key alone."""
    if not any(api_keys):
        raise ValueError("the server needs at least one API key")
    if admin_key is not None and admin_key in api_keys:
        raise ValueError("the admin key must differ from every API key")
    metrics = metrics or Metrics()
    routes = _routes(Handlers(storage, change_hub), metrics)
    starlette = Starlette(
        routes=routes,
        exception_handlers={
            ApiError: _on_api_error,
            HTTPException: _on_http_error,
            Exception: _on_unexpected,
        },
    )
    starlette.router.redirect_slashes = False
    inner: ASGIApp = starlette if fault_middleware is None else fault_middleware(starlette)
    return ApiMiddleware(inner, api_keys, metrics, routes, admin_key=admin_key)


__all__ = ["ApiMiddleware", "FaultMiddleware", "create_app"]
