"""The outer middleware of the reference server: what happens to every request, route or not.

``ApiMiddleware`` (pure ASGI) wraps the whole app (``app.create_app``). For each HTTP request it
1. mints the request id (``ids.new_request_id``): the ``request-id`` header of every answer,
   and the ``request_id`` of every error envelope (kept in ``scope["state"]``);
2. admits it or refuses it (``auth.Gatekeeper``: keys, admin key, beta and session headers,
   actors); a refusal is answered here with the envelope and never reaches the routes;
3. records it in ``metrics.Metrics`` under its route template (``route_of``: ``unmatched``
   when no route matched), whatever the outcome, and in the access log when there is one
   (``access_log``);
4. turns any exception that escapes into a logged 500 ``api_error`` envelope (when the answer
   has not started yet), so one bad request never takes the server down.

This module must not know the routes' URLs or validate bodies.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from starlette.datastructures import MutableHeaders
from starlette.responses import JSONResponse
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memfs.server import ids
from memfs.server.access_log import log_request
from memfs.server.auth import Gatekeeper
from memfs.server.databricks_envelope import is_databricks_path
from memfs.server.envelope import error_body, error_response_for
from memfs.server.metrics import Metrics

log = logging.getLogger(__name__)


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
        self._gate = Gatekeeper(api_keys, admin_key)
        self.metrics = metrics

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
            refusal = self._gate.admit(scope)
            if refusal is not None:
                scope.setdefault("route", self._match(scope))
                response = error_response_for(scope, refusal, request_id)
                await response(scope, receive, send_wrapper)
            else:
                await self.app(scope, receive, send_wrapper)
        except Exception:
            log.exception(
                "unexpected error answering %s %s (request_id %s)",
                scope["method"],
                route_of(scope),
                request_id,
            )
            if not response_started:
                body = error_body("api_error", "internal server error", request_id)
                if is_databricks_path(scope["path"]):
                    body = {"error_code": "INTERNAL_ERROR", "message": "internal server error"}
                response = JSONResponse(body, status_code=500)
                await response(scope, receive, send_wrapper)
        finally:
            elapsed = time.perf_counter() - started
            self.metrics.observe(scope["method"], route_of(scope), status, elapsed)
            log_request(scope["method"], route_of(scope), status, elapsed, request_id)


def route_of(scope: Scope) -> str:
    """The template of the route that answered (its metrics label), or ``unmatched``."""
    route = scope.get("route")
    template = getattr(route, "path", None)
    return template if isinstance(template, str) else "unmatched"
