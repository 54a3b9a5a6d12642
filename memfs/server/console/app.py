"""The console's ASGI app: its routes, its error pages and the headers on every answer.

``create_console(storage, api_keys)`` returns ``ConsoleApp``, which ``memfs.server.app`` mounts
at ``/console``. Outside in:
1. ``ConsoleApp`` puts ``security.SECURITY_HEADERS`` (the CSP…) on every answer, errors and
   static files included, and ``Cache-Control: no-store`` on every answer that sets none;
   refuses a URL holding a NUL (400, as the API does); names the route in the scope as
   ``/console/…`` for the metrics and the access log (templates only, never ids or paths); and
   answers an exception that escapes with a logged 500 page;
2. a Starlette app of the page groups' routes (``pages``) and the static files, whose
   exception handlers turn a missing session into a redirect to the sign-in page and an
   ``ApiError`` (unknown store or memory, a refused form, a cross-site POST) into a page with
   the status and its one-line message.

Static files (``static/``: the stylesheet) are read once, at start-up, and served from memory
by name: no path of the request reaches the file system.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memfs.contract.errors import ApiError
from memfs.server.backends.storage import Storage
from memfs.server.console import live
from memfs.server.console.context import SIGN_IN_PATH, Console, PageGroup, SignInRequiredError
from memfs.server.console.pages.databricks import DatabricksPages
from memfs.server.console.pages.history import HistoryPages
from memfs.server.console.pages.memory import MemoryPages
from memfs.server.console.pages.sign_in import SignInPages
from memfs.server.console.pages.store import StorePages
from memfs.server.console.pages.stores import StoresPages
from memfs.server.console.ratelimit import Limits, SignInLimiter
from memfs.server.console.rendering import Renderer
from memfs.server.console.security import CONSOLE_PATH, PAGE_CACHE, SECURITY_HEADERS
from memfs.server.console.sessions import SessionKeeper
from memfs.server.console.sql import SqlConsole
from memfs.server.db.notify import ChangeHub
from memfs.server.http.metrics import Metrics

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
STATIC_TYPES = {
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}
STATIC_CACHE = "public, max-age=300"
# The page groups, each a class of ``pages`` made on the ``Console``, whose ``routes()`` are its
# URLs; a new group is a line.
PAGE_GROUPS: tuple[Callable[[Console], PageGroup], ...] = (
    SignInPages,
    StoresPages,
    StorePages,
    MemoryPages,
    HistoryPages,
    DatabricksPages,
)
SERVER_ERROR = "Something went wrong on the server (it is in the server's log)."


class _RouteLabel(NamedTuple):
    """What ``http.middleware.route_of`` reads of a route: its template, under ``/console``."""

    path: str


def static_routes() -> list[Route]:
    routes: list[Route] = []
    for file in sorted(STATIC.iterdir()):
        media_type = STATIC_TYPES.get(file.suffix)
        if media_type is None or not file.is_file():
            continue
        body = file.read_bytes()

        async def serve(
            request: Request, body: bytes = body, media_type: str = media_type
        ) -> Response:
            return Response(body, media_type=media_type, headers={"cache-control": STATIC_CACHE})

        routes.append(Route(f"/static/{file.name}", serve, methods=["GET"]))
    return routes


def create_console(
    storage: Storage,
    api_keys: Sequence[str],
    *,
    limits: Limits | None = None,
    hub: ChangeHub | None = None,
    metrics: Metrics | None = None,
) -> ConsoleApp:
    """The console on ``storage``, signing in with ``api_keys`` (see the module docstring);
    with ``hub`` its pages are live (``live``)."""
    console_storage = SqlConsole(storage)
    console = Console(
        storage=storage,
        console_storage=console_storage,
        sessions=SessionKeeper(console_storage, api_keys),
        limiter=SignInLimiter(limits),
        renderer=Renderer(),
        hub=hub,
        metrics=metrics or Metrics(),
    )
    routes: list[BaseRoute] = [*static_routes()]
    for group in PAGE_GROUPS:
        routes += group(console).routes()
    routes += live.routes(console)

    async def signed_out(request: Request, exc: Exception) -> Response:
        return RedirectResponse(SIGN_IN_PATH, status_code=303)

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return await error_page(request, exc.status, exc.message)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        message = "There is no such page." if exc.status_code == 404 else str(exc.detail)
        return await error_page(request, exc.status_code, message)

    async def error_page(request: Request, status: int, message: str) -> Response:
        signed_in = await console.sessions.current(request)
        return console.renderer.page(
            request, "error.html", signed_in=signed_in, status=status, error=message,
            title="Not found" if status == 404 else "Refused",
        )  # fmt: skip

    async def server_error(request: Request, exc: Exception) -> Response:
        # no session lookup: the database may be what failed (``ConsoleApp`` logs it)
        return console.renderer.page(
            request, "error.html", signed_in=None, status=500, title="Error", error=SERVER_ERROR
        )

    handlers: dict[Any, Any] = {
        Exception: server_error,
        SignInRequiredError: signed_out,
        ApiError: refused,
        HTTPException: http_error,
    }
    app = Starlette(routes=routes, exception_handlers=handlers)
    app.router.redirect_slashes = False
    return ConsoleApp(app, console)


class ConsoleApp:
    """Headers, the NUL check, the route label and the last-resort 500 (module docstring)."""

    def __init__(self, app: ASGIApp, console: Console) -> None:
        self.app = app
        self.console = console

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
                if "cache-control" not in headers:
                    headers["cache-control"] = PAGE_CACHE
            await send(message)

        try:
            if "\x00" in scope["path"] or b"%00" in scope.get("query_string", b""):
                response = self.console.renderer.page(
                    Request(scope), "error.html", signed_in=None, status=400, title="Refused",
                    error="The URL must not contain NUL characters (%00).",
                )  # fmt: skip
                await response(scope, receive, send_with_headers)
            else:
                await self.app(scope, receive, send_with_headers)
        except Exception:
            log.exception("console: unexpected error answering %s", _label(scope))
            if not started:
                response = self.console.renderer.page(
                    Request(scope), "error.html", signed_in=None, status=500, title="Error",
                    error=SERVER_ERROR,
                )  # fmt: skip
                await response(scope, receive, send_with_headers)
        finally:
            route = scope.get("route")
            if isinstance(route, Route):
                scope["route"] = _RouteLabel(_label(scope))
            else:
                scope.pop("route", None)  # unmatched


def _label(scope: Scope) -> str:
    route = scope.get("route")
    if isinstance(route, Route):
        return CONSOLE_PATH + route.path
    return "unmatched"
