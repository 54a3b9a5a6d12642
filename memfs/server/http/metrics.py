"""Request metrics of the reference server in the Prometheus text exposition format (0.0.4).

Three families: the counter ``memfs_server_requests_total{method,route,status}``, the histogram
``memfs_server_request_duration_seconds{method,route}``, and the counter
``memfs_server_change_stream_reads_total{stream,reader}``: the storage reads of the change
streams (``stream``: ``memory_stores`` or ``databricks``, and the console's live pages,
``console_memory_stores`` and ``console_databricks``; ``reader``: ``shared``, a store's one
reader for every follower at its position, or ``own``, a follower catching up on its own; see
``memfs.server.http.fanout``). ``route`` is the path template (such as
``/v1/memory_stores/{store_id}/memories``), never a concrete path, so the label set stays small
and ids never reach a metrics system. A few dozen lines, so no prometheus-client dependency.
This module must not know about HTTP frameworks.

Every label is bounded, whatever clients send (``/metrics`` is open, so an unbounded label would
let anyone grow the server's memory and every scrape): a method outside ``METHODS`` and a
status outside 100-599 are counted as ``other``. Routes are bounded by the caller, which passes
a route template or ``unmatched``, never a path it was sent.
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_left
from collections import defaultdict

log = logging.getLogger(__name__)

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
OTHER = "other"
# the change streams (memfs.server.http.fanout), and the console's live pages (console.live)
STREAMS = ("memory_stores", "databricks", "console_memory_stores", "console_databricks")
READERS = ("shared", "own")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**labels: str) -> str:
    return ",".join(f'{name}="{_escape(value)}"' for name, value in labels.items())


def method_label(method: str) -> str:
    """``method`` if it is a standard one, else ``other`` (clients choose it freely)."""
    return method if method in METHODS else OTHER


def status_label(status: int) -> str:
    return str(status) if 100 <= status <= 599 else OTHER


def _number(value: float) -> str:
    return repr(float(value)) if value != int(value) else str(int(value))


class Metrics:
    """Counts requests and their latency; ``render`` gives the exposition text."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # Keyed by bounded labels only (see the module docstring).
        self._requests: dict[tuple[str, str, str], int] = defaultdict(int)
        self._bucket_counts: dict[tuple[str, str], list[int]] = {}
        self._sums: dict[tuple[str, str], float] = defaultdict(float)
        self._stream_reads: dict[tuple[str, str], int] = defaultdict(int)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        method = method_label(method)
        with self._lock:
            self._requests[(method, route, status_label(status))] += 1
            counts = self._bucket_counts.setdefault((method, route), [0] * (len(BUCKETS) + 1))
            counts[bisect_left(BUCKETS, seconds)] += 1
            self._sums[(method, route)] += seconds

    def request_count(self, method: str, route: str, status: int) -> int:
        with self._lock:
            return self._requests.get((method_label(method), route, status_label(status)), 0)

    def count_stream_read(self, stream: str, reader: str) -> None:
        """One storage read of a change stream (``stream`` in ``STREAMS``, ``reader`` in
        ``READERS``: labels chosen by the server, never by a client)."""
        assert stream in STREAMS and reader in READERS
        with self._lock:
            self._stream_reads[(stream, reader)] += 1

    def stream_reads(self, stream: str, reader: str) -> int:
        with self._lock:
            return self._stream_reads.get((stream, reader), 0)

    def render(self) -> str:
        with self._lock:
            lines = [
                "# HELP memfs_server_requests_total HTTP requests answered, by route template.",
                "# TYPE memfs_server_requests_total counter",
            ]
            for (method, route, status), count in sorted(self._requests.items()):
                labels = _labels(method=method, route=route, status=status)
                lines.append(f"memfs_server_requests_total{{{labels}}} {count}")
            lines += [
                "# HELP memfs_server_request_duration_seconds Time to answer an HTTP request.",
                "# TYPE memfs_server_request_duration_seconds histogram",
            ]
            for (method, route), counts in sorted(self._bucket_counts.items()):
                base = _labels(method=method, route=route)
                cumulative = 0
                for bound, count in zip((*BUCKETS, float("inf")), counts, strict=True):
                    cumulative += count
                    le = "+Inf" if bound == float("inf") else _number(bound)
                    lines.append(
                        f'memfs_server_request_duration_seconds_bucket{{{base},le="{le}"}} '
                        f"{cumulative}"
                    )
                total = self._sums[(method, route)]
                lines.append(f"memfs_server_request_duration_seconds_sum{{{base}}} {total!r}")
                lines.append(f"memfs_server_request_duration_seconds_count{{{base}}} {cumulative}")
            lines += [
                "# HELP memfs_server_change_stream_reads_total Storage reads of change streams.",
                "# TYPE memfs_server_change_stream_reads_total counter",
            ]
            for stream in STREAMS:
                for reader in READERS:
                    count = self._stream_reads.get((stream, reader), 0)
                    labels = _labels(stream=stream, reader=reader)
                    lines.append(f"memfs_server_change_stream_reads_total{{{labels}}} {count}")
        return "\n".join(lines) + "\n"
