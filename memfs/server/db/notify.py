"""Change notification: who must look at a store again, and when (trio thread only).

A notification carries no data, only "store S has committed something new": the store's shared
reader (``memfs.server.http.fanout.SharedFeed``, one per followed store in this process) then reads
the changes after its position *from storage*, once for every stream that follows S, and a
stream behind it reads after its own cursor. So a lost, duplicated or coalesced notification can
delay an event but never lose or reorder one, and replay after a reconnect and live streaming
are the same code path.

``ChangeHub.subscribe(store_id)`` returns a ``Subscription`` whose ``wait()`` returns once
something was published for that store since the previous ``wait()`` (or the hub closed);
``take_news()`` is the same without waiting (a store's shared reader reads only when there is
news), and ``on_news`` is called at each notification (the shared reader wakes the first of its
streams that wait). Subscribe *before* reading storage: a publish that lands during the read
then wakes the next ``wait()`` at once, so nothing slips between. The hub also bounds the open
streams of each API key (``max_streams_per_key``): one more ``subscribe(…, key=…)`` raises
``TooManyStreamsError`` (a 429 with ``retry-after``), so a client cannot hold unbounded
connections, subscriptions and tasks. The bound is per process (each PostgreSQL replica counts
its own).

Who publishes: the SQLite backend, once a write's transaction has committed (one process owns
the file, so every write passes through it); on PostgreSQL the ``PgListener``
(``memfs.server.backends.pg_listener``), which relays the ``NOTIFY`` every replica sends inside its
transactions. The topic is a Memory Stores store id, or a Databricks store's
``change_topic``.

This module must not read storage, and holds no routes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import TracebackType

import trio

from memfs.contract.errors import RateLimitError

log = logging.getLogger(__name__)

DEFAULT_HEARTBEAT = 15.0
DEFAULT_MAX_STREAMS_PER_KEY = 64  # a mount holds one per store; a key serves many mounts
DEFAULT_STREAM_BUFFER = 1024  # recent changes a store's streams share (memfs.server.http.fanout)
STREAMS_RETRY_AFTER = 10.0  # seconds a refused stream is asked to wait before trying again


class TooManyStreamsError(RateLimitError):
    """An API key already holds ``ChangeHub.max_streams_per_key`` open change streams."""


class Subscription:
    """One subscriber's view of one store (see ``ChangeHub``)."""

    def __init__(self, hub: ChangeHub, store_id: str, key: str | None) -> None:
        self.hub = hub
        self.store_id = store_id
        self.key = key  # the API key (its id) whose stream this is; None: not counted
        self._event = trio.Event()
        self._pending = False
        # Called at each notification (a store's shared feed wakes its first waiting stream).
        self.on_news: Callable[[], None] | None = None

    def _notify(self) -> None:
        self._pending = True
        self._event.set()
        if self.on_news is not None:
            self.on_news()

    @property
    def has_news(self) -> bool:
        """Whether something was published since the last ``take_news`` or ``wait``."""
        return self._pending

    def take_news(self) -> bool:
        """Whether something was published since the last ``take_news`` or ``wait`` (and
        forget it): the non-blocking ``wait`` of a reader that reads only when there is news."""
        pending = self._pending
        self._pending = False
        return pending

    def mark_news(self) -> None:
        """As if something was published (a read that did not finish puts its news back)."""
        self._notify()

    async def wait(self) -> None:
        """Return once something was published since the last ``wait`` (or the hub closed)."""
        if not self._pending and not self.hub.closed:
            await self._event.wait()
        self._pending = False
        self._event = trio.Event()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.hub._unsubscribe(self)


class ChangeHub:
    """In-process fan-out of "store S changed" to the subscribers of S (trio thread only)."""

    def __init__(
        self,
        *,
        heartbeat: float = DEFAULT_HEARTBEAT,
        max_streams_per_key: int = DEFAULT_MAX_STREAMS_PER_KEY,
        stream_buffer: int = DEFAULT_STREAM_BUFFER,
    ) -> None:
        self.heartbeat = heartbeat
        self.max_streams_per_key = max_streams_per_key
        self.stream_buffer = stream_buffer  # for the streams' ``fanout.Fanout``
        self.closed = False
        self._subscribers: dict[str, set[Subscription]] = {}
        # Invariant: _streams_of[k] is the number of subscriptions in _subscribers with key k
        # (absent when 0), never more than max_streams_per_key.
        self._streams_of: dict[str, int] = {}

    def subscribe(self, store_id: str, *, key: str | None = None) -> Subscription:
        """A subscription to ``store_id``'s news, counted against ``key``'s streams (None: not
        counted); ``TooManyStreamsError`` if ``key`` already holds its maximum."""
        if key is not None:
            held = self._streams_of.get(key, 0)
            if held >= self.max_streams_per_key:
                raise TooManyStreamsError(
                    f"this API key already holds {held} open change streams (the most this "
                    "server allows per key); close one, or retry later",
                    retry_after=STREAMS_RETRY_AFTER,
                )
            self._streams_of[key] = held + 1
        sub = Subscription(self, store_id, key)
        self._subscribers.setdefault(store_id, set()).add(sub)
        return sub

    def _unsubscribe(self, sub: Subscription) -> None:
        """Drop ``sub`` (again: nothing happens)."""
        subs = self._subscribers.get(sub.store_id)
        if subs is None or sub not in subs:
            return
        subs.discard(sub)
        if not subs:
            del self._subscribers[sub.store_id]
        if sub.key is not None:
            left = self._streams_of[sub.key] - 1
            if left:
                self._streams_of[sub.key] = left
            else:
                del self._streams_of[sub.key]

    def streams_of(self, key: str) -> int:
        """How many counted subscriptions ``key`` holds."""
        return self._streams_of.get(key, 0)

    @property
    def subscriber_count(self) -> int:
        return sum(len(subs) for subs in self._subscribers.values())

    def publish(self, store_id: str) -> None:
        for sub in self._subscribers.get(store_id, ()):
            sub._notify()

    def publish_all(self) -> None:
        for subs in self._subscribers.values():
            for sub in subs:
                sub._notify()

    def close(self) -> None:
        """Wake every subscriber for the last time: streams end (server shutdown)."""
        self.closed = True
        self.publish_all()
