"""Live console pages: a page showing a store, a memory or an entry learns of changes.

A page that can go stale carries a ``LiveTarget`` (``_live.html``: a hidden element with the URL
of its live endpoint, and a hidden "changed since you opened it" notice) and loads
``static/live.js``. The script opens an ``EventSource`` on that URL (same origin, the session
cookie) and, at the first change to what the page shows, either reloads (a listing, while
nobody types into one of its fields) or shows the notice with a link to reload (a memory, an
entry, and always an edit page: the text a person is typing is never replaced). Without
JavaScript the pages work as before; nothing is inserted as markup (``textContent`` only).

The endpoints (``/console/live/stores/{id}``, ``/console/live/databricks/{id}``) answer
``text/event-stream``:
- the page's position (``?after=``, rendered with the page: the store's newest version, or its
  newest Databricks change), or ``Last-Event-ID`` on a reconnect, so a change between the
  page's read and the stream's start is not missed;
- ``event: change`` (``data``: ``{"what": …, "gone": …}``, ``id``: the position) for a change
  the page shows (``Watch``: the memory or entry; the actor, the session, the session-less
  entries; else any change of the store, and always the store's deletion); an ``id:``-only
  message for the others (the browser's ``Last-Event-ID`` moves on; nothing is dispatched);
  ``: heartbeat`` after ``hub.heartbeat`` seconds without changes;
- the stream ends after ``MAX_STREAM_SECONDS`` (the browser reconnects, and the session is
  checked again: a signed-out or ended session stops its pages' streams then), when the store
  is deleted, or at shutdown.

They are cookie-authenticated and refuse a request without a live session (401) or from another
site (403: ``Sec-Fetch-Site``, else ``Origin``); they never move the session's ``last_seen``
(a page left open must not keep a session alive). Each open stream is a hub subscription counted
against ``"console:" + key id`` (``ChangeHub.max_streams_per_key``: one more is a 429, and the
page still works without). Changes are read through this process's ``fanout.Fanout`` of each API
(``LiveFeeds``): one storage read per change and store, however many pages watch it (a page
opening reads once on its own to catch up). Offered only when the server has a change hub.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from functools import partial
from typing import Literal
from urllib.parse import urlencode

import trio
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from memfs.contract.errors import NotFoundError, ServiceUnavailableError
from memfs.contract.models import MemoryVersion
from memfs.server.console.context import Console
from memfs.server.console.security import CONSOLE_PATH, cross_site
from memfs.server.databricks.storage import DbxChange, change_topic
from memfs.server.db.notify import ChangeHub, Subscription
from memfs.server.http.fanout import Fanout, Follower, Page, SharedEvent
from memfs.server.http.query import MAX_LIMIT
from memfs.server.http.sse import SubscriptionStream
from memfs.server.memory_stores import stream_cursor
from memfs.server.memory_stores.storage import VersionFilter

log = logging.getLogger(__name__)

LIVE_PATH = "/live"
MAX_STREAM_SECONDS = 300.0
RETRY_MS = 3000  # the browser's wait before it reconnects
KEY_PREFIX = "console:"  # a page's stream is counted apart from the key's API streams
_MAX_POSITION_DIGITS = 18  # below 2**63
Mode = Literal["reload", "notice"]


@dataclass(frozen=True)
class LiveTarget:
    """What a page's script needs: its endpoint's URL, and what it does on a change."""

    src: str
    mode: Mode


@dataclass(frozen=True, eq=False)
class Change:
    """One change as the endpoints match it against a page (``Watch``)."""

    item_id: str  # the memory or entry ("" for the store's deletion)
    actor_id: str | None
    session_id: str | None
    what: str  # agent-written (a path): the script shows it as text
    gone: bool = False  # the store was deleted


@dataclass(frozen=True)
class Watch:
    """What a page shows: one item (memory or entry), else an actor's entries (one session's,
    or those without one), else the whole store."""

    item_id: str | None = None
    actor_id: str | None = None
    session_id: str | None = None
    session_less: bool = False

    def matches(self, change: Change) -> bool:
        if change.gone:
            return True
        if self.item_id is not None:
            return change.item_id == self.item_id
        if self.actor_id is not None and change.actor_id != self.actor_id:
            return False
        if self.session_less:
            return change.session_id is None
        return self.session_id is None or change.session_id == self.session_id

    def query(self) -> dict[str, str]:
        query: dict[str, str] = {}
        if self.item_id is not None:
            query["item"] = self.item_id
        if self.actor_id is not None:
            query["actor"] = self.actor_id
        if self.session_id is not None:
            query["session"] = self.session_id
        if self.session_less:
            query["session_less"] = "1"
        return query

    @classmethod
    def of(cls, request: Request) -> Watch:
        params = request.query_params
        return cls(
            item_id=params.get("item"),
            actor_id=params.get("actor"),
            session_id=params.get("session"),
            session_less=params.get("session_less") == "1",
        )


def _size(change: Change) -> int:
    return 200 + len(change.what) + len(change.actor_id or "") + len(change.session_id or "")


def _version_change(version: MemoryVersion) -> SharedEvent[Change]:
    what = f"{version.path or 'a memory'} was {version.operation}"
    change = Change(version.memory_id, None, None, what)
    return SharedEvent(stream_cursor.position_of(version.created_at), change, _size(change))


def _dbx_change(change: DbxChange) -> SharedEvent[Change]:
    if change.kind == "store_deleted":
        seen = Change("", None, None, "the store was deleted", gone=True)
    else:
        what = f"{change.path} of {change.actor_id} was {change.kind}"
        seen = Change(change.entry_id, change.actor_id, change.session_id, what)
    return SharedEvent(change.ordinal, seen, _size(seen))


async def memory_stores_target(
    console: Console, store_id: str, mode: Mode, *, memory_id: str | None = None
) -> LiveTarget | None:
    """The live target of a Memory Stores page (None: the server has no change hub)."""
    if console.hub is None:
        return None
    newest = await console.storage.list_versions(
        store_id, VersionFilter(), after=None, limit=1, with_content=False
    )
    position = stream_cursor.position_of(newest.items[0].created_at) if newest.items else 0
    return _target(f"/stores/{store_id}", position, Watch(item_id=memory_id), mode)


async def databricks_target(
    console: Console, store_id: str, watch: Watch, mode: Mode
) -> LiveTarget | None:
    """The live target of a Databricks page (None: the server has no change hub)."""
    if console.hub is None:
        return None
    # not ``change_bounds``: it also looks for the store's last deletion (every change of the
    # store, on SQLite), which a page need not know (ordinals only grow, deletions included)
    newest = await console.console_storage.dbx_newest_change(store_id)
    return _target(f"/databricks/{store_id}", newest, watch, mode)


def _target(path: str, position: int, watch: Watch, mode: Mode) -> LiveTarget:
    query = urlencode({"after": str(position), **watch.query()})
    return LiveTarget(f"{CONSOLE_PATH}{LIVE_PATH}{path}?{query}", mode)


def _position(request: Request) -> int | None:
    raw = request.headers.get("last-event-id") or request.query_params.get("after", "")
    if not raw.isascii() or not raw.isdigit() or len(raw) > _MAX_POSITION_DIGITS:
        return None
    return int(raw)


def _message(change: Change, position: int) -> str:
    data = json.dumps({"what": change.what, "gone": change.gone})
    return f"event: change\nid: {position}\ndata: {data}\n\n"


class LiveFeeds:
    """The live endpoints, on this process's hub: one ``Fanout`` per API (module docstring)."""

    def __init__(self, console: Console, hub: ChangeHub) -> None:
        self.console = console
        self.hub = hub
        self.memory_stores: Fanout[Change] = Fanout(
            hub, "console_memory_stores", console.metrics, max_events=hub.stream_buffer
        )
        self.databricks: Fanout[Change] = Fanout(
            hub, "console_databricks", console.metrics, max_events=hub.stream_buffer
        )

    async def _admit(self, request: Request) -> tuple[str, Watch, int] | Response:
        if cross_site(request):
            return PlainTextResponse("Refused: this stream is for the console's own pages.", 403)
        signed_in = await self.console.sessions.current(request, touch=False)
        if signed_in is None:
            return PlainTextResponse("Sign in to the console first.", 401)
        position = _position(request)
        if position is None:
            return PlainTextResponse("after: expected a position (digits).", 400)
        if self.hub.closed:
            return PlainTextResponse("The server is shutting down.", 503)
        return KEY_PREFIX + signed_in.api_key_id, Watch.of(request), position

    async def memory_stores_stream(self, request: Request) -> Response:
        admitted = await self._admit(request)
        if isinstance(admitted, Response):
            return admitted
        key, watch, position = admitted
        store_id = request.path_params["store_id"]
        await self.console.storage.get_store(store_id)  # 404 before the stream starts
        sub = self.hub.subscribe(store_id, key=key)
        read = partial(self._versions_after, store_id)
        follower = self.memory_stores.follower(
            sub, position, rich=False, read_shared=read, read_own=read
        )
        return SubscriptionStream(sub, self._events(sub, follower, watch, position))

    async def databricks_stream(self, request: Request) -> Response:
        admitted = await self._admit(request)
        if isinstance(admitted, Response):
            return admitted
        key, watch, position = admitted
        store_id = request.path_params["store_id"]
        await self.console.storage.databricks.get_store(store_id)  # 404 before the stream
        sub = self.hub.subscribe(change_topic(store_id), key=key)
        read = partial(self._dbx_changes_after, store_id)
        follower = self.databricks.follower(
            sub, position, rich=False, read_shared=read, read_own=read
        )
        return SubscriptionStream(sub, self._events(sub, follower, watch, position))

    async def _versions_after(self, store_id: str, after: int, _rich: bool) -> Page[Change]:
        flt = VersionFilter(created_gte=stream_cursor.from_position(after + 1))
        result = await self.console.storage.list_versions(
            store_id, flt, after=None, limit=MAX_LIMIT, with_content=False, oldest_first=True
        )
        return [_version_change(v) for v in result.items], result.next is not None

    async def _dbx_changes_after(self, store_id: str, after: int, _rich: bool) -> Page[Change]:
        page = await self.console.storage.databricks.list_changes(
            store_id, after=after, actor_id=None, limit=MAX_LIMIT
        )
        return [_dbx_change(change) for change in page], len(page) == MAX_LIMIT

    async def _events(
        self,
        sub: Subscription,
        follower: Follower[Change],
        watch: Watch,
        position: int,
    ) -> AsyncGenerator[str, None]:
        ends = trio.current_time() + MAX_STREAM_SECONDS
        with sub, follower:
            yield f"retry: {RETRY_MS}\nid: {position}\n\n"
            while trio.current_time() < ends:
                try:
                    batch = await follower.next()
                except NotFoundError:  # the store was deleted
                    yield _message(Change("", None, None, "the store was deleted", True), 0)
                    return
                except ServiceUnavailableError:  # logged by the storage; the page reconnects
                    return
                if batch == "closed":
                    return
                if batch == "idle":
                    yield ": heartbeat\n\n"
                    continue
                last = batch[-1].position
                shown = [event.payload for event in batch if watch.matches(event.payload)]
                if not shown:
                    yield f"id: {last}\n\n"
                    continue
                yield _message(shown[-1], last)
                if any(change.gone for change in shown):
                    return


def routes(console: Console) -> list[Route]:
    if console.hub is None:
        return []
    feeds = LiveFeeds(console, console.hub)
    return [
        Route(LIVE_PATH + "/stores/{store_id}", feeds.memory_stores_stream, methods=["GET"]),
        Route(LIVE_PATH + "/databricks/{store_id}", feeds.databricks_stream, methods=["GET"]),
    ]
