"""Whether the database answers: a 503 with ``retry-after`` while it does not, never a 500.

A database that cannot be reached (locked by another process, restarting, refusing
connections) is ``ServiceUnavailableError`` through ``Availability``, which logs when an outage
starts and ends (a line each, no traceback) rather than a traceback per request.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from memfs.contract.errors import ServiceUnavailableError

log = logging.getLogger(__name__)

UNAVAILABLE_RETRY_AFTER = 2.0  # seconds a client is asked to wait while the database is away

R = TypeVar("R")


class Availability:
    """Whether a backend's database answers (trio thread only).

    ``attempt(work)`` awaits ``work()`` (a transaction); when it fails in a way ``away`` names
    (the reason the database cannot be reached now; None for any other failure, which
    propagates), it raises the 503 instead. The first refusal of an outage logs a warning with
    the reason; the first success after it one info line. The reason (driver words, socket
    paths) goes to the log only: the client is told to retry.
    """

    def __init__(self, database: str, away: Callable[[BaseException], str | None]) -> None:
        self.database = database
        self._away = away
        self._down_since: float | None = None  # monotonic time of the first refusal
        self._refusals = 0  # requests answered 503 since then

    async def attempt(self, work: Callable[[], Awaitable[R]]) -> R:
        try:
            result = await work()
        except Exception as exc:
            reason = self._away(exc)
            if reason is None:
                raise
            raise self._refused(reason) from None
        if self._down_since is not None:
            log.info(
                "the %s database answers again after %.1f s (requests answered 503 meanwhile: %d)",
                self.database,
                time.monotonic() - self._down_since,
                self._refusals,
            )
            self._down_since = None
            self._refusals = 0
        return result

    def _refused(self, reason: str) -> ServiceUnavailableError:
        if self._down_since is None:
            self._down_since = time.monotonic()
            log.warning(
                "the %s database cannot be reached (%s): answering 503 until it can",
                self.database,
                reason,
            )
        self._refusals += 1
        return ServiceUnavailableError(
            "the database is unavailable; retry later",
            retry_after=UNAVAILABLE_RETRY_AFTER,
        )
