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

Admin endpoint (behind the API key, like every route): ``GET /v1/memfs/faults`` returns the
current spec; ``PUT /v1/memfs/faults`` with ``{"spec": "..."}`` replaces it. It is answered even
during an outage, so a test can end one. ``GET /healthz`` is never affected.

A lost connection is simulated by starting a response whose promised length is never sent:
the server closes the connection and the client sees it end mid-answer.

This module must not touch storage or routes; it only wraps the ASGI app.
"""

from __future__ import annotations

import json
import logging
import os
import random
from dataclasses import dataclass, fields
from typing import Any

import trio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

FAULTS_ENV = "MEMFS_SERVER_FAULTS"
ADMIN_PATH = "/v1/memfs/faults"
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
            raw = raw.strip()
            try:
                if key == "methods":
                    values[key] = frozenset(m.strip().upper() for m in raw.split("+") if m.strip())
                elif key == "outage":
                    values[key] = raw.lower() in ("1", "true", "yes", "on")
                elif key == "seed":
                    values[key] = int(raw)
                else:
                    number = float(raw)
                    if number < 0 or (key not in ("latency", "retry_after") and number > 1):
                        raise ValueError(raw)
                    values[key] = number
            except ValueError:
                raise FaultSpecError(f"invalid value for {key}: {raw!r}") from None
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


def spec_from_env(environ: dict[str, str] | os._Environ[str] | None = None) -> FaultSpec | None:
    """The spec of ``MEMFS_SERVER_FAULTS``, or None when it is not set."""
    text = (environ if environ is not None else os.environ).get(FAULTS_ENV)
    return None if text is None else FaultSpec.parse(text)


def _error_body(kind: str, message: str) -> bytes:
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": None}
    return json.dumps(body).encode()


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
            await _answer(send, 500, _error_body("api_error", "injected fault: internal error"))
        elif name == "overload":
            await _answer(send, 529, _error_body("overloaded_error", "injected fault: overloaded"))
        else:
            retry_after = f"{self.spec.retry_after:g}"
            body = _error_body("rate_limit_error", "injected fault: rate limited")
            await _answer(send, 429, body, [(b"retry-after", retry_after.encode())])

    async def _admin(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] == "PUT":
            raw = b""
            while True:
                message = await receive()
                raw += message.get("body", b"")
                if not message.get("more_body"):
                    break
            try:
                data = json.loads(raw or b"{}")
                if not isinstance(data, dict) or not isinstance(data.get("spec", ""), str):
                    raise FaultSpecError('expected {"spec": "..."}')
                self.set_spec(FaultSpec.parse(data.get("spec", "")))
            except (ValueError, FaultSpecError) as exc:
                message_text = str(exc) if isinstance(exc, FaultSpecError) else "invalid JSON"
                await _answer(send, 400, _error_body("invalid_request_error", message_text))
                return
        elif scope["method"] != "GET":
            await _answer(send, 405, _error_body("invalid_request_error", "use GET or PUT"))
            return
        body = json.dumps({"type": "memfs_faults", "spec": str(self.spec), "counts": self.counts})
        await _answer(send, 200, body.encode())


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
