"""The HTTP answer of both change streams: Server-Sent Events over one hub subscription.

``SubscriptionStream`` is a ``StreamingResponse`` of ``text/event-stream`` with ``SSE_HEADERS``
that releases its ``db.notify.Subscription`` however the answer ends: the events ran out, the
client hung up, or the answer never started (the client was gone before its first byte; the
events' own ``with sub:`` would then never run). Each open stream counts against its API key
(``ChangeHub.max_streams_per_key``), so a subscription that outlived its stream would hold that
slot for good. It also closes the events however the answer ends (a client that hung up while
an event was being sent leaves them suspended), so the stream leaves its store's shared feed
(``fanout``) at once. This module must not read storage or know either stream's events.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator

import trio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from memfs.server.db.notify import Subscription

log = logging.getLogger(__name__)

SSE_HEADERS = {
    "cache-control": "no-store",
    "x-accel-buffering": "no",
    "connection": "close",  # a reconnect opens a fresh connection (another replica)
}


class SubscriptionStream(StreamingResponse):
    """``events`` as Server-Sent Events; ``sub`` is released when the answer ends."""

    def __init__(self, sub: Subscription, events: AsyncGenerator[str | bytes, None]) -> None:
        super().__init__(events, media_type="text/event-stream", headers=SSE_HEADERS)
        self.subscription = sub
        self._events = events

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.subscription.__exit__(None, None, None)
            # A client that hung up while an event was being sent leaves the events suspended
            # at a ``yield``: close them now, so they leave their store's feed at once.
            with trio.CancelScope(shield=True):
                await self._events.aclose()
