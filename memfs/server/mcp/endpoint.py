"""The MCP endpoints of the reference server: a store's memory tools over streamable HTTP.

``/v1/memory_stores/{store_id}/mcp`` (Memory Stores, written as the request's actor: its key,
or its session header) and ``/api/2.0/agents/memory-stores/{store_id}/mcp?actor_id=A
[&session_id=S]`` (one actor's entries, a session's or the session-less ones). ``read_only=true``
on either asks for the read tools only; each of ``read_only``, ``actor_id`` and ``session_id``
given twice is a 400 naming it (``http.query.query_one``: the last one must not undo the first).
They are admitted as every route is (``http.middleware.ApiMiddleware``: x-api-key or Bearer, else
401), then answered by the official SDK's ``StreamableHTTPSessionManager`` in its stateless
mode with JSON answers: every request carries all it needs, so any replica answers any request,
and nothing is kept between them.

The tools a store gets depend on the store (its API, read-only or not), so each request gets a
server of its own (``memfs.mcp.app.build_server`` over an API's ``mcp_backend``)
and a session manager of its own, whose task group lives as long as the request: there is no
session to keep, and a whole call, both built, takes 3-5 ms, less than the two or three REST
requests of the same work (docs/benchmarks.md, *MCP server*, over HTTP).

Host and Origin are checked against ``allowed_hosts`` (the SDK's DNS-rebinding protection): a
web page the user visits cannot reach a server on their machine through a name it controls.
A refused Host is 421, a refused Origin 403 (the SDK's answers).

The SDK is imported at the first MCP request, not at start-up (its import costs ~1.5 s of CPU;
a server without the ``mcp`` extra answers these routes 501). This module must not import the
client (``memfs.api``) nor ``memfs.mcp.store_backend`` (import-linter contracts).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from memfs.contract.errors import ApiError, BadRequestError
from memfs.mcp.backend import MemoryBackend, StoreInfo
from memfs.server.backends.storage import Storage
from memfs.server.databricks import validation as dbx_valid
from memfs.server.databricks.mcp_backend import DatabricksBackend
from memfs.server.http.auth import actor_of
from memfs.server.http.query import query_one
from memfs.server.memory_stores.mcp_backend import MemoryStoresBackend

log = logging.getLogger(__name__)
# The SDK logs three info lines for every stateless request (manager started, session
# terminated, manager stopped): noise beside the access log, one per request.
for _chatty in ("mcp.server.streamable_http_manager", "mcp.server.streamable_http"):
    logging.getLogger(_chatty).setLevel(logging.WARNING)

MEMORY_STORES_MCP_PATH = "/v1/memory_stores/{store_id}/mcp"
DATABRICKS_MCP_PATH = "/api/2.0/agents/memory-stores/{store_id}/mcp"
DEFAULT_MCP_HOSTS = ("127.0.0.1", "localhost", "[::1]")  # create_app's: a loopback server
# a tool call carries at most two texts of a memory's size (str_replace's old_str and new_str,
# 100 KiB each), which JSON may \u-escape to 6 bytes a character: the REST routes' 1 MiB would
# refuse a legitimate call
MAX_BODY = 2 * 1024 * 1024


class NotInstalledError(ApiError):
    """The server was installed without the ``mcp`` extra."""

    status = 501
    error_type = "api_error"


def allowed_host_names(bind_host: str, extra: Sequence[str] = ()) -> list[str]:
    """The names a client may reach the MCP endpoints by (the Host header, port aside): the
    loopback names for a loopback or wildcard bind, the bound address otherwise, and ``extra``
    (``memfs server --mcp-host``: the names a proxy or DNS gives the server)."""
    host = bind_host.strip("[]")
    names: list[str] = []
    if host in ("", "0.0.0.0", "::") or host in ("localhost", "::1") or host.startswith("127."):
        names += ["127.0.0.1", "localhost", "[::1]"]
    if host not in ("", "0.0.0.0", "::"):
        names.append(f"[{host}]" if ":" in host else host)
    names += [name.strip() for name in extra if name.strip()]
    return list(dict.fromkeys(names))


class McpEndpoint:
    """Answers both MCP routes (module docstring); an ASGI app for a Starlette ``Route``."""

    def __init__(self, storage: Storage, allowed_hosts: Sequence[str]) -> None:
        self.storage = storage
        self.allowed_hosts = list(allowed_hosts)

    def _security(self) -> Any:
        from mcp.server.transport_security import TransportSecuritySettings

        hosts = [h for name in self.allowed_hosts for h in (name, f"{name}:*")]
        origins = [f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")]
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
            from mcp.server.transport_security import TransportSecurityMiddleware

            from memfs.mcp.app import build_server
        except ImportError as exc:  # pragma: no cover - the test environment has the extra
            raise NotInstalledError(
                "this server has no MCP support: install memfs[mcp] where it runs"
            ) from exc
        request = Request(scope, receive)
        security = self._security()
        # Host and Origin first, before the store is looked up: a name the server does not
        # answer to learns nothing (the SDK checks them again in its transport).
        refusal = await TransportSecurityMiddleware(security).validate_request(
            request, is_post=True
        )
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        backend = await self._backend(request)
        manager = StreamableHTTPSessionManager(
            build_server(backend),
            json_response=True,
            stateless=True,
            security_settings=security,
            max_request_body_size=MAX_BODY,
        )
        async with manager.run():
            await manager.handle_request(scope, receive, send)

    async def _backend(self, request: Request) -> MemoryBackend:
        store_id = request.path_params["store_id"]
        read_only = _flag(request, "read_only")
        if request.url.path.startswith("/api/"):
            return await self._databricks(request, store_id, read_only)
        store = await self.storage.get_store(store_id)  # NotFoundError: the 404 envelope
        info = StoreInfo(
            api="memory-stores",
            name=store.name,
            read_only=read_only or store.archived,
            history=True,
            descriptions=False,
            renames_keep_id=True,
            description=store.description,
        )
        return MemoryStoresBackend(self.storage, store.id, actor_of(request), info)

    async def _databricks(self, request: Request, store_id: str, read_only: bool) -> MemoryBackend:
        store_id = dbx_valid.store_id(store_id, "store_id")
        actor = dbx_valid.actor_id(query_one(request, "actor_id"))
        session = dbx_valid.session_id(query_one(request, "session_id"))
        store = await self.storage.databricks.get_store(store_id)
        in_session = f", session {session}" if session else ""
        info = StoreInfo(
            api="databricks",
            name=f"{store.id} (actor {actor}{in_session})",
            read_only=read_only,
            history=False,
            descriptions=True,
            renames_keep_id=False,
            description=store.description or "",
        )
        return DatabricksBackend(self.storage.databricks, store.id, actor, session, info)


def _flag(request: Request, name: str) -> bool:
    value = query_one(request, name)
    if value is None or value in ("false", "0"):
        return False
    if value in ("true", "1", ""):
        return True
    raise BadRequestError(f"{name}: expected true or false")
