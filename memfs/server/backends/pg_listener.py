"""The PostgreSQL change feed: ``PgListener`` relays ``NOTIFY`` to a ``ChangeHub``.

A dedicated connection in a worker thread ``LISTEN``s on ``postgres.CHANNEL``; the backend
sends ``pg_notify`` inside each mutation transaction, so only committed changes are announced,
by whichever replica wrote them, to every replica (the payload is the topic: a Memory Stores
store id, or a Databricks store's topic). After a lost connection it reconnects (every
``reconnect_delay`` seconds; a warning when it is lost, an info line when it is back) and wakes
every subscriber (they re-read storage).

This module must not contain SQL other than ``LISTEN``.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

import trio

from memfs.server.db.notify import ChangeHub

log = logging.getLogger(__name__)


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
        from memfs.server.backends.postgres import CHANNEL

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
