"""Request counters of a StoreClient: what went on the wire, by route and by outcome.

Owns only counting. It must not decide anything (retries, errors) and must not import httpx.
Everything runs in one trio thread, so plain counters need no lock. Clients made with
``StoreClient.with_options`` share one ``RequestStats`` with the client they came from.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

log = logging.getLogger(__name__)

# Outcomes of one attempt (one HTTP exchange, or one failed try to have one).
OK = "ok"  # 2xx
CLIENT_ERROR = "client_error"  # 4xx
SERVER_ERROR = "server_error"  # 5xx
CONNECTION_ERROR = "connection_error"  # no answer: refused, reset, broken
TIMEOUT = "timeout"  # no answer within the deadline
OUTCOMES = (OK, CLIENT_ERROR, SERVER_ERROR, CONNECTION_ERROR, TIMEOUT)


def outcome_for_status(status: int) -> str:
    if status < 400:
        return OK
    if status < 500:
        return CLIENT_ERROR
    return SERVER_ERROR


class RequestStats:
    """Counts attempts: ``total`` is every request put on the wire, retries included.

    ``by_route`` keys are ``(method, route template)``, e.g.
    ``("GET", "/v1/memory_stores/{store}/memories/{memory}")``, so tests can prove a cache hit
    by checking that a count did not move. ``retries`` counts attempts beyond the first.
    """

    def __init__(self) -> None:
        self.by_route: Counter[tuple[str, str]] = Counter()
        self.by_outcome: Counter[str] = Counter()
        self.by_status: Counter[int] = Counter()
        self.retries = 0

    @property
    def total(self) -> int:
        return sum(self.by_route.values())

    def count(self, method: str, route: str) -> int:
        """Attempts made for one route template."""
        return self.by_route[(method.upper(), route)]

    def record(self, method: str, route: str, outcome: str, status: int | None = None) -> None:
        self.by_route[(method, route)] += 1
        self.by_outcome[outcome] += 1
        if status is not None:
            self.by_status[status] += 1

    def record_retry(self) -> None:
        self.retries += 1

    def reset(self) -> None:
        self.by_route.clear()
        self.by_outcome.clear()
        self.by_status.clear()
        self.retries = 0

    def snapshot(self) -> dict[str, Any]:
        """A JSON-ready copy: total, retries, by_route, by_outcome, by_status."""
        return {
            "total": self.total,
            "retries": self.retries,
            "by_route": {f"{m} {r}": n for (m, r), n in sorted(self.by_route.items())},
            "by_outcome": dict(sorted(self.by_outcome.items())),
            "by_status": {str(s): n for s, n in sorted(self.by_status.items())},
        }

    def __repr__(self) -> str:
        return f"RequestStats(total={self.total}, retries={self.retries})"
