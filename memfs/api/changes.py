"""Client of the change stream, a memfs extension of the API (the hosted API does not have it).

``server_offers_change_stream(config)`` asks ``GET /v1/memfs/capabilities``; anything but a
clear yes (404 on the hosted API, an error, a timeout) means "no": poll ``memory_versions``.

``ChangeStream(config, store_id, after=cursor)`` is an async iterator of ``ChangeEvent``s read
from ``GET /v1/memory_stores/{store}/memfs/changes`` (Server-Sent Events):
- ``kind="ready"`` once per (re)connection, when the server has subscribed: every change
  committed from then on will arrive. ``cursor`` is the position the stream starts after;
- ``kind="memory_version"`` for each committed version, oldest first, with ``version``
  (``view=basic``: no content) and ``cursor`` (its resume position).
When the connection drops, or the server closes the stream (shutdown, load balancer timeout), it
reconnects with backoff and ``Last-Event-ID: <last cursor>``; the server replays what came after
it, so no change is missed or repeated. ``stream.cursor`` is the last position seen: persist it to
resume after a restart (``after=``). A cursor, or a ``memver_…`` id, is accepted as ``after``;
without it the stream starts at the store's newest version (no replay).

Errors that retrying cannot fix are raised from the iterator: ``NotFoundError`` (the store was
deleted, or the server has no change stream), ``AuthenticationError``, ``BadRequestError`` (for
example a ``memver_`` id that was pruned: resynchronise, then reconnect without ``after``).

Like ``client``, this module owns its httpx use; it must not log the key or URLs with paths.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal
from urllib.parse import quote

import httpx
import trio

from memfs.config import API_VERSION, MEMORY_BETA, SESSION_HEADER, ClientConfig
from memfs.errors import (
    ApiConnectionError,
    ApiError,
    AuthenticationError,
    BadRequestError,
    NotFoundError,
    PermissionDeniedError,
    api_error_class,
)
from memfs.models import MemoryVersion

log = logging.getLogger(__name__)

CAPABILITIES = "/v1/memfs/capabilities"
CHANGES = "/v1/memory_stores/{store}/memfs/changes"
# Errors a reconnect cannot fix: they end the iteration.
_FATAL = (AuthenticationError, PermissionDeniedError, NotFoundError, BadRequestError)


@dataclass(frozen=True)
class ChangeEvent:
    kind: Literal["ready", "memory_version"]
    cursor: str
    version: MemoryVersion | None = None


def _headers(config: ClientConfig) -> dict[str, str]:
    headers = {
        "x-api-key": config.api_key.reveal(),
        "anthropic-version": API_VERSION,
        "anthropic-beta": MEMORY_BETA,
        "user-agent": config.user_agent,
    }
    if config.session_id:
        headers[SESSION_HEADER] = config.session_id
    return headers


def _error(response: httpx.Response, body: Any) -> ApiError:
    error = body.get("error") if isinstance(body, dict) else None
    error_type = error.get("type") if isinstance(error, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    text = message if isinstance(message, str) and message else f"HTTP {response.status_code}"
    cls = api_error_class(response.status_code, error_type, text)
    return cls(
        text,
        status=response.status_code,
        error_type=error_type if isinstance(error_type, str) else None,
        request_id=response.headers.get("request-id"),
        body=body if isinstance(body, dict) else None,
    )


async def server_offers_change_stream(
    config: ClientConfig, *, transport: httpx.AsyncBaseTransport | None = None
) -> bool:
    """True if the server at ``config.base_url`` offers the change stream."""
    async with httpx.AsyncClient(
        base_url=config.base_url,
        headers=_headers(config),
        transport=transport,
        timeout=httpx.Timeout(config.timeout, connect=config.connect_timeout),
    ) as http:
        try:
            response = await http.get(CAPABILITIES)
            body = response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError) as exc:
            log.debug("no change stream: capabilities check failed (%s)", type(exc).__name__)
            return False
    return isinstance(body, dict) and body.get("change_stream") is True


class ChangeStream:
    """Async iterator of one store's changes that reconnects and resumes (module docstring)."""

    def __init__(
        self,
        config: ClientConfig,
        store_id: str,
        *,
        after: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        read_timeout: float = 45.0,  # three missed server heartbeats
        min_delay: float = 0.2,
        max_delay: float = 10.0,
    ) -> None:
        self.store_id = store_id
        self.cursor = after
        self.reconnects = 0
        self._min_delay = min_delay
        self._max_delay = max_delay
        self._http = httpx.AsyncClient(
            base_url=config.base_url,
            headers={**_headers(config), "accept": "text/event-stream"},
            transport=transport,
            timeout=httpx.Timeout(read_timeout, connect=config.connect_timeout),
        )

    def __repr__(self) -> str:
        return f"ChangeStream(store_id={self.store_id!r}, cursor={self.cursor!r})"

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> ChangeStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __aiter__(self) -> AsyncIterator[ChangeEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[ChangeEvent]:
        delay = self._min_delay
        first = True
        while True:
            if not first:
                self.reconnects += 1
            first = False
            try:
                async for event in self._connect_once():
                    if event.kind == "ready":
                        delay = self._min_delay  # a healthy connection resets the backoff
                    yield event
                log.debug("change stream of %s ended; reconnecting", self.store_id)
            except _FATAL:
                raise
            except (httpx.HTTPError, ApiError, ApiConnectionError, ValueError, KeyError) as exc:
                log.info(
                    "change stream of %s interrupted (%s); reconnecting in %.1f s",
                    self.store_id,
                    type(exc).__name__,
                    delay,
                )
            await trio.sleep(delay * (0.5 + random.random() / 2))
            delay = min(delay * 2, self._max_delay)

    async def _connect_once(self) -> AsyncIterator[ChangeEvent]:
        headers = {"last-event-id": self.cursor} if self.cursor else {}
        url = CHANGES.format(store=quote(self.store_id, safe=""))
        async with self._http.stream("GET", url, headers=headers) as response:
            if response.status_code != 200:
                await response.aread()
                try:
                    body = response.json()
                except ValueError:
                    body = None
                raise _error(response, body)
            fields: dict[str, str] = {}
            data: list[str] = []
            async for line in response.aiter_lines():
                if line:
                    if line.startswith(":"):
                        continue  # heartbeat (comment)
                    name, _, value = line.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    if name == "data":
                        data.append(value)
                    else:
                        fields[name] = value
                    continue
                event = self._dispatch(fields, "\n".join(data))
                fields, data = {}, []
                if event is not None:
                    self.cursor = event.cursor
                    yield event

    def _dispatch(self, fields: dict[str, str], data: str) -> ChangeEvent | None:
        kind = fields.get("event", "message")
        cursor = fields.get("id") or self.cursor or ""
        if kind == "memory_version":
            return ChangeEvent("memory_version", cursor, MemoryVersion.from_json(json.loads(data)))
        if kind == "ready":
            return ChangeEvent("ready", cursor)
        if kind == "error":
            body = json.loads(data) if data else {}
            error = body.get("error", {}) if isinstance(body, dict) else {}
            raise NotFoundError(
                str(error.get("message") or "the change stream ended with an error"),
                status=404,
                error_type=str(error.get("type") or "not_found_error"),
                body=body if isinstance(body, dict) else None,
            )
        return None  # an event type from a newer server: ignore
