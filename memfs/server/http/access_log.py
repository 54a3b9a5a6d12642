"""The optional access log of the reference server (``memfs server --access-log FILE|-``).

One line per request, written when its answer ends: UTC time, method (``other`` for one outside
``metrics.METHODS``: clients invent them, up to 64 KiB long), route template, status,
duration and request id, e.g. ``2026-12-01T17:40:00.123Z GET /v1/memory_stores/{store}/memories
200 3.2ms req_…``. The route is the template that matched (``unmatched`` when none did), never
the raw path or query: those carry store and memory ids, paths of memories, and a mistyped key
would land there too. Headers are never logged, so neither are keys.

``ACCESS`` is the logger; ``middleware.ApiMiddleware`` writes to it only when ``open_access_log``
gave it a handler. It does not propagate: the server's own log stays as it was.
"""

from __future__ import annotations

import io
import logging
import logging.handlers
import sys
import time
from collections.abc import Callable

ACCESS = logging.getLogger("memfs.server.access")
ACCESS.propagate = False


def _utc(seconds: float | None) -> time.struct_time:
    return time.gmtime(seconds)


class _OpenedBy(logging.handlers.WatchedFileHandler):
    """A ``WatchedFileHandler`` that opens its file, and reopens it after logrotate, with
    ``open_file`` (a descriptor for appending)."""

    def __init__(self, target: str, open_file: Callable[[str], int]) -> None:
        self._open_file = open_file
        super().__init__(target, encoding="utf-8")

    def _open(self) -> io.TextIOWrapper:
        return open(self._open_file(self.baseFilename), "a", encoding=self.encoding)


def open_access_log(target: str, open_file: Callable[[str], int]) -> None:
    """Send ``ACCESS`` to ``target``: a file (appended to; reopened when logrotate moves it),
    opened by ``open_file`` (the command's: ``memfs.host.private.open_append``, 0600 and never
    through a planted link), or ``-`` (standard output). ``OSError`` if it cannot."""
    handler: logging.Handler = (
        logging.StreamHandler(sys.stdout) if target == "-" else _OpenedBy(target, open_file)
    )
    formatter = logging.Formatter("%(asctime)s.%(msecs)03dZ %(message)s", "%Y-%m-%dT%H:%M:%S")
    formatter.converter = _utc
    handler.setFormatter(formatter)
    ACCESS.handlers[:] = [handler]
    ACCESS.setLevel(logging.INFO)


def log_request(method: str, route: str, status: int, seconds: float, request_id: str) -> None:
    """One access log line (nothing without ``open_access_log``)."""
    if ACCESS.handlers:
        ACCESS.info("%s %s %d %.1fms %s", method, route, status, seconds * 1000, request_id)
