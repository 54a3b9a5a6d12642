"""The final flush of a mount: what every store has pending, uploaded before the mount goes.

A mount's end may flush twice: at a signal, while the mount still serves (what programs do
meanwhile is served and queued), and once the FUSE loop has ended. Both are one ``FinalFlush``:
one pass at a time, a pass skipped when nothing was asked for since the last one began, and
every pass ending by one deadline (``FINAL_FLUSH_SECONDS`` from the first), transient failures
retried for ``FINAL_RETRY_SECONDS`` of it. Each store's outcome is its ``flush_errors`` (the
last pass's), which the unmount report carries.

It must not save open files or write the report (``memfs.mount.daemon`` does, around it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from memfs.mount import storelog
from memfs.mount.options import FINAL_FLUSH_SECONDS
from memfs.mount.served import ServedStore

log = logging.getLogger(__name__)

# transient failures at unmount are retried this long (a blip, a server restart), so that the
# report reaches those who wait for it in time: `memfs umount` (45 s), a session stop (30 s in all)
FINAL_RETRY_SECONDS = 10.0


class FinalFlush:
    """The final flush of a daemon's stores (module docstring); ``stores`` gives them when a
    pass runs (they are opened after this is made)."""

    def __init__(self, stores: Callable[[], list[ServedStore]], *, several: bool) -> None:
        self._stores = stores
        self._several = several
        self._lock = trio.Lock()
        # set by the first pass: every later one ends by the same time
        self._deadline: float | None = None
        self._retry_deadline = 0.0
        self._requests_flushed: tuple[int, ...] | None = None  # the queues' ``requests``

    async def run(self) -> None:
        """Upload what is pending in every store, deferred renames and deletes included,
        retrying transient failures for ``FINAL_RETRY_SECONDS``; every flush of this daemon
        ends by one deadline (``FINAL_FLUSH_SECONDS`` from the first). A signal flushes while
        the mount still serves, and the daemon again once the FUSE loop has ended (what was
        changed meanwhile); their outcome is the report's. The stores flush side by side."""
        async with self._lock:
            requests = tuple(served.core.upload_requests for served in self._stores())
            if self._requests_flushed == requests:
                return  # nothing was asked for since the last pass began: its outcome stands
            if self._deadline is None:
                self._deadline = trio.current_time() + FINAL_FLUSH_SECONDS
                self._retry_deadline = trio.current_time() + FINAL_RETRY_SECONDS
            for served in self._stores():
                served.core.retry_waiting_for_room()  # room may have appeared unseen
            pending = [served for served in self._stores() if served.core.pending_uploads]
            if not pending or trio.current_time() >= self._deadline:
                return  # nothing left, or no time: the report lists what is pending
            log.info("flushing %d pending uploads", sum(s.core.pending_uploads for s in pending))
            self._requests_flushed = requests  # what this pass was asked for
            for served in self._stores():
                served.flush_errors = []  # a later pass supersedes: what it left is what counts
            with trio.move_on_at(self._deadline) as scope:
                patience = max(0.0, self._retry_deadline - trio.current_time())
                async with trio.open_nursery() as nursery:
                    for served in pending:
                        nursery.start_soon(self._flush_store, served, patience)
            if scope.cancelled_caught:
                for served in pending:
                    served.flush_errors.append(
                        f"final flush did not finish within {FINAL_FLUSH_SECONDS:.0f} s"
                    )

    async def _flush_store(self, served: ServedStore, patience: float) -> None:
        if self._several:
            storelog.CURRENT.set(served.spec.slug)
        try:
            failures = await served.core.flush_all(patience=patience)
        except Exception as exc:  # one store's trouble is not the others'
            log.exception("final flush of %s failed", served.store.described)
            failures = [exc]
        served.flush_errors += [f"final upload failed: {failure}" for failure in failures]
