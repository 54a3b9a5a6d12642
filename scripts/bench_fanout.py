#!/usr/bin/env python3
"""Benchmark change-stream fan-out: write latency with N open change streams on one store.

For each backend (``sqlite``: a ``memfs server`` on a SQLite file; ``postgres``: one on a
database of a throwaway cluster, see ``tests/pgcluster.py``) and each N of ``--streams``, a
fresh server; N change streams of the Memory Stores API (``GET …/memfs/changes``) follow one
store, each on a raw HTTP/1.0 socket (``tests/support/sse.py``: the client side stays cheap);
then ``--writes`` sequential updates of one memory, one every ``--interval`` seconds (0: each
sent as soon as the previous one is answered, not when it was delivered). It reports the
median and p99 write latency, the ratio of the median to the one with no stream, whether every
stream received every change in commit order (the versions' ids, checked), the server's memory
per open stream (RSS after the streams are open minus before, over N), the server's CPU time per
write (from the first write until every stream has every change: steadier than latency on a
shared machine) and the storage reads the streams made during the writes (the server's
``memfs_server_change_stream_reads_total``, when it has that counter).

Prints a markdown table (or JSON with ``--json``). This script owns no product code.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT / "tests")]

from bench_server import free_port, percentile, server_on  # noqa: E402
from pgcluster import PgCluster  # noqa: E402
from support.sse import RawStream  # noqa: E402

KEY = "sk-bench-fanout-" + "f" * 24
HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}


@dataclass
class Result:
    backend: str
    streams: int
    writes: int
    p50_ms: float
    p99_ms: float
    ratio: float  # p50 over the p50 with no stream
    complete: bool  # every stream got every change, in order
    rss_per_stream_kib: float
    cpu_ms_per_write: float  # the server's CPU time from the first write until all delivered
    reads: int | None  # storage reads of the change streams during the writes


@contextmanager
def server(db: str, workdir: Path, streams: int) -> Iterator[tuple[str, int]]:
    """A ``memfs server`` on ``db`` allowing ``streams`` streams per key; (base URL, pid)."""
    pids: list[int] = []
    extra = ["--max-streams-per-key", str(streams + 8)]
    log_path = workdir / f"server-{free_port()}.log"
    with server_on(db, KEY, log_path=log_path, extra_args=extra, pids=pids) as url:
        yield url, pids[0]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stream_reads(url: str) -> int | None:
    """The server's count of change-stream storage reads (None: it does not count them)."""
    text = httpx.get(url + "/metrics", timeout=10).text
    counts = [
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith("memfs_server_change_stream_reads_total{")
    ]
    return sum(counts) if counts else None


Measured = tuple[list[float], bool, float, int, float]


async def measure(url: str, pid: int, n: int, writes: int, interval: float = 0.0) -> Measured:
    """(write latencies in ms, complete, RSS KiB per stream, reads during the writes, server CPU
    ms per write)."""
    port = int(url.rsplit(":", 1)[1])
    async with httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=60) as client:
        store = (await client.post("/v1/memory_stores", json={"name": "fanout"})).json()["id"]
        memory = (
            await client.post(
                f"/v1/memory_stores/{store}/memories", json={"path": "/m.md", "content": "0"}
            )
        ).json()
        target = f"/v1/memory_stores/{store}/memories/{memory['id']}"
        for i in range(5):  # warm up the write path
            (await client.post(target, json={"content": f"warm {i}"})).raise_for_status()
        await trio.sleep(0.5)
        before = rss_kib(pid)
        path = f"/v1/memory_stores/{store}/memfs/changes"
        followers = [RawStream(port, path, HEADERS) for _ in range(n)]
        async with trio.open_nursery() as nursery:
            with trio.fail_after(120):
                async with trio.open_nursery() as opening:
                    for follower in followers:
                        opening.start_soon(nursery.start, follower.run)
            await trio.sleep(0.5)
            per_stream = (rss_kib(pid) - before) / n if n else 0.0
            reads_before = stream_reads(url)
            cpu_before = cpu_seconds(pid)
            latencies: list[float] = []
            written: list[str] = []
            for i in range(writes):
                started = time.perf_counter()
                answer = await client.post(target, json={"content": f"write {i}"})
                latencies.append((time.perf_counter() - started) * 1000)
                answer.raise_for_status()
                written.append(answer.json()["memory_version_id"])
                await trio.sleep(max(0.0, started + interval - time.perf_counter()))
            with trio.move_on_after(120):
                for follower in followers:
                    await follower.wait_for("memory_version", writes)
            cpu = (cpu_seconds(pid) - cpu_before) * 1000 / writes
            complete = all(
                [data["id"] for _, data in f.named("memory_version")] == written for f in followers
            )
            reads_after = stream_reads(url)
            nursery.cancel_scope.cancel()

    reads = (
        reads_after - reads_before if reads_after is not None and reads_before is not None else -1
    )
    return latencies, complete, per_stream, reads, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[0, 300, 1000])
    parser.add_argument("--writes", type=int, default=20)
    parser.add_argument(
        "--interval",
        type=float,
        default=0.1,
        help="seconds from one write's start to the next's (0: each as soon as the previous one "
        "is answered)",
    )
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgres"])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    bindir = PgCluster.find_bin()
    if bindir is None and "postgres" in args.backends:
        print("PostgreSQL binaries not found (apt-get install postgresql)", file=sys.stderr)
        return 2
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="memfs-bench-") as tmp, ExitStack() as stack:
        cluster = None
        if "postgres" in args.backends:
            assert bindir is not None
            cluster = PgCluster(bindir, port=free_port())
            cluster.start()
            stack.callback(cluster.stop)
        for backend in args.backends:
            baseline = None
            for n in args.streams:
                if backend == "postgres":
                    assert cluster is not None
                    db = cluster.create_database(f"fanout{n}")
                else:
                    db = str(Path(tmp) / f"fanout{n}.db")
                with server(db, Path(tmp), n) as (url, pid):
                    latencies, complete, per_stream, reads, cpu = trio.run(
                        measure, url, pid, n, args.writes, args.interval
                    )
                p50 = statistics.median(latencies)
                baseline = baseline or p50
                latencies.sort()
                results.append(
                    Result(
                        backend=backend,
                        streams=n,
                        writes=args.writes,
                        p50_ms=round(p50, 2),
                        p99_ms=round(percentile(latencies, 99), 2),
                        ratio=round(p50 / baseline, 2),
                        complete=complete,
                        rss_per_stream_kib=round(per_stream, 1),
                        cpu_ms_per_write=round(cpu, 1),
                        reads=reads if reads >= 0 else None,
                    )
                )
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=2))
        return 0
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    pace = f"one every {args.interval:g} s" if args.interval else "back to back"
    print(f"{datetime.now(UTC):%Y-%m-%d}, {machine}; {args.writes} sequential writes, {pace}")
    print(
        "\n| backend | streams | write p50 (ms) | p99 (ms) | p50 / no stream "
        "| every stream got every change | server RSS per stream (KiB) "
        "| server CPU per write (ms) | stream reads |"
    )
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|")
    for r in results:
        reads = "n/a" if r.reads is None else str(r.reads)
        print(
            f"| {r.backend} | {r.streams} | {r.p50_ms} | {r.p99_ms} | {r.ratio} "
            f"| {'yes' if r.complete else 'NO'} | {r.rss_per_stream_kib} | {r.cpu_ms_per_write} "
            f"| {reads} |"
        )
    return 0 if all(r.complete for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
