"""Fault injection for the reference server: the middleware for ``create_app``'s fault slot.

Owns the fault settings (``FaultSpec``), parsing them from a one-line spec (``memfs server
--faults SPEC`` or the ``MEMFS_SERVER_FAULTS`` environment variable), the admin endpoint that
switches them at run time, and their effect on each request:

- ``latency=S``      every request waits S seconds before it is answered;
- ``error=P``        a fraction P of requests get a 500 ``api_error`` (not applied);
- ``overload=P``     a fraction P get a 529 ``overloaded_error`` (not applied);
- ``rate_limit=P``   a fraction P get a 429 ``rate_limit_error`` with ``retry-after``
                     (``retry_after=S``, default 1 second);
- ``drop=P``         a fraction P lose their connection before being applied;
- ``drop_after=P``   a fraction P are applied, then their answer is lost (the client cannot know
                     whether the write happened: the case idempotent creates exist for);
- ``outage=1``       every request loses its connection until switched off;
- ``methods=POST+DELETE`` limits the fractions (not latency or outage) to these methods;
- ``seed=N``         a reproducible random sequence.
A spec is comma-separated ``key=value`` pairs; ``none`` (or an empty string) is no fault.
Numbers must be finite: seconds from 0 to ``MAX_SECONDS``, fractions from 0 to 1 (an infinite
latency would hold every request forever); an error names the setting.

Admin endpoint: ``GET /v1/memfs/faults`` returns the current spec; ``PUT /v1/memfs/faults`` with
``{"spec": "..."}`` replaces it. It takes the server's admin key, never an API key, and is off
(404) on a server without one: ``ApiMiddleware`` checks that before this module sees the
request (``memfs.server.http.auth.ADMIN_PATHS``). It is answered even during an outage, so a
test can end one. ``GET /healthz`` and ``GET /metrics`` are never affected. Errors use the API's
envelope.

A lost connection is simulated by starting a response whose promised length is never sent:
the server closes the connection and the client sees it end mid-answer.

This module must not touch storage or routes; it only wraps the ASGI app.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
from dataclasses import dataclass, fields
from typing import Any

import trio
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memfs.contract.errors import ApiError, BadRequestError
from memfs.server.http.auth import FAULTS_PATH
from memfs.server.http.body import check_fields, read_json_object, text_field
from memfs.server.http.envelope import api_error_response, error_body, request_id_of
from memfs.server.http.query import decimal

log = logging.getLogger(__name__)

FAULTS_ENV = "MEMFS_SERVER_FAULTS"
ADMIN_PATH = FAULTS_PATH
MAX_SECONDS = 3600.0  # for latency and retry_after
_SECONDS = frozenset({"latency", "retry_after"})
_UNAFFECTED = frozenset({"/healthz", "/metrics", ADMIN_PATH})


class FaultSpecError(ValueError):
    """A fault spec that cannot be parsed; the message says which part."""


@dataclass(frozen=True)
class FaultSpec:
    latency: float = 0.0
    error: float = 0.0
    overload: float = 0.0
    rate_limit: float = 0.0
    retry_after: float = 1.0
    drop: float = 0.0
    drop_after: float = 0.0
    outage: bool = False
    methods: frozenset[str] = frozenset()
    seed: int | None = None

    @classmethod
    def parse(cls, text: str) -> FaultSpec:
        text = text.strip()
        if text in ("", "none"):
            return cls()
        values: dict[str, Any] = {}
        known = {f.name for f in fields(cls)}
        for part in text.split(","):
            key, sep, raw = part.strip().partition("=")
            key = key.strip().replace("-", "_")
            if not sep or key not in known:
                raise FaultSpecError(f"unknown fault setting {part.strip()!r}")
            values[key] = _parse_value(key, raw.strip())
        return cls(**values)

    def __str__(self) -> str:
        parts = []
        default = FaultSpec()
        for f in fields(self):
            value = getattr(self, f.name)
            if value == getattr(default, f.name):
                continue
            if f.name == "methods":
                parts.append("methods=" + "+".join(sorted(value)))
            elif f.name == "outage":
                parts.append("outage=1")
            else:
                parts.append(
                    f"{f.name}={value:g}" if isinstance(value, float) else f"{f.name}={value}"
                )
        return ",".join(parts) or "none"


def _parse_value(key: str, raw: str) -> Any:
    """The value of setting ``key``; ``FaultSpecError`` naming the setting if it is bad."""
    if key == "methods":
        return frozenset(m.strip().upper() for m in raw.split("+") if m.strip())
    if key == "outage":
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off"):
            return False
        raise FaultSpecError(f"invalid value for outage: {raw!r} (expected 1 or 0)")
    if key == "seed":
        seed = decimal(raw)  # ASCII digits only, as every integer the server reads
        if seed is not None:
            return seed
        raise FaultSpecError(f"invalid value for seed: {raw[:40]!r} (expected an integer)")
    limit = MAX_SECONDS if key in _SECONDS else 1.0
    expected = f"seconds from 0 to {limit:g}" if key in _SECONDS else "a fraction from 0 to 1"
    try:
        number = float(raw)
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and 0 <= number <= limit):
        raise FaultSpecError(f"invalid value for {key}: {raw[:40]!r} (expected {expected})")
    return number


def spec_from_env(environ: dict[str, str] | os._Environ[str] | None = None) -> FaultSpec | None:
    """The spec of ``MEMFS_SERVER_FAULTS``, or None when it is not set."""
    text = (environ if environ is not None else os.environ).get(FAULTS_ENV)
    return None if text is None else FaultSpec.parse(text)


def _error_body(scope: Scope, kind: str, message: str) -> bytes:
    return json.dumps(error_body(kind, message, request_id_of(scope))).encode()


class FaultMiddleware:
    """Applies a ``FaultSpec`` to every API request (see the module docstring)."""

    def __init__(self, app: ASGIApp, spec: FaultSpec | None = None) -> None:
        self.app = app
        self.counts: dict[str, int] = {}
        self.set_spec(spec or FaultSpec())

    def set_spec(self, spec: FaultSpec) -> None:
        self.spec = spec
        self._random = random.Random(spec.seed)
        log.warning("fault injection: %s", spec)

    @classmethod
    def factory(cls, spec: FaultSpec | None = None) -> Any:
        """A ``fault_middleware`` for ``create_app`` (``app -> FaultMiddleware``)."""
        return lambda app: cls(app, spec)

    def _count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path == ADMIN_PATH:
            await self._admin(scope, receive, send)
            return
        if path in _UNAFFECTED:
            await self.app(scope, receive, send)
            return
        spec = self.spec
        if spec.outage:
            self._count("outage")
            await _drop(send)
            return
        if spec.latency > 0:
            await trio.sleep(spec.latency)
        if spec.methods and scope["method"] not in spec.methods:
            await self.app(scope, receive, send)
            return
        roll = self._random.random()
        for name, share in (
            ("drop", spec.drop),
            ("drop_after", spec.drop_after),
            ("error", spec.error),
            ("overload", spec.overload),
            ("rate_limit", spec.rate_limit),
        ):
            if roll < share:
                self._count(name)
                await self._inject(name, scope, receive, send)
                return
            roll -= share
        await self.app(scope, receive, send)

    async def _inject(self, name: str, scope: Scope, receive: Receive, send: Send) -> None:
        if name == "drop":
            await _drop(send)
        elif name == "drop_after":

            async def swallow(message: Message) -> None:
                return None

            await self.app(scope, receive, swallow)
            await _drop(send)
        elif name == "error":
            body = _error_body(scope, "api_error", "injected fault: internal error")
            await _answer(send, 500, body)
        elif name == "overload":
            body = _error_body(scope, "overloaded_error", "injected fault: overloaded")
            await _answer(send, 529, body)
        else:
            retry_after = f"{self.spec.retry_after:g}"
            body = _error_body(scope, "rate_limit_error", "injected fault: rate limited")
            await _answer(send, 429, body, [(b"retry-after", retry_after.encode())])

    async def _admin(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The admin endpoint (the caller has shown the admin key: see the module docstring)."""
        request = Request(scope, receive)
        request_id = request_id_of(scope)
        try:
            if scope["method"] == "PUT":
                body = await read_json_object(request)
                check_fields(body, ("spec",))
                if "spec" not in body:
                    raise BadRequestError("spec: required")
                try:
                    spec = FaultSpec.parse(text_field(body["spec"], "spec"))
                except FaultSpecError as exc:
                    raise BadRequestError(f"spec: {exc}") from None
                self.set_spec(spec)
            elif scope["method"] != "GET":
                message = f"method not allowed: {scope['method']} {ADMIN_PATH} (use GET or PUT)"
                response = JSONResponse(
                    error_body("invalid_request_error", message, request_id),
                    status_code=405,
                    headers={"allow": "GET, PUT"},
                )
                await response(scope, receive, send)
                return
        except ApiError as exc:
            await api_error_response(exc, request_id)(scope, receive, send)
            return
        answer = {"type": "memfs_faults", "spec": str(self.spec), "counts": self.counts}
        await JSONResponse(answer)(scope, receive, send)


async def _answer(
    send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send(
        {"type": "http.response.start", "status": status, "headers": headers + (extra or [])}
    )
    await send({"type": "http.response.body", "body": body})


async def _drop(send: Send) -> None:
    """Lose the connection: promise a body and never send it (the server then closes)."""
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), (b"content-length", b"1000")],
        }
    )
    await send({"type": "http.response.body", "body": b"{", "more_body": False})


__all__ = ["FAULTS_ENV", "FaultMiddleware", "FaultSpec", "FaultSpecError", "spec_from_env"]
