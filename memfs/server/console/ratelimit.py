"""How many failed sign-ins the console accepts: per client, never one limit shared by all.

``SignInLimiter`` keeps a token bucket of failed sign-ins per client in this process's memory
(each replica counts its own, as the change streams' per-key bound does). A client is its
TCP peer's address (``scope["client"]``; a forwarded address is not believed: any client could
send one), an IPv6 address's /64 (what one host is given: otherwise each of its 2**64
addresses would be a fresh client).

``pages.sign_in`` asks in this order, and the order is the design:
1. This client's own bucket, before the key is looked at. An empty one refuses every sign-in
   from there, the right key included, until it refills. Checking the key first would let a
   client past its limit keep guessing at full speed and tell a right key by the answer (303,
   not 429): no limit at all. So the only sign-ins ever refused are those of a client that
   failed too often itself (or shares its address with one: behind a proxy or a NAT).
2. The key. A right key signs in whatever other clients failed: no bucket is shared, so no
   client can lock out another, however many addresses it has.
3. A wrong key takes a token from its client's bucket. Everyone's failures are counted too
   (``overall`` a refill), but only to warn in the log once it is exceeded (guessing from many
   addresses); that count never refuses anything.
Refused attempts take nothing, so a client that keeps trying is not held back for longer than
the refill. API keys carry no name (the form takes the key alone): a guess is against every key
of the server at once, so there is no per-key limit to keep.

The table holds at most ``max_addresses`` clients, the least recently failed forgotten first,
and a bucket refilled to the full is dropped (it is the same as none): many addresses cannot
make it grow, and forgetting someone only ever lets them try sooner, never locks anyone out.

This module must not know about HTTP.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

PER_ADDRESS = 5  # failed sign-ins a client may make at once, refilled over a minute
OVERALL = 50  # failed sign-ins of everyone in a minute above which the log warns
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


def client_of(address: str) -> str:
    """The client an address counts for: an IPv4 address (also when IPv4-mapped), an IPv6
    address's /64, else the text itself (no address known)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class SignInLimiter:
    """Token buckets of failed sign-ins (module docstring)."""

    def __init__(
        self, limits: Limits | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limits = limits or Limits()
        self._clock = clock
        # least recently failed first; every bucket in it is short of the full
        self._clients: OrderedDict[str, _Bucket] = OrderedDict()
        self._overall = _Bucket(float(self.limits.overall), clock())

    def _refill(self, bucket: _Bucket, capacity: int, now: float) -> None:
        rate = capacity / self.limits.refill_seconds
        bucket.tokens = min(float(capacity), bucket.tokens + (now - bucket.updated) * rate)
        bucket.updated = now

    def retry_after(self, address: str) -> int:
        """0 if ``address`` may try to sign in now, else the whole seconds to wait."""
        bucket = self._clients.get(client_of(address))
        if bucket is None:
            return 0
        self._refill(bucket, self.limits.per_address, self._clock())
        if bucket.tokens >= 1:
            return 0
        wait = (1 - bucket.tokens) * self.limits.refill_seconds / self.limits.per_address
        return math.ceil(wait - 1e-6)  # not 11 for 10.000000001 (float refills)

    def failed(self, address: str) -> None:
        """Count a failed sign-in from ``address``."""
        now = self._clock()
        client = client_of(address)
        bucket = self._clients.pop(client, None)
        if bucket is None:
            bucket = _Bucket(float(self.limits.per_address), now)
        self._forget_refilled(now)
        while len(self._clients) >= self.limits.max_addresses:
            self._clients.popitem(last=False)
        self._refill(bucket, self.limits.per_address, now)
        bucket.tokens = max(0.0, bucket.tokens - 1)
        self._clients[client] = bucket  # the most recently failed last
        self._count_overall(now)

    def _forget_refilled(self, now: float) -> None:
        """Drop the least recently failed buckets that are full again."""
        while self._clients:
            oldest = next(iter(self._clients.values()))
            self._refill(oldest, self.limits.per_address, now)
            if oldest.tokens < self.limits.per_address:
                return
            self._clients.popitem(last=False)

    def _count_overall(self, now: float) -> None:
        self._refill(self._overall, self.limits.overall, now)
        already_over = self._overall.tokens < 1  # warned then: once a burst
        self._overall.tokens = max(0.0, self._overall.tokens - 1)
        if self._overall.tokens < 1 and not already_over:
            log.warning(
                "console: more than %d failed sign-ins in %g s, from %d clients "
                "(each is limited on its own; a right key still signs in)",
                self.limits.overall,
                self.limits.refill_seconds,
                len(self._clients),
            )
        else:
            log.info("console: a failed sign-in (%d clients counted)", len(self._clients))

    def __len__(self) -> int:
        """The clients remembered (for tests: the table stays bounded)."""
        return len(self._clients)
