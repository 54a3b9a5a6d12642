"""Giving memory back to the system once the files or cache entries that held it are gone.

The content of local-only and refused files (``memfs.core.model.budget``) is held in buffers of up
to 100 kB, which glibc's ``malloc`` takes from its heaps, not from ``mmap``: freed, they stay
in the process (its RSS does not go down) until ``malloc_trim`` returns the free pages. So
the daemon trims, at most once per ``interval`` seconds, when the budget's usage has fallen by
``threshold`` bytes since its peak (files are being removed), and once more when it has fallen
at all and stopped falling (the rest of a removal). Cached contents come and go the same way
(an edit replaces a memory's cached content; a full cache evicts its oldest): the daemon also
trims when the caches have released ``threshold`` bytes since the last trim (``released``, the
cache budget's count). Without it, the freed holes of a busy mount's heap grow its RSS well past
its cache budget (docs/benchmarks.md, "Memory in steady state"). Elsewhere than on glibc it does
nothing.

It must not know about files or caches: it reads two numbers, the local budget's ``total``
and the cache budget's ``released``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import trio

from memfs.host.private import replace_file

log = logging.getLogger(__name__)

TRIM_INTERVAL = 2.0
TRIM_THRESHOLD = 4 * 1024 * 1024


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


class MemoryReturn:
    """Trims the heap after the local budget's usage fell (see the module docstring)."""

    def __init__(
        self,
        usage: Callable[[], int],
        *,
        released: Callable[[], int] = lambda: 0,
        interval: float = TRIM_INTERVAL,
        threshold: int = TRIM_THRESHOLD,
    ) -> None:
        self.usage = usage
        self.released = released
        self.interval = interval
        self.threshold = threshold
        self.trims = 0
        self._trim = _malloc_trim()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        if self._trim is None:
            return
        peak = last = self.usage()
        released_at_trim = self.released()
        while True:
            await trio.sleep(self.interval)
            now = self.usage()
            fell = peak - now
            released = self.released()
            churned = released - released_at_trim >= self.threshold
            if fell >= self.threshold or (fell > 0 and now == last) or churned:
                self._trim(0)
                self.trims += 1
                log.debug("returned freed memory to the system (usage %d, was %d)", now, peak)
                peak = now
                released_at_trim = released
            peak, last = max(peak, now), now


DEBUG_FILE_VARIABLE = "MEMFS_DEBUG_MEMORY_FILE"
SITES_INTERVAL = 10.0
SITES_SHOWN = 30


class AllocationSites:
    """A debugging aid: where the daemon's Python memory was allocated, written every
    ``interval`` seconds to the file ``$MEMFS_DEBUG_MEMORY_FILE`` names, when the daemon runs
    under ``tracemalloc`` (``PYTHONTRACEMALLOC=1``; python -m bench memory --trace). Does
    nothing otherwise. The file is the operator's own: written only where they asked, and as
    every file the daemon (often root) writes, through ``memfs.host.private.replace_file``: a link
    planted at its name is replaced, never followed, and a directory others could swap it in is
    refused. A write that fails is logged and the sites are not written again: a debugging aid
    never stops a mount."""

    def __init__(self, path: str, *, interval: float = SITES_INTERVAL) -> None:
        self.path = path
        self.interval = interval

    @classmethod
    def from_environment(cls) -> AllocationSites | None:
        path = os.environ.get(DEBUG_FILE_VARIABLE)
        return cls(path) if path and tracemalloc.is_tracing() else None

    def write(self) -> None:
        """Write the current sites (``OSError``, ``NotPrivateError`` included, if it cannot)."""
        snapshot = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)]
        )
        stats = snapshot.statistics("lineno")
        total = sum(stat.size for stat in stats)
        lines = [f"traced: {total / 1e6:.1f} MB in {len(stats)} sites"]
        lines += [
            f"{stat.size / 1e6:8.2f} MB {stat.count:8d} blocks  {stat.traceback[0]}"
            for stat in stats[:SITES_SHOWN]
        ]
        data = ("\n".join(lines) + "\n").encode("utf-8")
        replace_file(Path(self.path), data, "allocation sites file")

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await trio.sleep(self.interval)
            try:
                self.write()
            except OSError as exc:
                log.warning("%s: %s; not written again", DEBUG_FILE_VARIABLE, exc)
                return
