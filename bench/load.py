"""A load on a server through ``StoreClient``: a seeded store, and an operation run for a while by
concurrent tasks, its throughput and latency percentiles (the server and replicas cases)."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import trio

from bench.harness import Row, percentile
from memfs.api import StoreClient

log = logging.getLogger(__name__)


@dataclass
class Result:
    operation: str
    concurrency: int
    requests: int
    errors: int
    seconds: float
    throughput: float
    p50_ms: float
    p99_ms: float
    latencies: list[float] = field(default_factory=list, repr=False)


def content_of(size: int, seed: int) -> str:
    line = f"note {seed}: the quick brown fox jumps over the lazy dog.\n"
    return (line * (size // len(line) + 1))[:size]


async def seed_store(
    client: StoreClient, count: int, size: int, workers: int
) -> tuple[str, list[str]]:
    store = await client.create_store(f"bench-{secrets.token_hex(4)}", description="benchmark")
    ids: list[str] = []
    send, receive = trio.open_memory_channel[int](count)
    for i in range(count):
        send.send_nowait(i)
    send.close()

    async def worker() -> None:
        async for i in receive:
            memory = await client.create_memory(
                store.id, f"/bench/dir{i % 10}/note{i:05d}.md", content_of(size, i)
            )
            ids.append(memory.id)

    async with trio.open_nursery() as nursery:
        for _ in range(workers):
            nursery.start_soon(worker)
    return store.id, ids


async def measure(
    name: str, call: Callable[[int], Awaitable[object]], concurrency: int, duration: float
) -> Result:
    latencies: list[float] = []
    errors = 0
    counter = 0

    async def worker() -> None:
        nonlocal errors, counter
        while time.perf_counter() < stop:
            counter += 1
            started = time.perf_counter()
            try:
                await call(counter)
            except Exception as exc:  # a benchmark counts failures, it does not stop on them
                errors += 1
                log.warning("%s failed: %s", name, exc)
                continue
            latencies.append((time.perf_counter() - started) * 1000)

    # Warm up: a few calls not counted (connections, SQLite page cache).
    for i in range(min(20, concurrency * 2)):
        await call(-i - 1)
    begin = time.perf_counter()
    stop = begin + duration
    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(worker)
    elapsed = time.perf_counter() - begin
    latencies.sort()
    return Result(
        operation=name,
        concurrency=concurrency,
        requests=len(latencies),
        errors=errors,
        seconds=round(elapsed, 3),
        throughput=round(len(latencies) / elapsed, 1),
        p50_ms=round(percentile(latencies, 50), 2),
        p99_ms=round(percentile(latencies, 99), 2),
        latencies=latencies,
    )


def latency_result(operation: str, latencies_ms: list[float]) -> Result:
    """One sample after another (no concurrency, no throughput): their count and percentiles."""
    return Result(
        operation=operation,
        concurrency=1,
        requests=len(latencies_ms),
        errors=0,
        seconds=0,
        throughput=0,
        p50_ms=round(percentile(latencies_ms, 50), 2),
        p99_ms=round(percentile(latencies_ms, 99), 2),
    )


def result_row(result: Result) -> Row:
    """A result without its latencies."""
    return {
        "operation": result.operation, "concurrency": result.concurrency,
        "requests": result.requests, "errors": result.errors, "seconds": result.seconds,
        "throughput": result.throughput, "p50_ms": result.p50_ms, "p99_ms": result.p99_ms,
    }  # fmt: skip
