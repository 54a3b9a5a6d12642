"""When and how long the client waits before trying a request again.

Owns the retry decision for one attempt's outcome (which statuses are transient) and the delay
(exponential backoff with full jitter, or the server's ``retry-after``). It must not sleep,
send anything or import httpx: the client asks, then sleeps with ``trio.sleep``.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

# Statuses worth another try: request timeout, rate limit, server errors, overloaded.
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 529})
# Statuses that mean the server refused the request before doing anything, so even an
# operation that is not idempotent may be sent again.
NOT_APPLIED_STATUSES = frozenset({408, 429, 529})


@dataclass
class RetryPolicy:
    """Backoff settings. ``delay(n)`` is the wait before retry number ``n`` (1-based)."""

    base_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 60.0  # a server asking for longer is capped to this
    rng: random.Random = field(default_factory=random.Random)

    def should_retry_status(self, status: int, headers: Mapping[str, str]) -> bool:
        hint = headers.get("x-should-retry", "").lower()
        if hint == "true":
            return True
        if hint == "false":
            return False
        return status in RETRY_STATUSES

    def delay(self, retry_number: int, headers: Mapping[str, str] | None = None) -> float:
        """Seconds to wait: the server's ``retry-after`` if it gave one, else full jitter."""
        if headers is not None:
            asked = retry_after_seconds(headers)
            if asked is not None:
                return min(asked, self.max_retry_after)
        ceiling = min(self.max_delay, self.base_delay * (2 ** (retry_number - 1)))
        return self.rng.uniform(0, ceiling)


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
        if value >= 0 and value == value:  # not negative, not NaN
            return value
    return None
