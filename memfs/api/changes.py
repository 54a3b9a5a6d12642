"""Client of the change stream, a memfs extension of the API (the hosted API does not have it).

``server_offers_change_stream(client)`` asks ``GET /v1/memfs/capabilities``; anything but a
clear yes (404 on the hosted API, an error, a timeout) means "no": poll ``memory_versions``.

``ChangeStream(client, store_id, after=cursor)`` is an async iterator of ``ChangeEvent``s read
from ``GET /v1/memory_stores/{store}/memfs/changes`` (Server-Sent Events):
- ``kind="ready"`` once per (re)connection, when the server has subscribed: every change
  committed from then on will arrive. ``cursor`` is the position the stream starts after;
- ``kind="memory_version"`` for each committed version, oldest first, with ``version``
  (``view=basic``: no content) and ``cursor`` (its resume position);
- ``kind="interrupted"`` when a connection is lost (``detail``: the error's type, or that the
  server closed it), before waiting to reconnect: ``memfs status`` says "reconnecting since".
When the connection drops, or the server closes the stream (shutdown, load balancer timeout), it
reconnects with ``Last-Event-ID: <last cursor>``; the server replays what came after it, so no
change is missed or repeated. ``stream.cursor`` is the last position seen: persist it to resume
after a restart (``after=``). A cursor, or a ``memver_…`` id, is accepted as ``after``; without
it the stream starts at the store's newest version (no replay).

``SseStream`` is the reader both APIs share (the Databricks change stream:
``memfs.api.databricks.stream``); a subclass turns each SSE message into a ``ChangeEvent``.
The stream is one more request of the ``StoreClient``: the same credentials (``x-api-key`` or
bearer), pool and ``RequestStats``; reconnects wait as the client's ``RetryPolicy`` says (full
jitter, the server's ``retry-after``), and only failures ``is_transient`` calls transient are
retried. Others are raised from the iterator: ``NotFoundError`` (the store was deleted, or the
server has no change stream), ``AuthenticationError``, ``BadRequestError`` (for example a
``memver_`` id that was pruned: resynchronise, then reconnect without ``after``).

Like ``client``, this module must not log the key or URLs with paths.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Self

import trio

from memfs.api.capabilities import server_offers
from memfs.api.client import StoreClient
from memfs.api.transport import Transport
from memfs.contract.errors import ApiConnectionError, ApiError, NotFoundError
from memfs.contract.models import MemoryVersion
from memfs.contract.retry import RetryPolicy, is_transient
from memfs.contract.store_api import ChangeEvent

log = logging.getLogger(__name__)

CHANGES = "/v1/memory_stores/{store}/memfs/changes"
CHANGE_STREAM_EXTENSION = "change_stream"  # its name in the server's capabilities


async def server_offers_change_stream(client: StoreClient) -> bool:
    """True if the server of ``client`` offers the change stream (one try, no retries)."""
    return await server_offers(client, CHANGE_STREAM_EXTENSION)


class SseStream:
    """Async iterator of ``ChangeEvent``s read from one Server-Sent Events endpoint, which
    reconnects and resumes (module docstring). A subclass reads its events (``_dispatch``)."""

    def __init__(
        self,
        client: Transport,
        route: str,
        path_args: dict[str, str],
        *,
        query: dict[str, str] | None = None,
        after: str | None = None,
        read_timeout: float = 45.0,  # three missed server heartbeats
        retry: RetryPolicy | None = None,  # default: the client's
    ) -> None:
        self.cursor = after
        self.reconnects = 0
        self._client = client
        self._route = route
        self._path_args = path_args
        self._query = query
        self._retry = retry or client.retry
        self._read_timeout = read_timeout

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._path_args!r}, cursor={self.cursor!r})"

    async def aclose(self) -> None:
        """Nothing to release: the connection belongs to the client's pool."""

    async def __aenter__(self) -> Self:
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
        failures = 0  # in a row, since the last healthy connection (the backoff's retry number)
        first = True
        while True:
            if not first:
                self.reconnects += 1
            first = False
            error: BaseException | None = None
            try:
                async for event in self._connect_once():
                    if event.kind == "ready":
                        failures = 0  # a healthy connection resets the backoff
                    yield event
                log.debug("change stream %r ended; reconnecting", self)
            except (ApiError, ApiConnectionError) as exc:
                if not is_transient(exc):
                    raise  # a reconnect cannot fix it
                error = exc
            except (ValueError, KeyError) as exc:  # a malformed event: start afresh
                error = exc
            failures += 1
            delay = self._retry.delay_after(failures, error)
            yield ChangeEvent("interrupted", self.cursor or "", detail=_why(error))
            if error is not None:
                self._client.stats.record_retry()
                log.info(
                    "change stream %r interrupted (%s); reconnecting in %.1f s",
                    self,
                    type(error).__name__,
                    delay,
                )
            await trio.sleep(delay)

    async def _connect_once(self) -> AsyncIterator[ChangeEvent]:
        headers = {"accept": "text/event-stream"}
        if self.cursor:
            headers["last-event-id"] = self.cursor
        async with self._client.open_stream(
            self._route,
            self._path_args,
            headers=headers,
            query=self._query,
            read_timeout=self._read_timeout,
        ) as response:
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
                cursor = fields.get("id") or self.cursor or ""
                event = self._dispatch(fields.get("event", "message"), cursor, "\n".join(data))
                fields, data = {}, []
                self.cursor = cursor  # also past an event the subclass skips
                if event is not None:
                    yield event

    def _dispatch(self, kind: str, cursor: str, data: str) -> ChangeEvent | None:
        """The event of one SSE message (None: nothing for the caller); raises to end."""
        raise NotImplementedError


class ChangeStream(SseStream):
    """One Memory Stores store's changes (``memory_version`` events; module docstring)."""

    def __init__(
        self,
        client: StoreClient,
        store_id: str,
        *,
        after: str | None = None,
        read_timeout: float = 45.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(
            client,
            CHANGES,
            {"store": store_id},
            after=after,
            read_timeout=read_timeout,
            retry=retry,
        )
        self.store_id = store_id

    def _dispatch(self, kind: str, cursor: str, data: str) -> ChangeEvent | None:
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


def _why(error: BaseException | None) -> str:
    """Why a connection was lost, in a few words without URLs."""
    if error is None:
        return "the server closed the stream"
    if isinstance(error, ApiConnectionError):
        return "the server is unreachable"
    if isinstance(error, ApiError):
        return f"{error.status} {error.error_type}"
    return f"a malformed event ({type(error).__name__})"
