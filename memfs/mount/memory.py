"""Giving memory back to the system once the files that held it are gone.

The content of local-only and refused files (``memfs.core.model.budget``) is held in buffers of up
to 100 kB, which glibc's ``malloc`` takes from its heaps, not from ``mmap``: freed, they stay
in the process (its RSS does not go down) until ``malloc_trim`` returns the free pages. So
the daemon trims, at most once per ``interval`` seconds, when the budget's usage has fallen by
``threshold`` bytes since its peak (files are being removed), and once more when it has fallen
at all and stopped falling (the rest of a removal). Elsewhere than on glibc it does nothing.

It must not know about files: it reads one number, the budget's ``total``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from collections.abc import Callable

import trio

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
        interval: float = TRIM_INTERVAL,
        threshold: int = TRIM_THRESHOLD,
    ) -> None:
        self.usage = usage
        self.interval = interval
        self.threshold = threshold
        self.trims = 0
        self._trim = _malloc_trim()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        if self._trim is None:
            return
        peak = last = self.usage()
        while True:
            await trio.sleep(self.interval)
            now = self.usage()
            fell = peak - now
            if fell >= self.threshold or (fell > 0 and now == last):
                self._trim(0)
                self.trims += 1
                log.debug("returned freed memory to the system (usage %d, was %d)", now, peak)
                peak = now
            peak, last = max(peak, now), now
