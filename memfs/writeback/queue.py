"""The delayed upload queue for dirty files and deferred store operations.

Owns *when* an upload runs: one entry per key (the filesystem core uses inode numbers and
pending deletes), a due time, at most one run per key at a time, collapsing of repeated
requests, retries for transient errors (for as long as the queue runs: work it accepted is
never given up on for a transient error) with the one retry policy of memfs (``RetryPolicy``:
full jitter, so mounts that failed together do not retry in lockstep, or the server's
``retry-after``), ``flush(key)`` (run now and report the outcome; with ``patience``, keep
retrying transient failures that long: fsync) and ``flush_all()`` (fsync of a directory,
unmount). *What* an upload does is the ``upload(key)`` function it is given: the queue holds
no data, so dirty content never lives here nor in a cache.

Durability hooks: ``on_queued(key)`` runs (synchronously) every time ``schedule`` records work,
so the caller can write its journal record before the operation that asked is acknowledged;
``on_done(key, error)`` runs when the entry goes away: after success (``error`` None), after
``cancel`` (None), or after a permanent failure (the error, after ``on_failure``);
``on_cancel(key)`` runs after that ``on_done`` of a ``cancel``, before ``cancel`` returns (what
forgets the work must be durable before the operation that cancelled it is acknowledged);
``on_retry(key, error)`` runs after each transient failure that stays queued for a retry. The
queue itself still holds no data.

Invariants:
- an entry exists while work for its key is outstanding; it is removed only after a run that
  succeeded (and was not re-requested meanwhile), after ``cancel``, or after a permanent
  failure has been handed to ``on_failure``;
- a key never runs twice at the same time; ``schedule`` while running sets ``rerun``;
- a run cancelled in the middle (a ``flush`` deadline) counts as a transient failure: the
  entry stays (unless ``cancel`` forgot it meanwhile), due again after a backoff, and its
  waiters are woken.

This module must not import the client, pyfuse3 or the filesystem core (only the retry policy).
"""

from __future__ import annotations

import collections
import logging
import math
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field

import trio

from memfs.contract.retry import RetryPolicy

log = logging.getLogger(__name__)

UploadFn = Callable[[Hashable], Awaitable[None]]

# runs of one key in one ``flush_all``: a key re-requested by every run (a writer that never
# stops) must not keep a directory fsync or an unmount from returning
FLUSH_RUNS = 3


def _never_transient(exc: BaseException) -> bool:
    return False


def _ignore_failure(key: Hashable, exc: BaseException) -> None:
    return None


def _ignore_queued(key: Hashable) -> None:
    return None


def _ignore_done(key: Hashable, exc: BaseException | None) -> None:
    return None


def _ignore_retry(key: Hashable, exc: BaseException) -> None:
    return None


def _ignore_cancel(key: Hashable) -> None:
    return None


@dataclass
class _Entry:
    due: float
    attempts: int = 0
    running: bool = False
    rerun: bool = False
    cancelled: bool = False
    error: Exception | None = None  # of the last run that failed transiently
    finished: trio.Event = field(default_factory=trio.Event)


class WriteBack:
    """Runs ``upload(key)`` when each key falls due; see the module docstring."""

    def __init__(
        self,
        upload: UploadFn,
        *,
        is_transient: Callable[[BaseException], bool] = _never_transient,
        on_failure: Callable[[Hashable, BaseException], None] = _ignore_failure,
        on_queued: Callable[[Hashable], None] = _ignore_queued,
        on_done: Callable[[Hashable, BaseException | None], None] = _ignore_done,
        on_retry: Callable[[Hashable, BaseException], None] = _ignore_retry,
        on_cancel: Callable[[Hashable], None] = _ignore_cancel,
        retry: RetryPolicy | None = None,
        concurrency: int = 4,
    ) -> None:
        self._upload = upload
        self._is_transient = is_transient
        self._on_failure = on_failure
        self.on_queued = on_queued
        self.on_done = on_done
        self.on_retry = on_retry
        self.on_cancel = on_cancel
        self._retry = retry or RetryPolicy(base_delay=0.5, max_delay=30.0)
        self._limiter = trio.CapacityLimiter(concurrency)
        self._entries: dict[Hashable, _Entry] = {}
        self._wake = trio.Event()
        # Every ``schedule`` so far: a caller that remembers it knows whether work was asked
        # for since (the daemon's second final flush runs only if something was).
        self.requests = 0

    # -- queries ---------------------------------------------------------------------------

    def pending(self, key: Hashable) -> bool:
        return key in self._entries

    def running(self, key: Hashable) -> bool:
        entry = self._entries.get(key)
        return entry is not None and entry.running

    def keys(self) -> list[Hashable]:
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    # -- requests --------------------------------------------------------------------------

    def schedule(self, key: Hashable, delay: float, *, debounce: bool = False) -> None:
        """Run ``upload(key)`` in ``delay`` seconds.

        Without ``debounce`` an earlier due time already set is kept (repeated saves collapse
        into one upload); with it the due time moves to ``now + delay`` (left alone that long).
        """
        due = trio.current_time() + max(0.0, delay)
        entry = self._entries.get(key)
        if entry is None:
            self._entries[key] = _Entry(due=due)
        else:
            entry.cancelled = False
            if entry.running:
                entry.rerun = True
                entry.due = due
            elif debounce or due < entry.due:
                entry.due = due
        self.requests += 1
        self.on_queued(key)
        self._wake.set()

    def cancel(self, key: Hashable) -> None:
        """Forget the pending work of ``key`` (a run in progress finishes but is not repeated)."""
        entry = self._entries.get(key)
        if entry is not None and entry.running:
            entry.cancelled = True
            entry.rerun = False
        elif entry is not None:
            del self._entries[key]
        self.on_done(key, None)
        self.on_cancel(key)

    async def flush(self, key: Hashable, *, patience: float = 0.0) -> None:
        """Run the pending work of ``key`` now and wait; raise the error of that run.

        Returns at once when nothing is pending. A transient failure stays queued for retry
        but is raised here all the same (the caller is waiting for the server to have it).
        With ``patience`` (seconds) a transient failure is retried, after the queue's backoff,
        until the work is done or that time is up (a run in progress then is cancelled: it
        stays queued); the last error is raised, ``trio.TooSlowError`` if no run ended. Work
        cancelled meanwhile ends the wait without an error (nothing is left to do). A permanent
        failure is raised at once (after ``on_failure`` has heard it).
        """
        if patience <= 0:
            exc = await self._flush_once(key)
            if exc is not None:
                raise exc
            return
        error: Exception | None = None
        with trio.move_on_after(patience):
            while True:
                error = await self._flush_once(key)
                if error is not None and not self._is_transient(error):
                    raise error  # a permanent failure has no entry left: look before that
                entry = self._entries.get(key)
                if error is None or entry is None:
                    return
                await trio.sleep_until(entry.due)
        entry = self._entries.get(key)
        if entry is None:
            return
        raise error or entry.error or trio.TooSlowError(f"{key} not done within {patience} s")

    async def _flush_once(self, key: Hashable) -> Exception | None:
        """Run ``key`` now unless a run is in progress; the error of the run that ended."""
        while True:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry.running:
                await entry.finished.wait()
                if self._entries.get(key) is entry and entry.error is not None:
                    return entry.error  # that run failed transiently: its backoff holds
                continue
            return await self._run_one(key, entry)

    async def flush_all(self, *, patience: float = 0.0) -> list[BaseException]:
        """Run everything pending now (deferred work too); return the errors of this pass.

        Keys re-requested while they ran (a file renamed while its create ran) are run again,
        up to ``FLUSH_RUNS`` times; keys that keep failing transiently are tried once, or for
        ``patience`` seconds (see ``flush``). Without patience, callers bound this with a
        deadline.
        """
        errors: list[BaseException] = []
        runs: collections.Counter[Hashable] = collections.Counter()
        failed: set[Hashable] = set()
        give_up = trio.current_time() + patience

        async def one(key: Hashable) -> None:
            left = give_up - trio.current_time()
            runs[key] += 1
            try:
                await self.flush(key, patience=left if patience > 0 else 0.0)
            except Exception as exc:
                errors.append(exc)
                failed.add(key)

        while True:
            todo = [k for k in self._entries if k not in failed and runs[k] < FLUSH_RUNS]
            if not todo:
                return errors
            async with trio.open_nursery() as nursery:
                for key in todo:
                    nursery.start_soon(one, key)

    # -- the loop --------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Start due uploads until cancelled."""
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                now = trio.current_time()
                next_due = math.inf
                for key, entry in list(self._entries.items()):
                    if entry.running:
                        continue
                    if entry.due <= now:
                        entry.running = True  # claimed before the task starts
                        nursery.start_soon(self._run_background, key, entry)
                    else:
                        next_due = min(next_due, entry.due)
                self._wake = trio.Event()
                with trio.move_on_at(next_due):
                    await self._wake.wait()

    async def _run_background(self, key: Hashable, entry: _Entry) -> None:
        async with self._limiter:
            await self._run_one(key, entry, claimed=True)

    async def _run_one(
        self, key: Hashable, entry: _Entry, *, claimed: bool = False
    ) -> Exception | None:
        if entry.running and not claimed:
            raise RuntimeError("run of a key that is already running")
        entry.running = True
        entry.rerun = False
        error: Exception | None = None
        try:
            await self._upload(key)
        except Exception as exc:
            error = exc
        except BaseException:
            # cancelled mid-run (a flush's deadline, shutdown): whether the server applied it
            # is unknown, as after a lost answer; the work stays queued and is retried, unless
            # ``cancel`` forgot it meanwhile (a retry would resurrect a deleted file)
            entry.running = False
            if self._entries.get(key) is entry:
                if entry.cancelled:
                    del self._entries[key]
                else:
                    entry.attempts += 1
                    entry.due = trio.current_time() + self._backoff(entry)
            self._finished(entry)
            raise
        finally:
            entry.running = False
        if self._entries.get(key) is entry:
            if entry.cancelled:
                del self._entries[key]
            elif error is None:
                entry.attempts = 0
                entry.error = None
                if not entry.rerun:
                    del self._entries[key]
                    self.on_done(key, None)
            elif self._is_transient(error):
                entry.attempts += 1
                entry.error = error
                backoff = self._backoff(entry)
                if not entry.rerun:
                    entry.due = trio.current_time() + backoff
                log.warning(
                    "upload of %s failed (attempt %d), retrying in %.1f s: %s",
                    key,
                    entry.attempts,
                    backoff,
                    error,
                )
                self.on_retry(key, error)
            else:
                del self._entries[key]
                log.error("upload of %s failed for good: %s", key, error)
                self._on_failure(key, error)
                self.on_done(key, error)
        self._finished(entry)
        return error

    def _backoff(self, entry: _Entry) -> float:
        return self._retry.delay_after(entry.attempts, entry.error)

    def _finished(self, entry: _Entry) -> None:
        # waiters may have started waiting while the run was claimed but not started: set the
        # event they hold, and give later waiters (of a re-run) a fresh one
        finished, entry.finished = entry.finished, trio.Event()
        finished.set()
        self._wake.set()
