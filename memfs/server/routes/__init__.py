"""The routes of the reference server: every URL, its method and the endpoint that answers it.

``build_routes`` is the one table (URL template → endpoint); the endpoints live by resource:
``stores`` (``StoreRoutes``), ``memories`` (``MemoryRoutes``), ``versions``
(``VersionRoutes``), ``search`` (``SearchRoutes``, the search extension), ``databricks``
(``DatabricksRoutes``: the Databricks Agent Memory API on ``Storage.databricks``, listed by
``databricks_route_table``), ``memfs.server.event_stream`` (the change stream and the
capabilities it announces) and ``memfs.server.databricks_stream`` (the Databricks one).
``memfs.server.mcp_endpoint`` the MCP tools of a store (both APIs) over streamable HTTP.
``/healthz`` and ``/metrics`` are answered here. An endpoint reads
its request with ``memfs.server.validation`` (bodies) and ``memfs.server.query`` (parameters,
pages), calls ``Storage`` and renders the answer; whatever it raises becomes the error envelope
(``memfs.server.envelope``). Routes must not contain SQL or know which backend they run on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from memfs.server.databricks_stream import DBX_CHANGE_STREAM_PATH, DatabricksChangeStream
from memfs.server.db.notify import ChangeHub
from memfs.server.event_stream import CHANGE_STREAM_PATH, SEARCH_PATH, EventStream
from memfs.server.mcp_endpoint import (
    DATABRICKS_MCP_PATH,
    DEFAULT_MCP_HOSTS,
    MEMORY_STORES_MCP_PATH,
    McpEndpoint,
)
from memfs.server.metrics import CONTENT_TYPE, Metrics
from memfs.server.routes.databricks import DatabricksRoutes, databricks_route_table
from memfs.server.routes.memories import MemoryRoutes
from memfs.server.routes.search import SearchRoutes
from memfs.server.routes.stores import StoreRoutes
from memfs.server.routes.versions import VersionRoutes
from memfs.server.storage import Storage

log = logging.getLogger(__name__)


def build_routes(
    storage: Storage,
    hub: ChangeHub | None,
    metrics: Metrics,
    mcp_hosts: Sequence[str] = DEFAULT_MCP_HOSTS,
) -> list[Route]:
    """Every route of the server on ``storage``; the change streams only with a ``hub``; the
    MCP endpoints answer clients that name the server by one of ``mcp_hosts``."""

    async def healthz(request: Request) -> Response:
        await storage.ping()
        return JSONResponse({"status": "ok"})

    async def metrics_endpoint(request: Request) -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    s, m, v = StoreRoutes(storage), MemoryRoutes(storage), VersionRoutes(storage)
    events = EventStream(storage, hub, metrics)
    stores = "/v1/memory_stores"
    store = stores + "/{store_id}"
    memory = store + "/memories/{memory_id}"
    version = store + "/memory_versions/{version_id}"
    mcp = McpEndpoint(storage, mcp_hosts)
    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics_endpoint, methods=["GET"]),
        Route(stores, s.create_store, methods=["POST"]),
        Route(stores, s.list_stores, methods=["GET"]),
        Route(store, s.get_store, methods=["GET"]),
        Route(store, s.update_store, methods=["POST"]),
        Route(store, s.delete_store, methods=["DELETE"]),
        Route(store + "/archive", s.archive_store, methods=["POST"]),
        Route(store + "/memories", m.list_memories, methods=["GET"]),
        Route(store + "/memories", m.create_memory, methods=["POST"]),
        Route(memory, m.get_memory, methods=["GET"]),
        # The contract says PATCH; the official SDK sends POST. Both update.
        Route(memory, m.update_memory, methods=["PATCH", "POST"]),
        Route(memory, m.delete_memory, methods=["DELETE"]),
        Route(store + "/memory_versions", v.list_versions, methods=["GET"]),
        Route(version, v.get_version, methods=["GET"]),
        Route(version + "/redact", v.redact_version, methods=["POST"]),
        Route(SEARCH_PATH, SearchRoutes(storage).search, methods=["POST"]),
        Route("/v1/memfs/capabilities", events.capabilities, methods=["GET"]),
        # streamable HTTP, stateless: POST only. The spec lets a server without server-initiated
        # messages answer GET with 405; the SDK would hold an empty SSE stream open for ever
        # (stateless mode), and DELETE ends a session, of which there are none.
        Route(MEMORY_STORES_MCP_PATH, mcp, methods=["POST"]),
        Route(DATABRICKS_MCP_PATH, mcp, methods=["POST"]),
        *(
            Route(path, endpoint, methods=methods)
            for path, endpoint, methods in databricks_route_table(
                DatabricksRoutes(storage.databricks)
            )
        ),
        *(
            [
                Route(CHANGE_STREAM_PATH, events.change_stream, methods=["GET"]),
                Route(
                    DBX_CHANGE_STREAM_PATH,
                    DatabricksChangeStream(storage.databricks, hub, metrics).stream,
                    methods=["GET"],
                ),
            ]
            if hub is not None
            else []
        ),
    ]
