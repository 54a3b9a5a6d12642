"""The change stream (a memfs extension): Server-Sent Events of a store's new versions.

Offered only when ``create_app`` gets a ``ChangeHub``; ``GET /v1/memfs/capabilities``
says whether it is (``memfs.server.routes``). ``GET
/v1/memory_stores/{store_id}/memfs/changes`` (``EventStream.change_stream``) answers
``text/event-stream``:
- ``event: ready`` first, once subscribed: every change committed after it will be sent; its
  ``id:`` is the position the stream starts after;
- one ``event: memory_version`` per committed version of the store, oldest first in commit
  order, ``data:`` the version as ``GET …/memory_versions/{id}`` renders it (``view=basic`` by
  default), ``id:`` a resume cursor (``stream_cursor.encode_cursor``: the version's ``created_at``
  in microseconds);
- ``: heartbeat`` after ``hub.heartbeat`` seconds without events;
- ``event: error`` with the 404 envelope (its ``request_id`` the stream request's) when the
  store is deleted, which ends the stream. A database that stops answering ends the stream
  without an event (the client reconnects and gets 503 while it is down).

Where it starts: after ``Last-Event-ID`` or ``?after=`` (a cursor, or a ``memver_…`` id: 400
if that version is gone), else at the newest version (no replay). An unknown store is a 404
before the stream starts; a closing hub (shutdown) gets 529 so clients reconnect elsewhere;
a key that holds ``hub.max_streams_per_key`` streams already gets 429 with ``retry-after``.

Replay and live streaming are one code path: the stream subscribes to the hub *before* it reads
storage, then follows the store through ``fanout`` (``memfs.server.http.fanout``): each new version
is read once for every stream of the store in this process and rendered once per view (the SSE
bytes every follower sends); a stream behind that shared position (an older cursor, or one that
lags) reads the versions after its own position from storage, a page at a time, until it
catches up. A lost or coalesced notification can delay an event, never lose or reorder one (see
``memfs.server.db.notify``). This module must not contain SQL or feed the hub.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from starlette.requests import Request
from starlette.responses import Response

from memfs.contract.errors import (
    BadRequestError,
    NotFoundError,
    OverloadedError,
    ServiceUnavailableError,
)
from memfs.contract.models import MemoryVersion
from memfs.server.db.notify import ChangeHub, Subscription
from memfs.server.http.auth import api_actor_of
from memfs.server.http.envelope import error_body, request_id_of
from memfs.server.http.fanout import Fanout, Page, SharedEvent
from memfs.server.http.metrics import Metrics
from memfs.server.http.query import MAX_LIMIT, query_text, query_view
from memfs.server.http.sse import SubscriptionStream
from memfs.server.memory_stores import stream_cursor
from memfs.server.memory_stores.storage import MemoryStoresStorage, VersionFilter

log = logging.getLogger(__name__)

CHANGE_STREAM_PATH = "/v1/memory_stores/{store_id}/memfs/changes"
SEARCH_PATH = "/v1/memory_stores/{store_id}/memfs/search"  # the search extension (routes.search)


@dataclass(frozen=True, eq=False)
class VersionEvent:
    """One version as every stream sends it: the SSE message of the basic view, and of the full
    one when the version was read with its content (else None)."""

    basic: bytes
    full: bytes | None

    def message(self, full: bool) -> bytes:
        text = self.full if full else self.basic
        # The fanout never hands a full-view follower a version read without its content.
        assert text is not None
        return text


def _message(version: MemoryVersion, full: bool) -> bytes:
    data = json.dumps(version.to_json(full=full), separators=(",", ":"))
    cursor = stream_cursor.encode_cursor(version.created_at)
    return f"event: memory_version\nid: {cursor}\ndata: {data}\n\n".encode()


class EventStream:
    """The change stream's endpoints, on one ``MemoryStoresStorage`` and its hub (None: not
    offered)."""

    def __init__(
        self,
        storage: MemoryStoresStorage,
        hub: ChangeHub | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.storage = storage
        self.hub = hub
        self.metrics = metrics or Metrics()
        self.fanout: Fanout[VersionEvent] | None = None
        if hub is not None:
            self.fanout = Fanout(hub, "memory_stores", self.metrics, max_events=hub.stream_buffer)

    async def change_stream(self, request: Request) -> Response:
        hub = self.hub
        assert hub is not None  # the route exists only with a hub
        store_id = request.path_params["store_id"]
        full = query_view(request, "basic")
        raw = request.headers.get("last-event-id") or query_text(request, "after")
        if hub.closed:
            raise OverloadedError("the server is shutting down; reconnect to another replica")
        await self.storage.get_store(store_id)  # 404 before the stream starts
        # Before reading storage: no change slips between.
        sub = hub.subscribe(store_id, key=api_actor_of(request).id)
        try:
            if raw is None:
                newest = await self.storage.list_versions(
                    store_id, VersionFilter(), after=None, limit=1, with_content=False
                )
                start = newest.items[0].created_at if newest.items else stream_cursor.ORIGIN
            elif raw.startswith("memver_"):
                try:
                    start = (await self.storage.get_version(store_id, raw)).created_at
                except NotFoundError:
                    raise BadRequestError(
                        f"after: memory version {raw!r} is not in this store (pruned?); "
                        "resynchronise and reconnect without it"
                    ) from None
            else:
                decoded = stream_cursor.decode_cursor(raw)
                if decoded is None:
                    raise BadRequestError(
                        "after: expected a change-stream cursor or a memory version id"
                    )
                start = decoded
        except BaseException:
            sub.__exit__(None, None, None)
            raise
        return SubscriptionStream(
            sub, self._change_events(sub, start, full, request_id_of(request.scope))
        )

    async def _versions_after(
        self, store_id: str, after: int, with_content: bool
    ) -> Page[VersionEvent]:
        """A page of the store's versions created after the position ``after``, oldest first,
        rendered (``fanout.Read``; a long backlog is never held in memory at once)."""
        flt = VersionFilter(created_gte=stream_cursor.from_position(after + 1))
        result = await self.storage.list_versions(
            store_id, flt, after=None, limit=MAX_LIMIT, with_content=with_content, oldest_first=True
        )
        events = []
        for version in result.items:
            basic = _message(version, False)
            full = _message(version, True) if with_content else None
            size = len(basic) + (len(full) if full is not None else 0)
            position = stream_cursor.position_of(version.created_at)
            events.append(SharedEvent(position, VersionEvent(basic, full), size, with_content))
        return events, result.next is not None

    async def _change_events(
        self, sub: Subscription, start: datetime, full: bool, request_id: str
    ) -> AsyncGenerator[str | bytes, None]:
        assert self.fanout is not None
        read = partial(self._versions_after, sub.store_id)
        position = stream_cursor.position_of(start)
        with (
            sub,
            self.fanout.follower(
                sub, position, rich=full, read_shared=read, read_own=read
            ) as follower,
        ):
            cursor_text = stream_cursor.encode_cursor(start)
            ready = json.dumps({"type": "ready", "cursor": cursor_text})
            yield f"event: ready\nid: {cursor_text}\ndata: {ready}\n\n"
            while True:
                try:
                    batch = await follower.next()
                except NotFoundError as exc:  # the store was deleted
                    body = json.dumps(error_body(exc.error_type, exc.message, request_id))
                    yield f"event: error\ndata: {body}\n\n"
                    return
                except ServiceUnavailableError:  # logged by the storage; the client reconnects
                    return
                if batch == "closed":
                    return
                if batch == "idle":
                    yield ": heartbeat\n\n"
                    continue
                yield b"".join(event.payload.message(full) for event in batch)
