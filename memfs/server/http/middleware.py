"""The outer middleware of the reference server: what happens to every request, route or not.

``ApiMiddleware`` (pure ASGI) wraps the whole app (``app.create_app``). For each HTTP request it
1. mints the request id (``ids.new_request_id``): the ``request-id`` header of every answer,
   and the ``request_id`` of every error envelope (kept in ``scope["state"]``);
2. admits it or refuses it (``auth.Gatekeeper``: keys, admin key, beta and session headers,
   actors); a refusal is answered here with the envelope and never reaches the routes;
3. gives its body ``body_timeout`` seconds to arrive, from the first time the app reads it
   (``_BodyClock``): past that the read raises ``RequestTimeoutError``, a 408 that says
   ``connection: close`` (the rest of the body is not read);
4. records it in ``metrics.Metrics`` under its route template (``route_of``: ``unmatched``
   when no route matched), whatever the outcome, and in the access log when there is one
   (``access_log``). A client that hung up before its answer (mid-body, say) is counted and logged
   with ``CLIENT_CLOSED`` (499, nginx's "client closed request"; never sent), an info line;
5. turns any other exception that escapes into a logged 500 (when the answer has not started
   yet), so one bad request never takes the server down.
Errors are answered in the envelope ``error_response`` picks (the request's API's).

This module must not know the routes' URLs or validate bodies.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

import trio
from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memfs.contract.errors import ApiError, RequestTimeoutError
from memfs.server.db import ids
from memfs.server.http.access_log import log_request
from memfs.server.http.auth import Gatekeeper
from memfs.server.http.envelope import api_error_response
from memfs.server.http.metrics import Metrics, method_label

log = logging.getLogger(__name__)

DEFAULT_BODY_TIMEOUT = 30.0  # seconds for a whole body (at most 1 MiB) to arrive
CLIENT_CLOSED = 499  # the status counted for a client that hung up; never sent

# How an error is answered: (scope, error, request id) -> the response in the envelope of the
# request's API (``memfs.server.envelopes.error_response_for``).
ErrorResponse = Callable[[Scope, ApiError, str], Response]


def _memory_stores_envelope(scope: Scope, exc: ApiError, request_id: str) -> Response:
    return api_error_response(exc, request_id)


class _BodyClock:
    """``receive`` with a deadline for the request body: ``timeout`` seconds from the first
    read until the last chunk (a client that sends a byte a minute holds no handler for ever).
    Reads after the body (a stream waiting for the client to hang up) have no deadline.
    ``close_connection``: the answer must end its HTTP/1 connection (the body timed out, so
    the rest of it is not read; or its framing is ambiguous, ``auth.Gatekeeper`` refuses it)."""

    def __init__(self, receive: Receive, scope: Scope, timeout: float, request_id: str) -> None:
        self._receive = receive
        self._timeout = timeout
        self._request_id = request_id
        self._deadline: float | None = None
        headers = Headers(scope=scope)
        declared = headers.get("content-length", "0").strip()
        # HTTP/2 (with --h2c) may send a body without a length: its end is awaited there.
        self._http1 = str(scope.get("http_version", "1.1")).startswith("1")
        # True once the whole body has arrived (or the client is gone), or it will not be read.
        self._done = self._http1 and declared in ("", "0") and "transfer-encoding" not in headers
        ambiguous = "content-length" in headers and "transfer-encoding" in headers
        self.close_connection = self._http1 and ambiguous

    async def __call__(self) -> Message:
        if self._done:
            return await self._receive()
        if self._deadline is None:
            self._deadline = trio.current_time() + self._timeout
        with trio.move_on_at(self._deadline):
            message = await self._receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                self._done = True
            return message
        self._done = True
        self.close_connection = self._http1  # HTTP/2 has no such header: the stream ends
        log.info(
            "a request body did not arrive within %g s: answering 408 (request_id %s)",
            self._timeout,
            self._request_id,
        )
        raise RequestTimeoutError(f"the request body did not arrive within {self._timeout:g} s")


class ApiMiddleware:
    """Request id, auth, beta check, actor, metrics and the last-resort 500 (see module doc)."""

    def __init__(
        self,
        app: ASGIApp,
        api_keys: Sequence[str],
        metrics: Metrics,
        routes: Sequence[Route] = (),
        admin_key: str | None = None,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
        *,
        console: bool = False,
        error_response: ErrorResponse = _memory_stores_envelope,
    ) -> None:
        self.app = app
        self._error_response = error_response
        self._routes = list(routes)
        self._gate = Gatekeeper(api_keys, admin_key, console=console)
        self.metrics = metrics
        self.body_timeout = body_timeout

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
        # What the logs and metrics name: any token is a method to h11, up to a 64 KiB head.
        method = method_label(scope["method"])
        started = time.perf_counter()
        status = 500
        response_started = False
        body_clock = _BodyClock(receive, scope, self.body_timeout, request_id)

        async def send_wrapper(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                response_started = True
                status = int(message["status"])
                headers = MutableHeaders(scope=message)
                headers["request-id"] = request_id
                # Memory content is agent-written: no browser may guess it is HTML and run it.
                headers["x-content-type-options"] = "nosniff"
                if body_clock.close_connection:
                    headers["connection"] = "close"
            await send(message)

        try:
            refusal = self._gate.admit(scope)
            if refusal is not None:
                scope.setdefault("route", self._match(scope))
                response = self._error_response(scope, refusal, request_id)
                await response(scope, body_clock, send_wrapper)
            else:
                await self.app(scope, body_clock, send_wrapper)
        except ClientDisconnect:
            status = CLIENT_CLOSED
            log.info(
                "client closed the connection before its answer: %s %s (request_id %s)",
                method,
                route_of(scope),
                request_id,
            )
        except RequestTimeoutError as exc:  # read outside a route (logged by ``_BodyClock``)
            if not response_started:
                answer = self._error_response(scope, exc, request_id)
                await answer(scope, body_clock, send_wrapper)
        except Exception:
            log.exception(
                "unexpected error answering %s %s (request_id %s)",
                method,
                route_of(scope),
                request_id,
            )
            if not response_started:
                internal = ApiError("internal server error", status=500)
                answer = self._error_response(scope, internal, request_id)
                await answer(scope, receive, send_wrapper)
        finally:
            elapsed = time.perf_counter() - started
            self.metrics.observe(method, route_of(scope), status, elapsed)
            log_request(method, route_of(scope), status, elapsed, request_id)


def route_of(scope: Scope) -> str:
    """The template of the route that answered (its metrics label), or ``unmatched``."""
    route = scope.get("route")
    template = getattr(route, "path", None)
    return template if isinstance(template, str) else "unmatched"
