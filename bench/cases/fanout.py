"""Benchmark change-stream fan-out: write latency with N open change streams on one store.

For each backend (``sqlite``: a ``memfs server`` on a SQLite file; ``postgres``: one on a database
of a throwaway cluster, see ``kit/pgcluster.py``) and each N of ``--streams``, a fresh server; N
change streams of the Memory Stores API (``GET …/memfs/changes``) follow one store, each on a raw
HTTP/1.0 socket (``kit/sse.py``: the client side stays cheap), all in a process of their
own (``--followers-in-process``: in the writer's, as before 2026-12-03, where the writer's answers
waited in its event loop behind the followers' 300 receives: the followers of a real store are other
machines' mounts); then ``--writes`` sequential updates of one memory, one every ``--interval``
seconds (0: each sent as soon as the previous one is answered, not when it was delivered). It
reports the median and p99 write latency, the ratio of the median to the one with no stream, whether
every stream received every change in commit order (the versions' ids, checked), the server's memory
per open stream (RSS after the streams are open minus before, over N), the server's CPU time per
write (from the first write until every stream has every change: steadier than latency on a shared
machine; and of it the kernel's), the storage reads the streams made during the writes (the server's
``memfs_server_change_stream_reads_total``, when it has that counter), the writes' mean time in the
server (its request metrics: from the request's arrival until its answer was handed over) and how
many streams, on average, had received a write's change before the writer had its answer (a count,
not a time: whether the answer waited behind the streams' sends).

This case owns no product code.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import httpx
import trio

from bench import proc
from bench.fixtures import pg_cluster, server_on
from bench.harness import Case, Row, percentile
from kit.pgcluster import PgCluster
from kit.servers import free_port
from kit.sse import RawStream

ROOT = Path(__file__).resolve().parents[2]  # the followers' process runs from here
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
    sys_ms_per_write: float  # of which in the kernel (system time: mostly the sockets' sends)
    reads: int | None  # storage reads of the change streams during the writes
    server_ms: float  # the writes' mean time in the server (request in, answer handed over)
    early: float  # streams that had a write's change before its writer had the answer, mean


@contextmanager
def server(db: str, workdir: Path, streams: int) -> Iterator[tuple[str, int]]:
    """A ``memfs server`` on ``db`` allowing ``streams`` streams per key; (base URL, pid)."""
    extra = ["--max-streams-per-key", str(streams + 8)]
    log_path = workdir / f"server-{free_port()}.log"
    with server_on(db, KEY, log_path=log_path, extra_args=extra) as server:
        assert server.proc is not None
        yield server.base_url, server.proc.pid


def stream_reads(url: str) -> int | None:
    """The server's count of change-stream storage reads (None: it does not count them)."""
    text = httpx.get(url + "/metrics", timeout=10).text
    counts = [
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith("memfs_server_change_stream_reads_total{")
    ]
    return sum(counts) if counts else None


def write_time(url: str) -> tuple[float, int]:
    """The seconds the server spent in updates of a memory, and how many (its request metrics)."""
    text = httpx.get(url + "/metrics", timeout=10).text
    found = {"sum": 0.0, "count": 0.0}
    for line in text.splitlines():
        for kind in found:
            if line.startswith(f"memfs_server_request_duration_seconds_{kind}{{") and (
                'method="POST"' in line and 'route="/v1/memory_stores/{store_id}/memories/{' in line
            ):
                found[kind] += float(line.rsplit(" ", 1)[1])
    return found["sum"], int(found["count"])


Measured = tuple[list[float], bool, float, int, tuple[float, float], float, float]


Received = tuple[list[str], list[float]]  # a stream's versions' ids, and when each arrived


def received(stream: RawStream) -> Received:
    ids = [data["id"] for _, data in stream.named("memory_version")]
    return ids, stream.times("memory_version")


class Followers:
    """N change streams of ``path``, in this process (``inline``) or in a child process of
    their own (``python -m bench.cases.fanout PORT PATH N``, driven over its stdin and stdout)."""

    def __init__(self, port: int, path: str, n: int, *, inline: bool) -> None:
        self.port, self.path, self.n, self.inline = port, path, n, inline
        self.streams = [RawStream(port, path, HEADERS) for _ in range(n)] if inline else []
        self._proc: subprocess.Popen[str] | None = None

    async def open(self, nursery: trio.Nursery) -> None:
        """Returns once every stream is ready."""
        if self.inline:
            with trio.fail_after(120):
                async with trio.open_nursery() as opening:
                    for stream in self.streams:
                        opening.start_soon(nursery.start, stream.run)
            return
        argv = [sys.executable, "-m", __name__, str(self.port), self.path, str(self.n)]
        self._proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT
        )
        if await self._line() != "ready":
            raise RuntimeError("the followers did not open their streams")

    async def _line(self) -> str:
        assert self._proc is not None and self._proc.stdout is not None
        return (await trio.to_thread.run_sync(self._proc.stdout.readline)).strip()

    async def received(self, writes: int) -> list[Received]:
        """The versions' ids each stream received and when (``time.perf_counter``: one clock
        for every process of the machine), once each has ``writes`` (or 120 s passed)."""
        if self.inline:
            with trio.move_on_after(120):
                for stream in self.streams:
                    await stream.wait_for("memory_version", writes)
            return [received(stream) for stream in self.streams]
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(f"{writes}\n")
        self._proc.stdin.flush()
        return [(ids, times) for ids, times in json.loads(await self._line())]

    def close(self) -> None:
        if self._proc is not None:
            self._proc.kill()  # its streams end with it
            self._proc.wait()
            self._proc = None


async def follow(port: int, path: str, n: int) -> None:
    """The followers' process (``Followers``): opens ``n`` streams, says ``ready``; for a line
    with a number of writes, answers once every stream has that many versions (or 120 s passed)
    with a JSON line: the ids each stream received, and when (``received``)."""
    streams = [RawStream(port, path, HEADERS) for _ in range(n)]
    async with trio.open_nursery() as nursery:
        with trio.fail_after(120):
            async with trio.open_nursery() as opening:
                for stream in streams:
                    opening.start_soon(nursery.start, stream.run)
        print("ready", flush=True)
        line = await trio.to_thread.run_sync(sys.stdin.readline)
        writes = int(line)
        with trio.move_on_after(120):
            for stream in streams:
                await stream.wait_for("memory_version", writes)
        print(json.dumps([received(stream) for stream in streams]))
        sys.stdout.flush()
        await trio.to_thread.run_sync(sys.stdin.readline)  # until the parent kills it
        nursery.cancel_scope.cancel()


async def measure(
    url: str, pid: int, n: int, writes: int, interval: float = 0.0, *, inline: bool = False
) -> Measured:
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
        before = proc.rss_kib(pid)
        followers = Followers(port, f"/v1/memory_stores/{store}/memfs/changes", n, inline=inline)
        try:
            async with trio.open_nursery() as nursery:
                await followers.open(nursery)
                await trio.sleep(0.5)
                per_stream = (proc.rss_kib(pid) - before) / n if n else 0.0
                reads_before = stream_reads(url)
                time_before = write_time(url)
                cpu_before = proc.cpu_times(pid)
                latencies: list[float] = []
                written: list[str] = []
                answered: list[float] = []  # when each write's answer arrived
                for i in range(writes):
                    started = time.perf_counter()
                    answer = await client.post(target, json={"content": f"write {i}"})
                    answered.append(time.perf_counter())
                    latencies.append((answered[-1] - started) * 1000)
                    answer.raise_for_status()
                    written.append(answer.json()["memory_version_id"])
                    await trio.sleep(max(0.0, started + interval - time.perf_counter()))
                got = await followers.received(writes)
                cpu_after = proc.cpu_times(pid)
                user, system = (
                    (after - before) * 1000 / writes
                    for after, before in zip(cpu_after, cpu_before, strict=True)
                )
                complete = len(got) == n and all(ids == written for ids, _ in got)
                # How many streams had each write's change before its writer had the answer.
                early = sum(
                    at < done for _, times in got for at, done in zip(times, answered, strict=False)
                )
                reads_after = stream_reads(url)
                time_after = write_time(url)
                nursery.cancel_scope.cancel()
        finally:
            followers.close()

    reads = (
        reads_after - reads_before if reads_after is not None and reads_before is not None else -1
    )
    spent, count = time_after[0] - time_before[0], time_after[1] - time_before[1]
    server_ms = spent * 1000 / count if count else 0.0
    cpu = (user + system, system)
    return latencies, complete, per_stream, reads, cpu, server_ms, early / writes


class FanoutCase(Case[PgCluster | None]):
    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--streams", type=int, nargs="+", default=[0, 300, 1000])
        parser.add_argument("--writes", type=int, default=20)
        parser.add_argument(
            "--interval", type=float, default=0.1,
            help="seconds from one write's start to the next's (0: each as soon as the previous "
            "one is answered)",
        )  # fmt: skip
        parser.add_argument("--backends", nargs="+", default=["sqlite", "postgres"])
        parser.add_argument(
            "--followers-in-process", action="store_true",
            help="hold the streams in the writer's process (its answers then wait behind them)",
        )  # fmt: skip

    def check(self, parser: argparse.ArgumentParser, options: argparse.Namespace) -> None:
        if PgCluster.find_bin() is None and "postgres" in options.backends:
            parser.error("PostgreSQL binaries not found (apt-get install postgresql)")

    def note(self, options: argparse.Namespace) -> str:
        pace = f"one every {options.interval:g} s" if options.interval else "back to back"
        where = "the writer's process" if options.followers_in_process else "a process of their own"
        return f"{options.writes} sequential writes, {pace}; streams in {where}"

    def setup(self, options: argparse.Namespace) -> AbstractContextManager[PgCluster | None]:
        return pg_cluster("postgres" in options.backends)

    def run(self, options: argparse.Namespace, fixture: PgCluster | None) -> list[Row]:
        cluster = fixture
        results: list[Result] = []
        with tempfile.TemporaryDirectory(prefix="memfs-bench-") as tmp:
            for backend in options.backends:
                baseline = None
                for n in options.streams:
                    if backend == "postgres":
                        assert cluster is not None
                        db = cluster.create_database(f"fanout{n}")
                    else:
                        db = str(Path(tmp) / f"fanout{n}.db")
                    with server(db, Path(tmp), n) as (url, pid):
                        latencies, complete, per_stream, reads, cpu, server_ms, early = trio.run(
                            partial(measure, inline=options.followers_in_process),
                            url, pid, n, options.writes, options.interval,
                        )  # fmt: skip
                    p50 = statistics.median(latencies)
                    baseline = baseline or p50
                    results.append(
                        Result(
                            backend=backend,
                            streams=n,
                            writes=options.writes,
                            p50_ms=round(p50, 2),
                            p99_ms=round(percentile(latencies, 99), 2),
                            ratio=round(p50 / baseline, 2),
                            complete=complete,
                            rss_per_stream_kib=round(per_stream, 1),
                            cpu_ms_per_write=round(cpu[0], 1),
                            sys_ms_per_write=round(cpu[1], 1),
                            reads=reads if reads >= 0 else None,
                            server_ms=round(server_ms, 2),
                            early=round(early, 1),
                        )
                    )
        return [asdict(r) for r in results]

    def ok(self, rows: list[Row]) -> bool:
        return all(row["complete"] for row in rows)


CASE = FanoutCase()

if __name__ == "__main__":  # the followers' process (``Followers``): PORT PATH N
    trio.run(follow, int(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
