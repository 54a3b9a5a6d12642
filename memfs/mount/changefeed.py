"""The change feed: notice remote changes (API writes, other mounts) and apply them.

Owns *how* remote changes are learnt and *when*: a ``ChangeSource`` produces batches of
versions; ``ChangeFeed.run`` applies each batch to the filesystem core
(``FeedPort.apply_changes``: a batch that cannot be trusted is compared with the listings
instead), vouches for the cached listings while it is healthy (so a warm store is served with
no requests at all), and hands the kernel invalidations to the daemon's invalidator, which runs
them from a worker thread (never inside a FUSE handler: docs/editors.md §5).

Sources, behind one interface (``next_batch``):
- ``PollingSource``: one request per poll, the store's ``memory_versions`` newest first with
  ``created_at[gte]`` = newest seen minus a small overlap (versions committed out of order are
  not missed; ids already seen are skipped). A full page (100) means a gap: resync. Pace:
  ``interval`` while the mount is in use (a kernel request within ``idle_after`` seconds),
  ``idle_interval`` when idle; the first request after an idle time wakes the feed at once.
  Cost per mount: 60 / ``interval`` requests a minute in use (60 by default), 60 /
  ``idle_interval`` when idle (6 by default).
- ``StreamSource``: the server-pushed change stream (``memfs.api.changes``) when the server
  offers it: no polling; a reconnect resumes from the last cursor, so batches stay trusted.

``ChangeFeed.health`` says how the feed is doing (connected, reconnecting since when and why,
polling, stopped) and ``lag`` how far behind it may be, for ``memfs status``.

This module must not decide file semantics (``vfs`` does) nor call pyfuse3 itself.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

import trio

from memfs.contract.errors import ApiConnectionError, ApiError, StoreGoneError
from memfs.contract.models import MemoryVersion
from memfs.contract.store_api import StoreAPI
from memfs.core import FeedPort

log = logging.getLogger(__name__)

PAGE = 100
OVERLAP = timedelta(seconds=2)


@dataclass
class Batch:
    versions: list[MemoryVersion]
    trusted: bool = True  # False: something may be missing; compare listings instead


class ChangeSource(Protocol):
    name: str

    async def start(self) -> None:
        """Establish the starting point (nothing before it is reported)."""

    async def next_batch(self, interval: float, wake: trio.Event) -> Batch:
        """The next changes; a poller waits ``interval`` (or until ``wake``) first."""


class PollingSource:
    """``memory_versions`` polling, one request per poll (see the module docstring)."""

    name = "poll"

    def __init__(self, store: StoreAPI) -> None:
        self.store = store
        self.since: datetime | None = None
        self._seen: dict[str, datetime] = {}

    async def start(self) -> None:
        page = await self.store.recent_changes(since=None, limit=1)
        if page.data:
            self.since = page.data[0].created_at
            self._seen = {v.id: v.created_at for v in page.data}

    async def next_batch(self, interval: float, wake: trio.Event) -> Batch:
        with trio.move_on_after(interval):
            await wake.wait()
        return await self.poll()

    async def poll(self) -> Batch:
        gte = None if self.since is None else self.since - OVERLAP
        page = await self.store.recent_changes(since=gte, limit=PAGE)
        fresh = [v for v in page.data if v.id not in self._seen]
        for version in fresh:
            self._seen[version.id] = version.created_at
            if self.since is None or version.created_at > self.since:
                self.since = version.created_at
        if self.since is not None:
            horizon = self.since - OVERLAP
            self._seen = {k: t for k, t in self._seen.items() if t >= horizon}
        return Batch(fresh, trusted=page.next_page is None)


class StreamSource:
    """The server-pushed change stream (``memfs.api.changes``)."""

    name = "stream"

    def __init__(self, store: StoreAPI, nursery: trio.Nursery) -> None:
        self.store = store
        self._send, self._receive = trio.open_memory_channel[MemoryVersion | None](10_000)
        self.nursery = nursery  # the stream's reader runs here
        self.broken = False
        # wall time the connection was lost and why (None: connected; a "ready" clears it)
        self.down_since: float | None = None
        self.down_why = ""
        self.interruptions = 0  # connections lost (each one followed by a reconnect)

    async def start(self) -> None:
        ready = trio.Event()
        self.nursery.start_soon(self._read, ready)
        with trio.fail_after(10):
            await ready.wait()

    async def _read(self, ready: trio.Event) -> None:
        try:
            async with self.store.change_stream() as stream:
                async for event in stream:
                    if event.kind == "ready":
                        self.down_since = None
                        ready.set()
                    elif event.kind == "interrupted":
                        if self.down_since is None:
                            self.down_since = time.time()
                        self.down_why = event.detail
                        self.interruptions += 1
                    elif event.version is not None:
                        await self._send.send(event.version)
        except (ApiError, ApiConnectionError) as exc:
            log.warning("change stream ended: %s; polling instead", exc)
        self.broken = True
        await self._send.send(None)

    async def next_batch(self, interval: float, wake: trio.Event) -> Batch:
        first = await self._receive.receive()
        versions = [first] if first is not None else []
        while True:
            try:
                item = self._receive.receive_nowait()
            except trio.WouldBlock:
                break
            if item is not None:
                versions.append(item)
        return Batch(versions, trusted=not self.broken)


@dataclass
class FeedStats:
    source: str = ""
    polls: int = 0
    changes: int = 0
    resyncs: int = 0
    errors: int = 0
    last_ok: float = 0.0  # monotonic
    last_ok_wall: float = 0.0
    last_error: str = ""
    failing_since: float = 0.0  # wall time of the first failed poll since the last good one
    lag_samples: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class FeedHealth:
    """How the feed is doing: ``connected`` (a change stream, subscribed), ``reconnecting``
    (since ``since``, wall time, because ``why``), ``polling`` (every ``interval`` s) or
    ``stopped`` (the store was deleted)."""

    state: str
    since: float | None = None
    why: str = ""
    interval: float = 0.0


class ChangeFeed:
    """Applies a source's batches to a store's core until cancelled (module docstring)."""

    def __init__(
        self,
        vfs: FeedPort,
        source: ChangeSource,
        *,
        interval: float = 1.0,
        idle_interval: float = 10.0,
        idle_after: float = 60.0,
    ) -> None:
        self.vfs = vfs
        self.source = source
        self.interval = interval
        self.idle_interval = idle_interval
        self.idle_after = idle_after
        self.stats = FeedStats(source=source.name)
        self._wake = trio.Event()
        vfs.set_activity_hook(self.wake)

    def wake(self) -> None:
        self._wake.set()

    def in_use(self) -> bool:
        return time.monotonic() - self.vfs.last_activity < self.idle_after

    def current_interval(self) -> float:
        return self.interval if self.in_use() else self.idle_interval

    def health(self) -> FeedHealth:
        """The feed's state in a word (``FeedHealth``); it never changes anything."""
        if self.vfs.gone_since is not None:
            return FeedHealth("stopped")
        source = self.source
        if isinstance(source, StreamSource) and not source.broken:
            if source.down_since is None:
                return FeedHealth("connected")
            return FeedHealth("reconnecting", source.down_since, source.down_why)
        if self.stats.failing_since:
            return FeedHealth("reconnecting", self.stats.failing_since, self.stats.last_error)
        return FeedHealth("polling", interval=self.current_interval())

    def error_count(self) -> int:
        """Failed polls and batches, and connections the change stream lost."""
        lost = self.source.interruptions if isinstance(self.source, StreamSource) else 0
        return self.stats.errors + lost

    def lag(self) -> float | None:
        """Seconds the feed may be behind the store (None: it never knew it). A connected stream
        is not behind, however long nothing changes; a poller is behind since its last poll."""
        health = self.health()
        if health.state == "connected":
            return 0.0
        if health.state == "reconnecting" and isinstance(self.source, StreamSource):
            return time.time() - (health.since or time.time())
        if not self.stats.last_ok:
            return None
        return time.monotonic() - self.stats.last_ok

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        quiet_until = 0.0
        if self.source.name == "stream":
            self.vfs.vouch_listings(math.inf)  # subscribed: every change from now on arrives
        while True:
            interval = self.current_interval()
            self._wake = trio.Event()
            if getattr(self.source, "broken", False):
                self.vfs.withdraw_listings()
                self.source = PollingSource(self.vfs.store)
                self.stats.source = self.source.name
            try:
                batch = await self.source.next_batch(interval, self._wake)
                self.stats.polls += 1
                if not batch.trusted:
                    log.info("change feed: a gap; comparing listings instead")
                applied = await self.vfs.apply_changes(batch.versions, complete=batch.trusted)
                if batch.trusted:
                    self.stats.changes += applied
                else:
                    self.stats.resyncs += 1
                now = time.monotonic()
                self.stats.last_ok = now
                self.stats.failing_since = 0.0
                self.stats.last_ok_wall = time.time()
                # listings stay valid until the next poll is due (plus its round trip)
                horizon = math.inf if self.source.name == "stream" else 2 * interval + 2.0
                self.vfs.vouch_listings(now + horizon)
            except (ApiError, ApiConnectionError, StoreGoneError) as exc:
                self.stats.errors += 1
                self.stats.last_error = str(exc)
                self.stats.failing_since = self.stats.failing_since or time.time()
                if await self.vfs.feed_failed(exc):
                    log.info("change feed stopped: the store no longer exists")
                    return  # never again: polling a deleted store would 404 for ever
                if time.monotonic() > quiet_until:
                    log.warning("change feed: %s", exc)
                    quiet_until = time.monotonic() + 60
                await trio.sleep(min(self.idle_interval, 2 * interval))
            except Exception:
                self.stats.errors += 1
                self.vfs.withdraw_listings()
                log.exception("change feed failed")
                await trio.sleep(interval)
            try:
                await self.vfs.run_invalidations()
            except Exception:
                log.exception("kernel invalidations failed")

    async def run_due_invalidations(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Run the invalidations the core needs at once (``FeedPort.invalidations_due``: a conflict
        re-based a file) without waiting for the next batch; in a worker thread, never inside
        the FUSE handler that caused them (docs/editors.md §5)."""
        task_status.started()
        while True:
            await self.vfs.invalidations_due()
            try:
                await self.vfs.run_invalidations()
            except Exception:
                log.exception("kernel invalidations failed")


async def choose_source(
    vfs: FeedPort, nursery: trio.Nursery, *, use_stream: bool = True
) -> ChangeSource:
    """The change stream when the server offers it, else polling; started."""
    if use_stream:
        try:
            offered = await vfs.store.offers_change_stream()
        except Exception:  # a probe problem is a "no"
            offered = False
        if offered:
            stream = StreamSource(vfs.store, nursery)
            try:
                await stream.start()
                log.info("change feed: the server's change stream")
                return stream
            except (trio.TooSlowError, ApiError, ApiConnectionError) as exc:
                log.warning("change stream unavailable (%s); polling instead", exc)
    poller = PollingSource(vfs.store)
    try:
        await poller.start()
    except (ApiError, ApiConnectionError) as exc:
        log.warning("change feed: no starting point yet (%s)", exc)
    return poller
