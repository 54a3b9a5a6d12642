"""Resource subscriptions: the store's change feed turned into the protocol's notifications, for
the one client of ``memfs mcp`` over stdio (stateless HTTP has no session to push to, and
offers none of this: ``memfs.mcp.app.build_server`` without ``Subscriptions``).

Both eras of the protocol are served. A 2025 client (the ``initialize`` handshake: Claude
Desktop, Claude Code, Cursor) sends ``resources/subscribe`` with a URI and gets
``notifications/resources/updated`` for it, and ``notifications/resources/list_changed``
whenever a memory is created, deleted or renamed, on its connection. A 2026-07-28 client opens
a ``subscriptions/listen`` stream with the same filter; the SDK's ``ListenHandler`` delivers
what ``follow`` publishes on the bus.

The feed is opened at the first ``resources/list``, ``resources/subscribe`` or
``subscriptions/listen``, and that request is answered once it is connected: every change
committed after the answer is told. ``initialize`` never waits for it, and a client that
follows nothing costs no stream. A feed that does not connect within ``CONNECT_TIMEOUT``, or
ends, is logged; the tools and resources keep working without notifications. A request
cancelled by the client while the feed connects cancels that connection, and the next
request that needs the feed opens it again.

What a change means: ``created`` and ``deleted`` change the list and the memory at that path;
``modified`` changes the memory at its path and, when its path is not the one last known for
its id (a rename), the memory at the old path too (now gone) and the list. The ids' paths are
learnt from a listing when ``follow`` starts and from every change after it.

Bounded: at most ``MAX_SUBSCRIPTIONS`` URIs (a subscription past it is refused), the known
paths one per live memory (a store holds up to 2,000; a deletion forgets its id).
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import mcp_types as types
import trio
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
)
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from memfs.contract.errors import ApiConnectionError, ApiError
from memfs.mcp.backend import BackendError, Change, ChangeFeed, MemoryBackend
from memfs.mcp.resources import ResourceError, path_of, uri_of

log = logging.getLogger(__name__)

MAX_SUBSCRIPTIONS = 4_096
CONNECT_TIMEOUT = 10.0  # seconds a request waits for the feed to connect, the first time


class Subscriptions:
    """The URIs the client follows and the channels to tell it (module docstring)."""

    def __init__(self, backend: MemoryBackend, feed: ChangeFeed, nursery: trio.Nursery) -> None:
        self.backend = backend
        self.feed = feed
        self.nursery = nursery  # the feed's reader runs here, as long as the server
        self.uris: set[str] = set()  # a 2025 client's resources/subscribe
        self.bus = InMemorySubscriptionBus()  # a 2026 client's subscriptions/listen streams
        self._listen = ListenHandler(self.bus)
        # The feed's opening: settled once connected or given up (timeout, feed ended), for
        # good; ``_opening`` is set while a request opens it (others wait for its outcome).
        self._settled = False
        self._opening: trio.Event | None = None
        self._connected = False
        # the 2025 connection that subscribed last: its standalone channel carries what
        # follows (stdio has one connection)
        self._session: ServerSession | None = None
        self._paths: dict[str, str] = {}  # memory id -> its path as last known (renames)

    async def subscribe(
        self, ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        try:
            path_of(params.uri)
        except ResourceError as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        if params.uri not in self.uris and len(self.uris) >= MAX_SUBSCRIPTIONS:
            raise MCPError(types.INVALID_PARAMS, f"At most {MAX_SUBSCRIPTIONS} subscriptions.")
        await self.seen(ctx)
        self.uris.add(params.uri)
        return types.EmptyResult()

    async def listen(
        self, ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        await self.opened()
        return await self._listen(ctx, params)

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        self.uris.discard(params.uri)
        return types.EmptyResult()

    async def seen(self, ctx: ServerRequestContext[Any]) -> None:
        """A client listed or subscribed: the feed is connected when this returns, and a 2025
        connection is the one to tell."""
        if ctx.session.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self._session = ctx.session
        await self.opened()

    async def opened(self) -> None:
        """Returns once the feed is connected (the first call opens it), or gave up. A call
        cancelled while it opens (its request was) leaves it to the next one, which opens it
        again: the cancellation took the connecting reader with it."""
        while not self._settled:
            if self._opening is not None:  # another request opens it: wait for its outcome
                await self._opening.wait()
                continue
            self._opening = opening = trio.Event()
            try:
                with trio.move_on_after(CONNECT_TIMEOUT) as waited:
                    await self.nursery.start(self._run)
                if waited.cancelled_caught:
                    log.warning("the change feed did not connect: no resource notifications")
                self._settled = True
            finally:
                self._opening = None
                opening.set()

    async def _run(self, *, task_status: trio.TaskStatus[None]) -> None:
        try:
            await self.follow(self.feed, task_status=task_status)
        except (ApiError, ApiConnectionError, BackendError) as exc:
            log.warning("the change feed ended (%s): no more resource notifications", exc)
            if not self._connected:
                task_status.started()

    async def follow(
        self, feed: ChangeFeed, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Turn the feed's changes into notifications until cancelled; started once the feed
        is connected and the paths are known (listed once connected: a rename committed while
        they are listed is told as its new path's update only)."""
        started = False
        async with feed.changes() as changes:
            async for change in changes:
                if change is None:  # connected, or connected again
                    if not started:
                        for memory in await self.backend.list_below("/"):
                            self._paths[memory.id] = memory.path
                        task_status.started()
                        started = self._connected = True
                    continue
                for event in self.events(change):
                    await self._tell(event)

    def events(self, change: Change) -> list[ServerEvent]:
        """What ``change`` means to a client (module docstring); updates the known paths."""
        before = self._paths.get(change.memory_id)
        events: list[ServerEvent] = [ResourceUpdated(uri_of(change.path))]
        if change.operation == "deleted":
            self._paths.pop(change.memory_id, None)
            events.append(ResourcesListChanged())
            return events
        self._paths[change.memory_id] = change.path
        if change.operation == "created":
            events.append(ResourcesListChanged())
        elif before is not None and before != change.path:
            events += [ResourceUpdated(uri_of(before)), ResourcesListChanged()]
        return events

    async def _tell(self, event: ServerEvent) -> None:
        await self.bus.publish(event)
        session = self._session
        if session is None:
            return
        try:
            if isinstance(event, ResourcesListChanged):
                await session.send_resource_list_changed()
            elif isinstance(event, ResourceUpdated) and event.uri in self.uris:
                await session.send_resource_updated(event.uri)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:  # client gone
            log.debug("notification not sent: %r", exc)
            self._session = None
