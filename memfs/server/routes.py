"""The URL table of the reference server: every URL, its method and the endpoint that answers it.

``build_routes`` maps each API's URLs onto its endpoints: the Memory Stores API's
(``memory_stores.routes``, and its change stream ``memory_stores.stream``), the Databricks
API's (``databricks.routes``, ``databricks.stream``), the MCP endpoints (``mcp.endpoint``), and
what no API owns, answered here: ``/healthz``, ``/metrics`` and ``/v1/memfs/capabilities`` (the
extensions this server offers, of both APIs). An endpoint reads its request with its API's
``validation`` and ``http.query``, calls its storage and renders the answer; whatever it raises
becomes the error envelope (``envelopes``). Routes must not contain SQL or know which backend
they run on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from memfs.server.backends.storage import Storage
from memfs.server.databricks.routes import DatabricksRoutes, databricks_route_table
from memfs.server.databricks.stream import DBX_CHANGE_STREAM_PATH, DatabricksChangeStream
from memfs.server.db.notify import ChangeHub
from memfs.server.http.metrics import CONTENT_TYPE, Metrics
from memfs.server.mcp.endpoint import (
    DATABRICKS_MCP_PATH,
    DEFAULT_MCP_HOSTS,
    MEMORY_STORES_MCP_PATH,
    McpEndpoint,
)
from memfs.server.memory_stores.routes.memories import MemoryRoutes
from memfs.server.memory_stores.routes.search import SearchRoutes
from memfs.server.memory_stores.routes.stores import StoreRoutes
from memfs.server.memory_stores.routes.versions import VersionRoutes
from memfs.server.memory_stores.stream import CHANGE_STREAM_PATH, SEARCH_PATH, EventStream

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

    async def capabilities(request: Request) -> Response:
        return JSONResponse(
            {
                "type": "memfs_capabilities",
                "change_stream": hub is not None,
                "change_stream_path": CHANGE_STREAM_PATH,
                "search": True,  # the reference server always indexes (memfs.server.search)
                "search_path": SEARCH_PATH,
                # the Databricks routes' change stream (memfs.server.databricks.stream)
                "databricks_change_stream": hub is not None,
                "databricks_change_stream_path": DBX_CHANGE_STREAM_PATH,
                # entries:search takes "memfs_session_less": true (databricks.routes)
                "databricks_search_session_less": True,
                # no "refuses_nul" (announced before schema step 10): a Memory Stores content
                # may hold NUL, so a mount grows files by truncate (http.body.text_field)
            }
        )

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
        Route("/v1/memfs/capabilities", capabilities, methods=["GET"]),
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
