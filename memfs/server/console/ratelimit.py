"""How many failed sign-ins the console accepts: per client address, and overall.

``SignInLimiter`` keeps token buckets in this process's memory (each replica counts its own, as
the change streams' per-key bound does): a failed sign-in takes a token from its address's
bucket and from the overall one; an empty bucket refuses every sign-in from there (the right key
included, so a refusal tells nothing) until it refills. Refused attempts take nothing, so a
client that keeps trying is not locked out for longer than the refill.

The address is the TCP peer's (``scope["client"]``): behind a proxy every browser shares the
proxy's, and the per-address limit acts as a second overall one (a forwarded address is not
believed: any client could send one). At most ``max_addresses`` addresses are remembered, the
least recently failed forgotten first, so a client with many addresses cannot make the table
grow; the overall bucket bounds what they can try together.

This module must not know about HTTP.
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

PER_ADDRESS = 5  # failed sign-ins an address may make at once, refilled over a minute
OVERALL = 50  # failed sign-ins of everyone together, refilled over a minute
REFILL_SECONDS = 60.0
MAX_ADDRESSES = 10_000


@dataclass
class _Bucket:
    tokens: float
    updated: float


@dataclass(frozen=True)
class Limits:
    per_address: int = PER_ADDRESS
    overall: int = OVERALL
    refill_seconds: float = REFILL_SECONDS
    max_addresses: int = MAX_ADDRESSES


class SignInLimiter:
    """Token buckets of failed sign-ins (module docstring)."""

    def __init__(
        self, limits: Limits | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limits = limits or Limits()
        self._clock = clock
        self._addresses: OrderedDict[str, _Bucket] = OrderedDict()
        self._overall = _Bucket(float(self.limits.overall), clock())

    def _refill(self, bucket: _Bucket, capacity: int, now: float) -> None:
        rate = capacity / self.limits.refill_seconds
        bucket.tokens = min(float(capacity), bucket.tokens + (now - bucket.updated) * rate)
        bucket.updated = now

    def _wait(self, bucket: _Bucket, capacity: int) -> float:
        """Seconds until ``bucket`` holds a whole token again (0 if it does)."""
        if bucket.tokens >= 1:
            return 0.0
        return (1 - bucket.tokens) * self.limits.refill_seconds / capacity

    def retry_after(self, address: str) -> int:
        """0 if ``address`` may try to sign in now, else the whole seconds to wait."""
        now = self._clock()
        self._refill(self._overall, self.limits.overall, now)
        wait = self._wait(self._overall, self.limits.overall)
        bucket = self._addresses.get(address)
        if bucket is not None:
            self._refill(bucket, self.limits.per_address, now)
            wait = max(wait, self._wait(bucket, self.limits.per_address))
        return math.ceil(wait - 1e-6)  # not 11 for 10.000000001 (float refills)

    def failed(self, address: str) -> None:
        """Count a failed sign-in from ``address``."""
        now = self._clock()
        bucket = self._addresses.pop(address, None)
        if bucket is None:
            bucket = _Bucket(float(self.limits.per_address), now)
            while len(self._addresses) >= self.limits.max_addresses:
                self._addresses.popitem(last=False)
        self._refill(bucket, self.limits.per_address, now)
        bucket.tokens = max(0.0, bucket.tokens - 1)
        self._addresses[address] = bucket  # the most recently failed last
        self._refill(self._overall, self.limits.overall, now)
        self._overall.tokens = max(0.0, self._overall.tokens - 1)
        log.info("console: a failed sign-in (%d addresses counted)", len(self._addresses))
