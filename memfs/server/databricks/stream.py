"""The Databricks change stream (a memfs extension): Server-Sent Events of a store's entry changes.

The hosted Databricks API has no such thing; a client learns whether a server offers it from
``GET /v1/memfs/capabilities`` (``databricks_change_stream``: ``memfs.server.routes``).
Offered only when ``create_app`` gets a ``ChangeHub``. ``GET
/api/2.0/agents/memory-stores/{store_id}/memfs/changes`` (``DatabricksChangeStream.stream``)
takes the Databricks routes' key (``Authorization: Bearer``) and answers ``text/event-stream``:
- ``event: ready`` first, once subscribed: every change committed after it will be sent; its
  ``id:`` is the position the stream starts after;
- one ``event: entry_change`` per committed change of the store's entries (``?actor_id=``: of
  that actor's only), oldest first in commit order, ``data:`` ``DbxChange.to_json`` (no
  content: its SHA-256 and size; read the entry for the rest), ``id:`` its resume cursor (the
  change's ``ordinal``, decimal: numbered per store, 1, 2, 3…, so the ids of one store say
  nothing of the writes in any other);
- ``: heartbeat`` after ``hub.heartbeat`` seconds without events;
- ``event: error`` with the Databricks envelope (``NOT_FOUND``) when the store is deleted, which
  ends the stream. A database that stops answering ends the stream without an event.

Where it starts: after ``Last-Event-ID`` or ``?after=`` (a cursor; ``0`` replays the store's
whole retained log: a store created again under a deleted store's id starts after that deletion,
while any other cursor of the deleted store still meets it), else after the store's newest change
(no replay). An unknown store is a 404
before the stream starts; a closing hub (shutdown) gets 503 ``UNAVAILABLE``, so clients
reconnect elsewhere; a key that holds ``hub.max_streams_per_key`` streams (of either API)
already gets 429 ``REQUEST_LIMIT_EXCEEDED`` with ``retry-after``. As the Memory Stores stream
(``memory_stores.stream``): subscribe to the hub *before* reading storage, then follow the store
through ``fanout`` (``memfs.server.http.fanout``): each change is read once for every stream of the
store in this process (every actor's: each stream keeps its actor's) and rendered once; a stream
behind that shared position reads the changes after its own position (its actor's) from storage, a
page at a time, until it catches up. A lost or coalesced notification delays an event but never
loses one. This module must not contain SQL or feed the hub.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from functools import partial

from starlette.requests import Request
from starlette.responses import Response

from memfs.contract.errors import BadRequestError, OverloadedError, ServiceUnavailableError
from memfs.server.databricks import validation as check
from memfs.server.databricks.storage import DatabricksStorage, DbxChange, change_topic
from memfs.server.db.notify import ChangeHub, Subscription
from memfs.server.http.auth import api_actor_of
from memfs.server.http.fanout import Fanout, Page, SharedEvent
from memfs.server.http.metrics import Metrics
from memfs.server.http.query import MAX_LIMIT, query_one, query_text
from memfs.server.http.sse import SubscriptionStream

log = logging.getLogger(__name__)

DBX_CHANGE_STREAM_PATH = "/api/2.0/agents/memory-stores/{store_id}/memfs/changes"
_MAX_CURSOR_DIGITS = 18  # below 2**63: a PostgreSQL BIGINT


def _cursor(raw: str) -> int:
    if not raw.isascii() or not raw.isdigit() or len(raw) > _MAX_CURSOR_DIGITS:
        raise BadRequestError("after: expected a change-stream cursor (the id of an event)")
    return int(raw)


@dataclass(frozen=True, eq=False)
class ChangeEvent:
    """One change as every stream sends it (the SSE message), whose it is, and whether it ends
    the stream (the store's deletion: the message is the error event)."""

    message: bytes
    actor_id: str
    final: bool


def _event(store_id: str, change: DbxChange) -> SharedEvent[ChangeEvent]:
    if change.kind == "store_deleted":
        body = json.dumps(
            {
                "error_code": "NOT_FOUND",
                "message": f"memory store 'memory-stores/{store_id}' was deleted",
            }
        )
        text = f"event: error\ndata: {body}\n\n"
    else:
        data = json.dumps(change.to_json(), separators=(",", ":"))
        text = f"event: entry_change\nid: {change.ordinal}\ndata: {data}\n\n"
    message = text.encode()
    final = change.kind == "store_deleted"
    return SharedEvent(change.ordinal, ChangeEvent(message, change.actor_id, final), len(message))


class DatabricksChangeStream:
    """The Databricks change stream's endpoint, on one ``DatabricksStorage`` and its hub."""

    def __init__(
        self, storage: DatabricksStorage, hub: ChangeHub, metrics: Metrics | None = None
    ) -> None:
        self.storage = storage
        self.hub = hub
        self.metrics = metrics or Metrics()
        self.fanout: Fanout[ChangeEvent] = Fanout(
            hub, "databricks", self.metrics, max_events=hub.stream_buffer
        )

    async def stream(self, request: Request) -> Response:
        store_id = request.path_params["store_id"]
        raw_actor = query_one(request, "actor_id")
        actor = check.actor_id(raw_actor) if raw_actor is not None else None
        raw = request.headers.get("last-event-id") or query_text(request, "after")
        after = _cursor(raw) if raw is not None else None
        if self.hub.closed:
            raise OverloadedError("the server is shutting down; reconnect to another replica")
        # Before reading: nothing slips between.
        sub = self.hub.subscribe(change_topic(store_id), key=api_actor_of(request).id)
        try:
            bounds = await self.storage.change_bounds(store_id)  # 404 before the stream starts
        except BaseException:
            sub.__exit__(None, None, None)
            raise
        if after is None:
            after = bounds.newest
        elif after == 0:  # this store's whole history, not an earlier store's under its id
            after = bounds.start
        return SubscriptionStream(sub, self._events(sub, store_id, actor, after))

    async def _changes_after(
        self, store_id: str, actor: str | None, after: int, _with_content: bool
    ) -> Page[ChangeEvent]:
        """A page of the store's changes after ``after`` (``actor``'s and the store's deletion;
        None: everyone's), oldest first, rendered (``fanout.Read``)."""
        page = await self.storage.list_changes(
            store_id, after=after, actor_id=actor, limit=MAX_LIMIT
        )
        return [_event(store_id, change) for change in page], len(page) == MAX_LIMIT

    async def _events(
        self, sub: Subscription, store_id: str, actor: str | None, position: int
    ) -> AsyncGenerator[str | bytes, None]:
        every = partial(self._changes_after, store_id, None)
        own = partial(self._changes_after, store_id, actor)
        with (
            sub,
            self.fanout.follower(
                sub, position, rich=False, read_shared=every, read_own=own
            ) as follower,
        ):
            ready = json.dumps({"type": "ready", "cursor": str(position)})
            yield f"event: ready\nid: {position}\ndata: {ready}\n\n"
            while True:
                try:
                    batch = await follower.next()
                except ServiceUnavailableError:  # logged by the storage; clients reconnect
                    return
                if batch == "closed":
                    return
                if batch == "idle":
                    yield ": heartbeat\n\n"
                    continue
                mine = [
                    e.payload
                    for e in batch
                    if e.payload.final or actor in (None, e.payload.actor_id)
                ]
                ends = next((i for i, change in enumerate(mine) if change.final), None)
                if ends is not None:  # the store was deleted: its error event ends the stream
                    yield b"".join(change.message for change in mine[: ends + 1])
                    return
                if mine:
                    yield b"".join(change.message for change in mine)
