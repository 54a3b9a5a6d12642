"""The reference server's ASGI app: ``create_app`` puts the pieces of the HTTP layer together.

``create_app(storage, api_keys)`` returns an ASGI app. The stack, outside in:
1. ``http.middleware.ApiMiddleware``: the request id, admission (``http.auth``: API keys, the
   admin key, ``anthropic-beta``, the actor), metrics, and the last-resort 500;
2. the *fault slot*: an optional ``fault_middleware(app) -> app`` wrapper for fault injection
   (``memfs.server.http.faults``; nothing is installed by default);
3. a Starlette app of ``routes.build_routes`` (the URL table; endpoints read requests with
   each API's ``validation`` and ``http.query``), whose exception
   handlers (``envelopes.EXCEPTION_HANDLERS``) render errors as the API's envelope; and, unless
   ``console=False``, the console (``memfs.server.console``) mounted at ``/console``: an auth
   domain of its own (its session cookie), which the API middleware admits without a key.

The HTTP layer validates everything that does not depend on stored state and leaves the rest
to ``Storage``. It must not contain SQL or know which backend it runs on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp

from memfs.server.backends.storage import Storage
from memfs.server.db.notify import ChangeHub
from memfs.server.envelopes import EXCEPTION_HANDLERS, error_response_for
from memfs.server.http.auth import CONSOLE_PATH
from memfs.server.http.metrics import Metrics
from memfs.server.http.middleware import DEFAULT_BODY_TIMEOUT, ApiMiddleware
from memfs.server.mcp.endpoint import DEFAULT_MCP_HOSTS
from memfs.server.routes import build_routes

log = logging.getLogger(__name__)

FaultMiddleware = Callable[[ASGIApp], ASGIApp]


def create_app(
    storage: Storage,
    api_keys: Sequence[str],
    *,
    metrics: Metrics | None = None,
    fault_middleware: FaultMiddleware | None = None,
    change_hub: ChangeHub | None = None,
    admin_key: str | None = None,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    mcp_hosts: Sequence[str] = DEFAULT_MCP_HOSTS,
    console: bool = True,
) -> ApiMiddleware:
    """The ASGI app of the reference server on ``storage``, accepting ``api_keys``.

    With ``change_hub`` the change stream is offered; the hub must be fed (a ``SqliteStorage``
    opened with ``hub``, or a ``PgListener``). ``admin_key`` opens the admin endpoints
    (``http.auth.ADMIN_PATHS``: fault control, when ``fault_middleware`` provides it) to that key
    alone. A request body gets ``body_timeout`` seconds to arrive (else 408). The MCP endpoints
    answer clients that name the server by one of ``mcp_hosts`` (``mcp.endpoint``: the Host
    header's name, any port). ``console``: serve the console at ``/console``."""
    if not any(api_keys):
        raise ValueError("the server needs at least one API key")
    if admin_key is not None and admin_key in api_keys:
        raise ValueError("the admin key must differ from every API key")
    metrics = metrics or Metrics()
    routes = build_routes(storage, change_hub, metrics, mcp_hosts)
    app_routes: list[BaseRoute] = [*routes]
    if console:
        from memfs.server.console import create_console  # Jinja2 is loaded only when served

        app_routes += [
            Route(CONSOLE_PATH, _to_console, methods=["GET"]),
            Mount(
                CONSOLE_PATH,
                app=create_console(storage, api_keys, hub=change_hub, metrics=metrics),
            ),
        ]
    starlette = Starlette(routes=app_routes, exception_handlers=EXCEPTION_HANDLERS)
    starlette.router.redirect_slashes = False
    inner: ASGIApp = starlette if fault_middleware is None else fault_middleware(starlette)
    return ApiMiddleware(
        inner,
        api_keys,
        metrics,
        routes,
        admin_key=admin_key,
        body_timeout=body_timeout,
        console=console,
        error_response=error_response_for,
    )


async def _to_console(request: Request) -> Response:
    return RedirectResponse(CONSOLE_PATH + "/", status_code=308)


__all__ = ["ApiMiddleware", "FaultMiddleware", "create_app"]
