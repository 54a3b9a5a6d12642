"""Change-stream fan-out: each committed change is read from storage once per store, however
many streams follow that store, and serialized once.

A ``Fanout`` (one per change stream API, per server process: each PostgreSQL replica has its
own) keeps a ``SharedFeed`` per followed topic (a store; ``db.notify.ChangeHub`` names them) while
at least one stream follows it. Each stream is a ``Follower`` with its own position; it takes
the feed's events after that position (the same ``SharedEvent`` objects, rendered once, for every
follower), or reads storage on its own when it is behind what the feed still holds.

The feed's state and its invariants:
- ``position``: every committed change up to ``position`` has been read by the feed (or, for a
  new feed, by the follower that created it, from a snapshot taken after it subscribed); every
  change after it will be read by the feed after its next ``news`` (below). Only grows.
- ``base <= position``, and ``_events`` holds every change after ``base`` up to ``position``,
  oldest first (contiguous: so a follower whose position is ``>= base`` finds in it exactly the
  changes after its own position). The oldest are dropped (``base`` moves up) once every
  member at or after ``base`` has sent them (so with every stream live it holds the last read's
  events only), and past ``max_events``, ``max_bytes`` or the ``Fanout``'s ``ByteBudget`` (the
  bytes of all its feeds together): a slow follower costs the server no memory of its own and
  slows nobody; it reads storage on its own instead (``Follower``).
- ``_news``: an uncounted hub subscription of the topic; it is pending when something was
  published since the feed's last read *began*. ``refresh`` takes it before reading and puts it
  back if the read does not finish (cancelled, database away), so a publish is never lost: a
  read that began after a publish sees the change (publishes follow commits: ``db.notify``).
  Reads run one at a time (``_lock``): followers that find a read in progress wait for it
  and find its events. A publish wakes one member (``on_news``: ``pass_on``), not every
  stream of the store (below).
- ``_waiting``: the members that have every event the feed holds, parked oldest first; each
  parked with its position at the feed's ``position`` of that moment, which only grows, so
  the first one parked is the furthest behind: when it has nothing to send, no one parked
  has. A publish wakes the first; a woken member that has something to do (events, the end
  of the stream, a failure, a catch-up of its own) wakes the next before it does it, and one
  that finds nothing parks again at the end. So the members take the news one after another,
  one woken at a time: none is woken for nothing, and under a fast run of writes a member
  further down takes several events in one send. (Waking every stream of a store at each
  publish, each then queueing for the read's lock, measured 3-4x the CPU per write with
  300 streams.) A member cancelled after it was woken wakes the next one as it leaves.
- ``_read_at``: when the feed read each event. A follower with events to send first waits until
  nothing else in the process can run (``trio.testing.wait_all_tasks_blocked``: the write
  that made the change answers before 300 sends, and a read or write in progress is not
  queued behind them), but never past ``yield_for`` seconds after the read of its first event,
  so a busy server still delivers every change within about that delay plus its sends. It
  then takes every event that came meanwhile, for one send.
- ``gone``: the read said the store is gone (``NotFoundError``): nothing more will come; a
  follower that has every event sends the end of the stream.
- ``_failures``: how many reads failed because the database is away
  (``ServiceUnavailableError``); a follower that waited for such a read fails with it too,
  rather than each trying again in turn: every stream at the shared position ends at once, as
  when each read for itself (clients reconnect once the database is back).
- ``members`` / ``rich_followers``: the streams that joined it (those wanting content, the
  Memory Stores ``view=full``); the feed reads content only while one wants it, and an event
  read without it is never handed to one that does (it reads storage on its own). The last
  follower to leave drops the feed (and its subscription).

A follower's position: after a read of its own found no more pages, its position may move up
to the feed's ``position`` as seen *before* that read (every change up to there was committed
before the read began, so the read returned it if it still exists and the follower wants it);
that is how a follower behind the feed joins it, and how a store's first follower creates it.
A follower subscribes to the hub before it reads anything, and refreshes the feed before it
waits (no checkpoint between finding nothing and parking), so a change committed after its
start is always sent, once, in commit order.

What a stream sends for a version is what was committed when the feed read it, just after the
commit: a redaction that lands later reaches the streams that read that version afterwards
(a follower catching up), as it did when each stream read for itself.

This module must not know either API's events, render SSE or read storage itself (the streams
give it their read functions), nor contain SQL.
"""

from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

import trio
from trio.testing import wait_all_tasks_blocked

from memfs.contract.errors import NotFoundError, ServiceUnavailableError
from memfs.server.db.notify import DEFAULT_STREAM_BUFFER, ChangeHub, Subscription
from memfs.server.http.metrics import Metrics

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 8 * 1024 * 1024  # the recent events' bytes at most (full views: content)
DEFAULT_MAX_BYTES_TOTAL = 64 * 1024 * 1024  # of all the feeds of one API in this process
# How long after its read a change's sends wait for the server to have nothing else to do.
DEFAULT_YIELD_FOR = 0.05

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class SharedEvent(Generic[T]):
    """One committed change at ``position`` (its cursor), as the stream renders it (``payload``,
    rendered once for every follower), ``size`` bytes, ``rich`` if read with content."""

    position: int
    payload: T
    size: int
    rich: bool = False


Page = tuple[list[SharedEvent[T]], bool]  # the events after a position, oldest first; more?
# Reads the changes after a position (in the stream's terms), with content if asked.
Read = Callable[[int, bool], Awaitable[Page[T]]]
Next = list[SharedEvent[T]] | Literal["idle", "closed"]


class ByteBudget:
    """The bytes of recent events all the feeds of a ``Fanout`` may hold together."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0  # the sum of the feeds' ``_bytes``


class SharedFeed(Generic[T]):
    """One topic's shared reader and its recent events (see the module docstring)."""

    def __init__(
        self,
        news: Subscription,
        read: Read[T],
        position: int,
        *,
        max_events: int,
        max_bytes: int,
        yield_for: float,
        budget: ByteBudget,
        count_read: Callable[[], None],
    ) -> None:
        self._news = news
        self._budget = budget
        self._read = read
        self._count_read = count_read
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.yield_for = yield_for
        self.base = position
        self.position = position
        self._events: list[SharedEvent[T]] = []
        self._positions: list[int] = []  # of ``_events``, for bisection
        self._read_at: list[float] = []  # of ``_events``: when the feed read each (trio clock)
        self._bytes = 0
        self._lock = trio.Lock()  # held by the read in progress
        self.gone: NotFoundError | None = None
        self._failures = 0
        self._failure: ServiceUnavailableError | None = None  # the last one
        self.members: set[Follower[T]] = set()  # the followers that joined it
        self.rich_followers = 0
        # The members waiting for news, oldest first (see "waiting" in the module docstring).
        self._waiting = trio.lowlevel.ParkingLot()
        # Whatever was committed after ``position`` before the subscription: read it first.
        news.mark_news()
        news.on_news = self.pass_on

    def after(self, position: int, *, rich: bool) -> list[SharedEvent[T]] | None:
        """The events after ``position``; None when the feed cannot tell (``position`` is
        before ``base``, or a ``rich`` follower would get an event without content)."""
        if position < self.base:
            return None
        events = self._events[bisect_right(self._positions, position) :]
        if rich and not all(event.rich for event in events):
            return None
        return events

    @property
    def failures(self) -> int:
        return self._failures

    @property
    def stale(self) -> bool:
        """Whether a follower must ``refresh`` before it trusts ``after``: something was
        published since the last read began, or a read is in progress."""
        return self._news.has_news or self._lock.locked()

    async def wait(self, timeout: float) -> bool:
        """Wait for news, as the last of the members waiting (``pass_on`` wakes the first);
        False after ``timeout`` seconds without."""
        with trio.move_on_after(timeout):
            await self._waiting.park()
            return True
        return False

    async def yield_to_requests(self, position: int) -> None:
        """Until nothing else in this process can run (no task runnable, no I/O ready), or
        ``yield_for`` seconds after the feed read the event at ``position`` (one it holds)."""
        deadline = self._read_at[bisect_left(self._positions, position)] + self.yield_for
        if trio.current_time() < deadline:
            with trio.move_on_at(deadline):
                await wait_all_tasks_blocked()

    def pass_on(self) -> None:
        """Wake the member that has waited longest (the news, or a follower passing it on)."""
        self._waiting.unpark(count=1)

    async def refresh(self, *, failures: int | None = None) -> None:
        """Read what was committed since the last read, if anything was published since it
        began (one read at a time; the others wait for it, then find nothing more to read).
        ``failures``: the feed's ``failures`` when the caller began to wait for news; a read
        that failed since (the one it was woken for) fails this call too."""
        if failures is None:
            failures = self._failures
        async with self._lock:
            if self._failures != failures and self._failure is not None:
                failure = self._failure
                raise ServiceUnavailableError(failure.message, retry_after=failure.retry_after)
            while self.gone is None and self._news.take_news():
                await self._read_news()

    async def _read_news(self) -> None:
        finished = False
        try:
            more = True
            while more:
                self._count_read()
                events, more = await self._read(self.position, self.rich_followers > 0)
                self._append(events)
            finished = True
        except NotFoundError as exc:
            self.gone = exc
            finished = True
        except ServiceUnavailableError as exc:
            self._failures += 1
            self._failure = exc
            raise
        finally:
            if not finished:
                self._news.mark_news()

    def _append(self, events: list[SharedEvent[T]]) -> None:
        now = trio.current_time()
        for event in events:
            if event.position <= self.position:  # never: positions grow in commit order
                continue
            self._events.append(event)
            self._positions.append(event.position)
            self._read_at.append(now)
            self._bytes += event.size
            self._budget.held += event.size
            self.position = event.position
        # What every member that takes events from here has sent is needed no more.
        sent = min((f.position for f in self.members if f.position >= self.base), default=0)
        drop = 0
        while drop < len(self._events) and (
            self._positions[drop] <= sent
            or len(self._events) - drop > self.max_events
            or self._bytes > self.max_bytes
            or self._budget.held > self._budget.limit
        ):
            self._bytes -= self._events[drop].size
            self._budget.held -= self._events[drop].size
            drop += 1
        if drop:
            self.base = self._positions[drop - 1]
            del self._events[:drop], self._positions[:drop], self._read_at[:drop]

    def close(self) -> None:
        self._budget.held -= self._bytes
        self._bytes = 0
        self._events.clear()
        self._positions.clear()
        self._read_at.clear()
        self._news.__exit__(None, None, None)


class Fanout(Generic[T]):
    """The shared feeds of one change stream API in this process, by topic."""

    def __init__(
        self,
        hub: ChangeHub,
        stream: str,
        metrics: Metrics,
        *,
        max_events: int = DEFAULT_STREAM_BUFFER,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_bytes_total: int = DEFAULT_MAX_BYTES_TOTAL,
        yield_for: float = DEFAULT_YIELD_FOR,
    ) -> None:
        self.hub = hub
        self.budget = ByteBudget(max_bytes_total)
        self.stream = stream  # the metrics label: ``memory_stores`` or ``databricks``
        self.metrics = metrics
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.yield_for = yield_for
        self._feeds: dict[str, SharedFeed[T]] = {}

    def feed(self, topic: str) -> SharedFeed[T] | None:
        return self._feeds.get(topic)

    def follower(
        self,
        sub: Subscription,
        position: int,
        *,
        rich: bool,
        read_shared: Read[T],
        read_own: Read[T],
    ) -> Follower[T]:
        """A follower of ``sub``'s topic from ``position``: ``read_shared`` reads every change
        (the feed's reads), ``read_own`` what this follower wants (its catch-up)."""
        return Follower(self, sub, position, rich=rich, read_shared=read_shared, read_own=read_own)

    def _create(self, topic: str, read: Read[T], position: int) -> SharedFeed[T]:
        feed = SharedFeed(
            self.hub.subscribe(topic),
            read,
            position,
            max_events=self.max_events,
            max_bytes=self.max_bytes,
            yield_for=self.yield_for,
            budget=self.budget,
            count_read=lambda: self.metrics.count_stream_read(self.stream, "shared"),
        )
        self._feeds[topic] = feed
        return feed

    def _leave(self, topic: str, feed: SharedFeed[T], follower: Follower[T]) -> None:
        feed.members.discard(follower)
        feed.rich_followers -= follower.rich
        if not feed.members and self._feeds.get(topic) is feed:
            del self._feeds[topic]
            feed.close()


class Follower(Generic[T]):
    """One change stream's place in its topic: ``next()`` gives its next events, oldest first.

    Use as a context manager: leaving releases its feed. It joins the topic's feed as soon as it
    sees one, and reads storage on its own while its position is behind what the feed holds.
    """

    def __init__(
        self,
        fanout: Fanout[T],
        sub: Subscription,
        position: int,
        *,
        rich: bool,
        read_shared: Read[T],
        read_own: Read[T],
    ) -> None:
        self.fanout = fanout
        self.sub = sub
        self.topic = sub.store_id
        self.position = position
        self.rich = rich
        self._read_shared = read_shared
        self._read_own = read_own
        self._feed: SharedFeed[T] | None = None  # the feed it joined

    def _joined(self) -> SharedFeed[T] | None:
        if self._feed is None:
            feed = self.fanout.feed(self.topic)
            if feed is not None:
                feed.members.add(self)
                feed.rich_followers += self.rich
                self._feed = feed
        return self._feed

    async def next(self) -> Next[T]:
        """The next events after this follower's position (moving it past them); ``idle``
        after the hub's heartbeat period without any; ``closed`` when the hub closed.
        Raises ``NotFoundError`` when the store is gone, as storage does."""
        failures: int | None = None  # the feed's failures when this follower began to wait
        woken: SharedFeed[T] | None = None  # the feed whose waiting members it must wake
        yielded = False  # to the requests in progress, once: its events are sent next
        try:
            while True:
                feed = self._joined()
                if feed is not None:
                    if feed.stale:
                        await feed.refresh(failures=failures)
                    failures = None
                    events = feed.after(self.position, rich=self.rich)
                    if events is not None:
                        if events:
                            if not yielded:
                                yielded = True
                                await feed.yield_to_requests(events[0].position)
                                continue  # and send what came meanwhile too, at once
                            self.position = events[-1].position
                            return events
                        if feed.gone is not None:
                            raise feed.gone
                        if self.fanout.hub.closed:
                            return "closed"
                        # Nothing after its position: every member waiting is where it is.
                        woken = None
                        failures = feed.failures
                        if not await feed.wait(self.fanout.hub.heartbeat):
                            return "idle"
                        woken = feed
                        if self.fanout.hub.closed:
                            return "closed"
                        continue
                if woken is not None:  # behind what the feed holds: it reads on its own
                    woken.pass_on()
                    woken = None
                events = await self._catch_up(feed)
                if events:
                    return events
        finally:
            if woken is not None:  # it has something to do: the next member may have too
                woken.pass_on()

    async def _catch_up(self, feed: SharedFeed[T] | None) -> list[SharedEvent[T]]:
        """One page read on its own; at the end of the backlog, join (or create) the feed."""
        seen = feed.position if feed is not None else None
        self.fanout.metrics.count_stream_read(self.fanout.stream, "own")
        events, more = await self._read_own(self.position, self.rich)
        if events:
            self.position = events[-1].position
        if not more:
            if seen is not None:
                self.position = max(self.position, seen)
            elif self.fanout.feed(self.topic) is None:
                # This read's snapshot was taken after ``sub`` subscribed: everything up to
                # ``position`` is read; the new feed reads what came after (module docstring).
                self.fanout._create(self.topic, self._read_shared, self.position)
        return events

    def __enter__(self) -> Follower[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._feed is not None:
            self.fanout._leave(self.topic, self._feed, self)
            self._feed = None
