"""The one retry policy of memfs: which failures are transient, and how long to wait.

Used by the client (each request), the change stream (each reconnect) and the write-back queue
(each upload), so that every retry in memfs waits the same way:
- ``is_transient(exc)``: the one predicate for "the server or the network may recover"
  (connection failures, timeouts, 408, 429, 5xx, 529);
- ``RetryPolicy.delay(n, ...)``: the wait before retry ``n``: the server's ``retry-after`` when it
  sent one (capped), else exponential backoff with *full jitter* (uniform between 0 and the
  ceiling), so that clients that failed together (an outage) do not retry in lockstep;
- ``RetryPolicy.within(deadline, now, wait)``: whether a wait still ends before a deadline (a
  syscall's caller never sleeps past the time it was promised an answer).

The random source is injectable (``rng``) so tests check the jitter exactly, not by timing. This
module must not sleep, send anything or import httpx: callers ask, then sleep with trio.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from memfs.contract.errors import ApiConnectionError, ApiError

log = logging.getLogger(__name__)

# Statuses worth another try: request timeout, rate limit, server errors, overloaded (every
# other 5xx counts too: ``is_transient_status``).
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 529})
# Statuses that mean the server refused the request before doing anything, so even an
# operation that is not idempotent may be sent again.
NOT_APPLIED_STATUSES = frozenset({408, 429, 529})


def is_transient_status(status: int) -> bool:
    return status in RETRY_STATUSES or status >= 500


def is_transient(exc: BaseException) -> bool:
    """Errors worth retrying (the server or the network may recover): connection failures and
    timeouts, 408, 429, 5xx, 529. Anything else is the request's own fault."""
    if isinstance(exc, ApiConnectionError):
        return True
    return isinstance(exc, ApiError) and is_transient_status(exc.status)


class RandomSource(Protocol):
    """What the policy needs of ``random.Random`` (tests pass a fixed fraction)."""

    def uniform(self, a: float, b: float) -> float: ...


@dataclass
class RetryPolicy:
    """Backoff settings. ``delay(n)`` is the wait before retry number ``n`` (1-based)."""

    base_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 60.0  # a server asking for longer is capped to this
    rng: RandomSource = field(default_factory=random.Random)

    def should_retry_status(self, status: int, headers: Mapping[str, str]) -> bool:
        hint = headers.get("x-should-retry", "").lower()
        if hint == "true":
            return True
        if hint == "false":
            return False
        return is_transient_status(status)

    def delay(
        self,
        retry_number: int,
        headers: Mapping[str, str] | None = None,
        *,
        retry_after: float | None = None,
    ) -> float:
        """Seconds to wait: the server's ``retry-after`` (from ``headers``, or as seconds), if
        it gave one, else full jitter below ``min(max_delay, base_delay * 2**(n-1))``."""
        if headers is not None and retry_after is None:
            retry_after = retry_after_seconds(headers)
        if retry_after is not None:
            return min(retry_after, self.max_retry_after)
        ceiling = min(self.max_delay, self.base_delay * (2 ** (max(retry_number, 1) - 1)))
        return self.rng.uniform(0, ceiling)

    def delay_after(self, retry_number: int, error: BaseException | None) -> float:
        """``delay`` after ``error``, honouring the ``retry-after`` its answer carried."""
        retry_after = error.retry_after if isinstance(error, ApiError) else None
        return self.delay(retry_number, retry_after=retry_after)

    @staticmethod
    def within(deadline: float | None, now: float, wait: float) -> bool:
        """True if a retry after ``wait`` seconds still starts before ``deadline`` (None: no
        deadline)."""
        return deadline is None or now + wait < deadline


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """``retry-after-ms`` or ``retry-after`` (seconds) as a non-negative float, else None.

    The HTTP-date form of ``retry-after`` is not used by the API and is ignored.
    """
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            value = float(raw.strip()) * scale
        except ValueError:
            continue
        if 0 <= value < float("inf"):  # not negative, not NaN, not infinite
            return value
    return None
