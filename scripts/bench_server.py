#!/usr/bin/env python3
"""Benchmark the reference server through StoreClient: throughput and p50/p99 latency.

Starts ``memfs server`` on a throwaway database (a subprocess, as the test fixture does), seeds
one store, then runs each operation for ``--duration`` seconds under ``--concurrency`` client
tasks sharing one StoreClient (one connection pool): retrieve (view=full), list basic (limit
100), list full (limit 20) and update (unconditional, new content every time, so each call
writes a version). Prints a markdown table, or JSON with ``--json``.

With ``--base-url`` it measures an already running server instead (key from
``ANTHROPIC_API_KEY``); it then creates a store there and deletes it at the end.

This script owns no product code: it only drives ``memfs.api.StoreClient``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import random
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import trio

from memfs.api import StoreClient
from memfs.api.config import ClientConfig, Secret

log = logging.getLogger("bench_server")

OPERATIONS = ["retrieve", "list_basic", "list_full", "update"]


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


def percentile(sorted_values: list[float], pct: float) -> float:
    """Nearest-rank percentile of an ascending list (0 for an empty one)."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(pct / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def local_server(key: str, log_level: str) -> Iterator[str]:
    """A ``memfs server`` on a temp database; yields its base URL; stops it at exit."""
    with (
        tempfile.TemporaryDirectory(prefix="memfs-bench-") as tmp,
        server_on(Path(tmp) / "bench.db", key, log_level) as base_url,
    ):
        yield base_url


@contextmanager
def server_on(
    db: Path | str,
    key: str,
    log_level: str = "WARNING",
    log_path: Path | None = None,
    extra_args: Sequence[str] = (),
    pids: list[int] | None = None,
) -> Iterator[str]:
    """A ``memfs server`` on ``db`` (a SQLite file or a ``postgresql://`` URL), with
    ``extra_args`` on its command line; yields its base URL; stops it at exit. The log goes to
    ``log_path``, by default next to a SQLite file; its process id is appended to ``pids``."""
    port = free_port()
    env = dict(os.environ, MEMFS_API_KEYS=key)
    if log_path is None:
        log_path = Path(db).with_suffix(".log")
    with open(log_path, "wb") as server_log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "memfs", "server", "--db", str(db),
             "--host", "127.0.0.1", "--port", str(port), "--log-level", log_level, *extra_args],
            env=env, stdout=server_log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    if pids is not None:
        pids.append(proc.pid)
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"server exited:\n{log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(base_url + "/healthz", timeout=1) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("server did not become healthy within 20 s")
            time.sleep(0.05)
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


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


async def run_benchmark(args: argparse.Namespace, base_url: str, key: str) -> list[Result]:
    config = ClientConfig(
        api_key=Secret(key),
        base_url=base_url,
        max_retries=0,  # measure the server, not the retry policy
        max_connections=max(args.concurrency, 1),
        timeout=30.0,
    )
    rng = random.Random(args.seed)
    results: list[Result] = []
    async with StoreClient(config) as client:
        store_id, ids = await seed_store(client, args.memories, args.size, args.concurrency)
        operations: dict[str, Callable[[int], Awaitable[object]]] = {
            "retrieve": lambda n: client.get_memory(store_id, rng.choice(ids)),
            "list_basic": lambda n: client.list_memories_page(store_id, limit=100),
            "list_full": lambda n: client.list_memories_page(store_id, limit=20, view="full"),
            "update": lambda n: client.update_memory(
                store_id, rng.choice(ids), content=content_of(args.size, 1_000_000 + n)
            ),
        }
        try:
            for name in args.operations:
                result = await measure(name, operations[name], args.concurrency, args.duration)
                log.info("%s: %d requests, %.1f/s", name, result.requests, result.throughput)
                results.append(result)
        finally:
            if args.base_url:
                await client.delete_store(store_id)
    return results


def markdown(results: list[Result]) -> str:
    columns = ["operation", "concurrency", "requests", "throughput (req/s)", "p50 (ms)"]
    columns += ["p99 (ms)", "errors"]
    lines = ["| " + " | ".join(columns) + " |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(
            f"| {r.operation} | {r.concurrency} | {r.requests} | {r.throughput:.1f} "
            f"| {r.p50_ms:.2f} | {r.p99_ms:.2f} | {r.errors} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-c", "--concurrency", type=int, default=8, help="client tasks (default 8)")
    parser.add_argument("-d", "--duration", type=float, default=3.0, help="seconds per operation")
    parser.add_argument("--memories", type=int, default=200, help="memories to seed (default 200)")
    parser.add_argument("--size", type=int, default=1024, help="content bytes (default 1024)")
    parser.add_argument("--seed", type=int, default=1, help="random seed")
    parser.add_argument(
        "--operations", nargs="+", choices=OPERATIONS, default=OPERATIONS, metavar="OP",
        help=f"which operations ({', '.join(OPERATIONS)})",
    )  # fmt: skip
    parser.add_argument("--base-url", help="measure this running server (key: ANTHROPIC_API_KEY)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--server-log-level", default="WARNING", help="log level of the server")
    args = parser.parse_args(argv)
    if args.concurrency < 1 or args.duration <= 0 or args.memories < 1:
        parser.error("--concurrency, --duration and --memories must be positive")
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise

    started = datetime.now(UTC)
    if args.base_url:
        key = os.environ.get("ANTHROPIC_API_KEY", "")
        if not key:
            parser.error("--base-url needs ANTHROPIC_API_KEY")
        results = trio.run(run_benchmark, args, args.base_url, key)
    else:
        key = "sk-bench-" + secrets.token_hex(16)
        with local_server(key, args.server_log_level) as base_url:
            results = trio.run(run_benchmark, args, base_url, key)

    meta = {
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}",
        "python": platform.python_version(),
        "concurrency": args.concurrency,
        "duration_s": args.duration,
        "memories": args.memories,
        "content_bytes": args.size,
        "command": "python scripts/bench_server.py " + " ".join(argv or sys.argv[1:]),
    }
    if args.json:
        rows = [{k: v for k, v in asdict(r).items() if k != "latencies"} for r in results]
        print(json.dumps({"meta": meta, "results": rows}, indent=2))
    else:
        print(
            f"Server benchmark, {meta['date']}, {meta['machine']}, Python {meta['python']}; "
            f"{args.memories} memories of {args.size} bytes, {args.concurrency} concurrent "
            f"tasks, {args.duration:g} s per operation.\n"
        )
        print(markdown(results))
    return 0 if all(r.errors == 0 for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
