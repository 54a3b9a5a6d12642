"""Change notification for the change stream: who must look at a store again, and when.

A notification carries no data, only "store S has committed something new": the store's shared
reader (``fanout.SharedFeed``, one per followed store in this process) then reads the changes
after its position *from storage*, once for every stream that follows S, and a stream behind it
reads after its own cursor. So a lost, duplicated or coalesced notification can delay an event
but never lose or reorder one, and replay after a reconnect and live streaming are the same code
path.

- ``ChangeHub``: the in-process fan-out of notifications. ``subscribe(store_id)`` returns a
  ``Subscription`` whose ``wait()`` returns once something was published for that store since
  the previous ``wait()`` (or the hub closed); ``take_news()`` is the same without waiting (a
  store's shared reader reads only when there is news), and ``on_news`` is called at each
  notification (the shared reader wakes the first of its streams that wait). Subscribe
  *before* reading storage: a publish that lands during the read then wakes the next
  ``wait()`` at once, so nothing slips between.
  It also bounds the open streams of each API key (``max_streams_per_key``): one more
  ``subscribe(…, key=…)`` raises ``TooManyStreamsError`` (a 429 with ``retry-after``), so a
  client cannot hold unbounded connections, subscriptions and tasks. The bound is per process
  (each PostgreSQL replica counts its own).
- ``NotifyingStorage``: wraps a ``Storage`` and publishes to the hub after each successful
  mutation that appends a version (or deletes a store); its ``databricks`` is a
  ``NotifyingDatabricks``, which publishes ``databricks_storage.change_topic(store)`` after each
  entry write and store delete. This is the SQLite feed: one server process owns a SQLite file,
  so every write passes through it.
- ``PgListener``: the PostgreSQL feed. A dedicated connection in a worker thread ``LISTEN``s
  on ``postgres.CHANNEL``; the backend sends ``pg_notify`` inside each mutation transaction,
  so only committed changes are announced, by whichever replica wrote them, to every replica
  (the payload is the topic: a Memory Stores store id, or a Databricks store's topic).
  After a lost connection it reconnects (every ``reconnect_delay`` seconds; a warning when it is
  lost, an info line when it is back) and wakes every subscriber (they re-read storage).

Cursors: a stream position is the ``created_at`` of the last version seen, in integer
microseconds since the epoch (``encode_cursor``). ``created_at`` strictly increases within a
store in commit order (a ``Storage`` invariant), so "versions after this cursor" is exact.

This module must not contain routes or SQL other than ``LISTEN``.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from datetime import datetime
from types import TracebackType
from typing import Any

import trio

from memfs.contract.errors import RateLimitError
from memfs.contract.models import Actor, Memory, MemoryStore, MemoryVersion
from memfs.server.console_storage import ConsoleStorage
from memfs.server.databricks_storage import (
    ChangeBounds,
    DatabricksStorage,
    DbxChange,
    DbxEntry,
    DbxStore,
    EntryFilter,
    EntryPatch,
    EntryPosition,
    NewEntry,
    Page,
    SearchRequest,
    change_topic,
)
from memfs.server.sql import from_us, to_us
from memfs.server.storage import (
    ListItem,
    MemoryPosition,
    MetadataPatch,
    Slice,
    Storage,
    StoreFilter,
    StorePosition,
    VersionFilter,
)

log = logging.getLogger(__name__)

DEFAULT_HEARTBEAT = 15.0
DEFAULT_MAX_STREAMS_PER_KEY = 64  # a mount holds one per store; a key serves many mounts
DEFAULT_STREAM_BUFFER = 1024  # recent changes a store's streams share (memfs.server.fanout)
STREAMS_RETRY_AFTER = 10.0  # seconds a refused stream is asked to wait before trying again
ORIGIN = from_us(0)  # the position before every version


def encode_cursor(created_at: datetime) -> str:
    return str(to_us(created_at))


def position_of(created_at: datetime) -> int:
    """A version's position in its store's stream (the number in its cursor)."""
    return to_us(created_at)


def from_position(position: int) -> datetime:
    return from_us(position)


def decode_cursor(text: str) -> datetime | None:
    """The position in a cursor, or None if ``text`` is not one."""
    if not text.isascii() or not text.isdigit() or len(text) > 20:
        return None
    try:
        return from_us(int(text))
    except OverflowError:  # past year 9999: no version is there
        return None


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


class NotifyingStorage(Storage):
    """A ``Storage`` that publishes to a hub after each committed change of a store."""

    def __init__(self, inner: Storage, hub: ChangeHub) -> None:
        self.inner = inner
        self.hub = hub
        self._databricks = NotifyingDatabricks(inner.databricks, hub)

    async def create_store(
        self, *, name: str, description: str, metadata: dict[str, str]
    ) -> MemoryStore:
        return await self.inner.create_store(name=name, description=description, metadata=metadata)

    async def get_store(self, store_id: str) -> MemoryStore:
        return await self.inner.get_store(store_id)

    async def list_stores(
        self, flt: StoreFilter, *, after: StorePosition | None, limit: int
    ) -> Slice[MemoryStore, StorePosition]:
        return await self.inner.list_stores(flt, after=after, limit=limit)

    async def update_store(
        self,
        store_id: str,
        *,
        name: str | None = None,
        description: str | None = None,
        metadata: MetadataPatch | None = None,
    ) -> MemoryStore:
        return await self.inner.update_store(
            store_id, name=name, description=description, metadata=metadata
        )

    async def archive_store(self, store_id: str) -> MemoryStore:
        return await self.inner.archive_store(store_id)

    async def delete_store(self, store_id: str) -> None:
        await self.inner.delete_store(store_id)
        self.hub.publish(store_id)

    @property
    def databricks(self) -> DatabricksStorage:
        return self._databricks

    @property
    def console(self) -> ConsoleStorage:
        return self.inner.console  # sessions are no change of a store: nothing to publish

    async def create_memory(
        self, store_id: str, *, path: str, content: str, actor: Actor
    ) -> Memory:
        memory = await self.inner.create_memory(store_id, path=path, content=content, actor=actor)
        self.hub.publish(store_id)
        return memory

    async def get_memory(self, store_id: str, memory_id: str) -> Memory:
        return await self.inner.get_memory(store_id, memory_id)

    async def list_memories(
        self,
        store_id: str,
        *,
        prefix: str,
        depth: int,
        after: MemoryPosition | None,
        limit: int,
        with_content: bool,
    ) -> Slice[ListItem, MemoryPosition]:
        return await self.inner.list_memories(
            store_id,
            prefix=prefix,
            depth=depth,
            after=after,
            limit=limit,
            with_content=with_content,
        )

    async def update_memory(
        self,
        store_id: str,
        memory_id: str,
        *,
        content: str | None,
        path: str | None,
        expected_sha256: str | None,
        actor: Actor,
    ) -> Memory:
        memory = await self.inner.update_memory(
            store_id,
            memory_id,
            content=content,
            path=path,
            expected_sha256=expected_sha256,
            actor=actor,
        )
        self.hub.publish(store_id)  # a no-op update wakes subscribers needlessly, harmlessly
        return memory

    async def delete_memory(
        self, store_id: str, memory_id: str, *, expected_sha256: str | None, actor: Actor
    ) -> None:
        await self.inner.delete_memory(
            store_id, memory_id, expected_sha256=expected_sha256, actor=actor
        )
        self.hub.publish(store_id)

    async def search_memories(
        self, store_id: str, query: str, *, limit: int, path_prefix: str | None
    ) -> list[tuple[Memory, float]]:
        return await self.inner.search_memories(
            store_id, query, limit=limit, path_prefix=path_prefix
        )

    async def list_versions(
        self,
        store_id: str,
        flt: VersionFilter,
        *,
        after: int | None,
        limit: int,
        with_content: bool,
        oldest_first: bool = False,
    ) -> Slice[MemoryVersion, int]:
        return await self.inner.list_versions(
            store_id,
            flt,
            after=after,
            limit=limit,
            with_content=with_content,
            oldest_first=oldest_first,
        )

    async def get_version(self, store_id: str, version_id: str) -> MemoryVersion:
        return await self.inner.get_version(store_id, version_id)

    async def redact_version(
        self, store_id: str, version_id: str, *, actor: Actor
    ) -> MemoryVersion:
        return await self.inner.redact_version(store_id, version_id, actor=actor)

    async def prune_versions(self, older_than: datetime) -> int:
        return await self.inner.prune_versions(older_than)

    async def ping(self) -> None:
        await self.inner.ping()

    async def aclose(self) -> None:
        await self.inner.aclose()


class NotifyingDatabricks(DatabricksStorage):
    """A ``DatabricksStorage`` that publishes a store's topic after each committed change."""

    def __init__(self, inner: DatabricksStorage, hub: ChangeHub) -> None:
        self.inner = inner
        self.hub = hub

    async def create_store(
        self, store_id: str, *, description: str | None, creator: str
    ) -> DbxStore:
        return await self.inner.create_store(store_id, description=description, creator=creator)

    async def get_store(self, store_id: str) -> DbxStore:
        return await self.inner.get_store(store_id)

    async def list_stores(self, *, after: str | None, limit: int) -> Page[DbxStore, str]:
        return await self.inner.list_stores(after=after, limit=limit)

    async def update_store(self, store_id: str, *, description: str | None) -> DbxStore:
        return await self.inner.update_store(store_id, description=description)

    async def delete_store(self, store_id: str) -> None:
        await self.inner.delete_store(store_id)
        self.hub.publish(change_topic(store_id))

    async def create_entry(self, store_id: str, entry: NewEntry) -> DbxEntry:
        created = await self.inner.create_entry(store_id, entry)
        self.hub.publish(change_topic(store_id))
        return created

    async def get_entry(self, store_id: str, entry_id: str, *, with_content: bool) -> DbxEntry:
        return await self.inner.get_entry(store_id, entry_id, with_content=with_content)

    async def list_entries(
        self,
        store_id: str,
        flt: EntryFilter,
        *,
        after: EntryPosition | None,
        limit: int,
        with_content: bool,
    ) -> Page[DbxEntry, EntryPosition]:
        return await self.inner.list_entries(
            store_id, flt, after=after, limit=limit, with_content=with_content
        )

    async def update_entry(
        self,
        store_id: str,
        entry_id: str,
        patch: EntryPatch,
        *,
        expected_sha256: str | None = None,
        expected_description_sha256: str | None = None,
    ) -> DbxEntry:
        updated = await self.inner.update_entry(
            store_id,
            entry_id,
            patch,
            expected_sha256=expected_sha256,
            expected_description_sha256=expected_description_sha256,
        )
        self.hub.publish(change_topic(store_id))  # a no-op update wakes streams harmlessly
        return updated

    async def delete_entry(
        self, store_id: str, entry_id: str, *, expected_sha256: str | None = None
    ) -> None:
        await self.inner.delete_entry(store_id, entry_id, expected_sha256=expected_sha256)
        self.hub.publish(change_topic(store_id))

    async def search_entries(
        self, store_id: str, request: SearchRequest, *, with_content: bool
    ) -> list[tuple[DbxEntry, float]]:
        return await self.inner.search_entries(store_id, request, with_content=with_content)

    async def list_changes(
        self, store_id: str, *, after: int, actor_id: str | None, limit: int
    ) -> list[DbxChange]:
        return await self.inner.list_changes(store_id, after=after, actor_id=actor_id, limit=limit)

    async def change_bounds(self, store_id: str) -> ChangeBounds:
        return await self.inner.change_bounds(store_id)


class PgListener:
    """Feeds a ``ChangeHub`` from PostgreSQL ``LISTEN`` (see the module docstring).

    Start with ``await nursery.start(listener.run)``: it returns once the first ``LISTEN`` is
    in place, so every change committed afterwards is announced.
    """

    def __init__(
        self,
        url: str,
        hub: ChangeHub,
        *,
        channel: str | None = None,
        poll: float = 0.2,
        reconnect_delay: float = 1.0,
    ) -> None:
        from memfs.server.postgres import CHANNEL

        self.url = url
        self.hub = hub
        self.channel = channel or CHANNEL
        self.poll = poll
        self.reconnect_delay = reconnect_delay
        self._stop = threading.Event()
        self._done = threading.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        token = trio.lowlevel.current_trio_token()
        started = trio.Event()

        def call(fn: Callable[[], Any]) -> bool:
            try:
                trio.from_thread.run_sync(fn, trio_token=token)
            except trio.RunFinishedError:
                return False
            return True

        self._stop.clear()
        self._done.clear()
        try:
            async with trio.open_nursery() as nursery:

                async def listen() -> None:
                    await trio.to_thread.run_sync(
                        self._thread_main, call, started.set, abandon_on_cancel=True
                    )

                nursery.start_soon(listen)
                await started.wait()
                task_status.started()
        finally:
            self._stop.set()
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self._done.wait, self.poll * 5 + 5)

    def _thread_main(
        self, call: Callable[[Callable[[], Any]], bool], on_listening: Callable[[], None]
    ) -> None:
        import psycopg

        first = True
        lost = False  # the connection was lost and not yet regained: one warning per outage
        try:
            while not self._stop.is_set():
                try:
                    with psycopg.connect(self.url, autocommit=True) as conn:
                        conn.execute(f'LISTEN "{self.channel}"')
                        log.debug("listening for changes on %s", self.channel)
                        if lost:
                            log.info("change listener reconnected to PostgreSQL")
                            lost = False
                        # Changes committed while we were not listening: everyone re-reads.
                        if not call(on_listening if first else self.hub.publish_all):
                            return
                        first = False
                        while not self._stop.is_set():
                            for note in conn.notifies(timeout=self.poll):
                                if not call(functools.partial(self.hub.publish, note.payload)):
                                    return
                except psycopg.Error as exc:
                    log.log(
                        logging.DEBUG if lost else logging.WARNING,
                        "change listener lost its PostgreSQL connection (%s); reconnecting",
                        type(exc).__name__,
                    )
                    lost = True
                    self._stop.wait(self.reconnect_delay)
        finally:
            self._done.set()
