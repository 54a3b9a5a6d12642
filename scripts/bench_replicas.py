#!/usr/bin/env python3
"""Benchmark one SQLite server against 1 and 3 PostgreSQL replicas, and change-stream latency.

For each setup (``sqlite``: one ``memfs server`` on a SQLite file; ``pg1`` / ``pg3``: one or
three ``memfs server --db postgresql://…`` on one database of a throwaway cluster, see
``kit/pgcluster.py``) it seeds a store and runs retrieve, list (basic, limit 100) and update
for ``--duration`` seconds each under ``--concurrency`` client tasks, spreading requests over
the replicas round-robin (as a load balancer would), with the measuring code of
``scripts/bench_server.py``. Then it measures the change stream: a subscriber on the last
replica, ``--events`` sequential writes on the first; latency = write sent → event received.
Last, a mount: ``memfs mount --change-feed auto`` against the last replica, ``--mount-samples``
writes through the first, each timed from the write's answer until ``read()`` of the file in
the mount (already in the kernel's page cache) returns the new content.

Prints markdown tables (or JSON with ``--json``). This script owns no product code.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import httpx
import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT)]

from bench_server import (  # noqa: E402
    Result,
    content_of,
    free_port,
    measure,
    percentile,
    seed_store,
    server_on,
)

from kit.pgcluster import PgCluster  # noqa: E402
from memfs.api import StoreClient  # noqa: E402
from memfs.api.changes import ChangeStream  # noqa: E402
from memfs.api.config import ClientConfig, Secret  # noqa: E402

log = logging.getLogger("bench_replicas")
KEY = "sk-bench-replicas-" + "r" * 20


def server(db: str, workdir: Path) -> AbstractContextManager[str]:
    """One replica (or the SQLite server) on ``db``, logging into ``workdir``."""
    return server_on(db, KEY, log_path=workdir / f"server-{free_port()}.log")


def config(url: str, concurrency: int) -> ClientConfig:
    return ClientConfig(
        api_key=Secret(KEY), base_url=url, max_retries=0, max_connections=concurrency, timeout=30
    )


Setup = tuple[list[Result], Result, str, str]


async def run_setup(args: argparse.Namespace, urls: list[str]) -> Setup:
    rng = random.Random(1)
    clients = [StoreClient(config(u, args.concurrency)) for u in urls]
    results: list[Result] = []
    try:
        store_id, ids = await seed_store(clients[0], args.memories, args.size, args.concurrency)

        def pick(n: int) -> StoreClient:
            return clients[n % len(clients)]

        operations: dict[str, Callable[[int], Awaitable[object]]] = {
            "retrieve": lambda n: pick(n).get_memory(store_id, rng.choice(ids)),
            "list_basic": lambda n: pick(n).list_memories_page(store_id, limit=100),
            "update": lambda n: pick(n).update_memory(
                store_id, rng.choice(ids), content=content_of(args.size, 1_000_000 + n)
            ),
        }
        for name, call in operations.items():
            results.append(await measure(name, call, args.concurrency, args.duration))
        stream_result = await stream_latency(args, urls, clients[0], store_id, ids)
    finally:
        for client in clients:
            await client.aclose()
    return results, stream_result, store_id, ids[0]


def mount_visibility(
    args: argparse.Namespace, urls: list[str], store_id: str, memory_id: str, workdir: Path
) -> Result:
    """Write through the first replica; time until a mount on the last one reads the change."""
    point = workdir / f"mnt-{free_port()}"
    point.mkdir()
    env = dict(os.environ, ANTHROPIC_API_KEY=KEY, ANTHROPIC_BASE_URL=urls[-1])
    env["XDG_CACHE_HOME"] = str(workdir / "xdg-cache")
    env.pop("MEMFS_API_KEYS", None)
    memfs = [sys.executable, "-m", "memfs"]
    headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
    route = f"/v1/memory_stores/{store_id}/memories/{memory_id}"
    latencies: list[float] = []
    with httpx.Client(base_url=urls[0], headers=headers, timeout=30) as writer:
        path = writer.get(route).json()["path"]
        subprocess.run(
            [*memfs, "mount", store_id, str(point), "--change-feed", "auto"],
            env=env, check=True, capture_output=True,
        )  # fmt: skip
        try:
            target = point / path.lstrip("/")
            target.read_bytes()  # warm: the kernel now caches the old content
            for i in range(args.mount_samples):
                text = f"mount sample {i}"
                writer.post(route, json={"content": text}).raise_for_status()
                written = time.perf_counter()
                while target.read_text() != text:
                    if time.perf_counter() - written > 10:
                        raise RuntimeError("a change was not visible in the mount within 10 s")
                    time.sleep(0.002)
                latencies.append((time.perf_counter() - written) * 1000)
        finally:
            subprocess.run([*memfs, "umount", str(point)], env=env, capture_output=True)
    latencies.sort()
    return Result(
        operation="write on first replica → visible in a mount on the last",
        concurrency=1,
        requests=len(latencies),
        errors=0,
        seconds=0,
        throughput=0,
        p50_ms=round(percentile(latencies, 50), 2),
        p99_ms=round(percentile(latencies, 99), 2),
    )


async def stream_latency(
    args: argparse.Namespace, urls: list[str], writer: StoreClient, store_id: str, ids: list[str]
) -> Result:
    latencies: list[float] = []
    arrived = trio.Event()
    ready = trio.Event()
    async with (
        StoreClient(config(urls[-1], 1)) as client,
        ChangeStream(client, store_id) as stream,
        trio.open_nursery() as n,
    ):

        async def read() -> None:
            nonlocal arrived
            async for event in stream:
                if event.kind == "ready":
                    ready.set()
                else:
                    arrived.set()

        n.start_soon(read)
        await ready.wait()
        for i in range(args.events):
            arrived = trio.Event()
            sent = time.perf_counter()
            await writer.update_memory(store_id, ids[i % len(ids)], content=f"event {i}")
            with trio.fail_after(10):
                await arrived.wait()
            latencies.append((time.perf_counter() - sent) * 1000)
        n.cancel_scope.cancel()
    latencies.sort()
    return Result(
        operation="stream write→event",
        concurrency=1,
        requests=len(latencies),
        errors=0,
        seconds=0,
        throughput=0,
        p50_ms=round(percentile(latencies, 50), 2),
        p99_ms=round(percentile(latencies, 99), 2),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-c", "--concurrency", type=int, default=8)
    parser.add_argument("-d", "--duration", type=float, default=3.0)
    parser.add_argument("--memories", type=int, default=200)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--events", type=int, default=100, help="change-stream writes")
    parser.add_argument("--mount-samples", type=int, default=20, help="mount visibility writes")
    parser.add_argument("--setups", nargs="+", default=["sqlite", "pg1", "pg3"])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    bindir = PgCluster.find_bin()
    if bindir is None and any(s.startswith("pg") for s in args.setups):
        print("PostgreSQL binaries not found (apt-get install postgresql)", file=sys.stderr)
        return 2
    report: dict[str, dict[str, list[dict[str, object]]]] = {}
    with tempfile.TemporaryDirectory(prefix="memfs-bench-") as tmp, ExitStack() as stack:
        cluster = PgCluster(bindir, port=free_port()) if bindir else None
        if cluster is not None:
            cluster.start()
            stack.callback(cluster.stop)
        for setup in args.setups:
            with ExitStack() as servers:
                if setup == "sqlite":
                    urls = [servers.enter_context(server(str(Path(tmp) / "b.db"), Path(tmp)))]
                else:
                    assert cluster is not None
                    db = cluster.create_database("bench")
                    count = int(setup[2:])
                    urls = [servers.enter_context(server(db, Path(tmp))) for _ in range(count)]
                results, stream, store_id, memory_id = trio.run(run_setup, args, urls)
                mount = mount_visibility(args, urls, store_id, memory_id, Path(tmp))
            report[setup] = {
                "operations": [
                    {k: v for k, v in asdict(r).items() if k != "latencies"} for r in results
                ],
                "stream": [{k: v for k, v in asdict(stream).items() if k != "latencies"}],
                "mount": [{k: v for k, v in asdict(mount).items() if k != "latencies"}],
            }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    print(f"{datetime.now(UTC):%Y-%m-%d}, {machine}; -c {args.concurrency} -d {args.duration}")
    print("\n| setup | operation | requests | throughput (req/s) | p50 (ms) | p99 (ms) | errors |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for setup, data in report.items():
        for r in data["operations"]:
            print(
                f"| {setup} | {r['operation']} | {r['requests']} | {r['throughput']} "
                f"| {r['p50_ms']} | {r['p99_ms']} | {r['errors']} |"
            )
    print(
        "\n| setup | change stream: write on first replica → event on last | p50 (ms) | p99 (ms) |"
    )
    print("|---|---:|---:|---:|")
    for setup, data in report.items():
        s = data["stream"][0]
        print(f"| {setup} | {s['requests']} events | {s['p50_ms']} | {s['p99_ms']} |")
    header = "write on first replica → visible in a mount on the last"
    print(f"\n| setup | {header} | p50 (ms) | p99 (ms) |")
    print("|---|---:|---:|---:|")
    for setup, data in report.items():
        m = data["mount"][0]
        print(f"| {setup} | {m['requests']} writes | {m['p50_ms']} | {m['p99_ms']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
