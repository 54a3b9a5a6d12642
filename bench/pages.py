"""Console pages timed in process (the app over ``httpx.ASGITransport``: the server's own time,
no socket), with the database transactions each runs: what the console cases share."""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from bench.harness import Row
from memfs.server.backends.sqlite import SqliteStorage

KEY = "sk-bench-console-" + "k" * 24
GOAL_MS = 100.0


class Counted:
    """Counts the transactions a storage runs (patched onto the instance: a bench only)."""

    def __init__(self, storage: SqliteStorage) -> None:
        self.count = 0
        read, write = storage._read, storage._write

        async def counted_read(fn: Any) -> Any:
            self.count += 1
            return await read(fn)

        async def counted_write(fn: Any) -> Any:
            self.count += 1
            return await write(fn)

        storage._read = counted_read  # type: ignore[method-assign]
        storage._write = counted_write  # type: ignore[method-assign]


async def timed(runs: int, call: Callable[[], Awaitable[httpx.Response]]) -> dict[str, float]:
    await call()  # warm: templates compiled, pages cached by SQLite
    times = []
    size = 0
    for _ in range(runs):
        started = time.perf_counter()
        answer = await call()
        times.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200, answer.text[:300]
        size = len(answer.content)
    return {
        "median_ms": statistics.median(times),
        "p90_ms": sorted(times)[int(len(times) * 0.9) - 1],
        "bytes": size,
    }


async def timed_cases(
    runs: int, cases: dict[str, Callable[[], Awaitable[httpx.Response]]], counter: Counted
) -> dict[str, Any]:
    """Each case ``timed``, with the database transactions one more call of it runs."""
    results: dict[str, Any] = {}
    for name, call in cases.items():
        result = await timed(runs, call)
        before = counter.count
        await call()
        result["transactions"] = counter.count - before
        results[name] = result
    return results


def page_rows(results: dict[str, Any], baseline: str) -> list[Row]:
    """A row a page: its times, as a multiple of the ``baseline`` page's, transactions, KiB."""
    listing = results[baseline]["median_ms"]
    return [
        {
            "page": name,
            "median_ms": r["median_ms"],
            "p90_ms": r["p90_ms"],
            "x_api_listing": r["median_ms"] / listing,
            "transactions": r["transactions"],
            "kib": r["bytes"] / 1024,
        }
        for name, r in results.items()
    ]
