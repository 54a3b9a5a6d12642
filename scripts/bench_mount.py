#!/usr/bin/env python3
"""Benchmark a memfs mount against the same work on a local directory, in the same run.

Starts ``memfs server --faults none`` on a throwaway database (latency is switched at run time
through the fault admin endpoint), seeds one store with ``--memories`` memories of realistic
sizes (0.2-20 kB, log-uniform, in ``--dirs`` directories) and writes the same tree to a local
directory. Then, for each server latency (plain, and 50 ms injected per request):

- mount to first ``ls`` (``memfs mount`` + ``os.listdir``), against the SDK's sync worker
  starting (``SessionMemoryStores.download`` from PyPI ``anthropic``, what its environments worker
  runs: every memory fetched with ``view=full`` and written locally, then ``os.listdir``);
- cold ``grep -r`` of the whole tree;
- warm read of every file, warm ``stat`` of every file;
- writing 200 small files (until every ``close`` returned, then until the store has them),
  against a local loop without and with ``fdatasync`` per file (a memfs close is durable);
- a change in one mount until it is visible in another (p50, p99; 20 samples);
- the daemon's resident memory with the store cached.

Before those, at the plain server, mount start-up alone at 200 and ``--memories`` memories: the
median of 3 ``memfs mount`` + first ``ls`` against the median of 3 SDK worker starts
(``--startup-only``: nothing else). memfs runs from compiled bytecode, as when installed.

Requests are the daemon's own count (``memfs status --json``), change-feed traffic excluded.
``--cold-grep-only``: only the cold ``grep -r``, ``--rounds`` fresh mounts per latency (the
median; requests, the daemon's CPU time and the most walk fetches it had in flight at once).
Prints a markdown table (or JSON with ``--json``). Owns no product code.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import trio

from memfs.api import StoreClient
from memfs.api.config import ClientConfig, Secret

FEED_ROUTES = ("memory_versions", "/memfs/changes")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[max(1, math.ceil(pct / 100 * len(ordered))) - 1]


# Fault control (the injected latency) takes the server's admin key, never an API key.
ADMIN_KEY = "sk-memfs-bench-admin-" + secrets.token_hex(12)


@contextmanager
def server(key: str, workdir: Path) -> Iterator[str]:
    port = free_port()
    env = dict(os.environ, MEMFS_API_KEYS=key, MEMFS_ADMIN_KEY=ADMIN_KEY)
    log = open(workdir / "server.log", "ab")  # noqa: SIM115 - owned by the subprocess
    proc = subprocess.Popen(
        [sys.executable, "-m", "memfs", "server", "--db", str(workdir / "bench.db"),
         "--port", str(port), "--faults", "none", "--log-level", "WARNING"],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    log.close()
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(url + "/healthz", timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def set_latency(url: str, seconds: float) -> None:
    spec = f"latency={seconds}" if seconds else "none"
    request = urllib.request.Request(
        url + "/v1/memfs/faults",
        data=json.dumps({"spec": spec}).encode(),
        headers={"x-api-key": ADMIN_KEY, "content-type": "application/json"},
        method="PUT",
    )
    urllib.request.urlopen(request, timeout=5).close()


def make_tree(count: int, dirs: int, seed: int) -> dict[str, str]:
    rng = random.Random(seed)
    words = ["memory", "agent", "note", "result", "todo", "fixed", "error", "plan", "user"]
    tree = {}
    for n in range(count):
        size = int(math.exp(rng.uniform(math.log(200), math.log(20_000))))
        text = []
        while sum(len(w) + 1 for w in text) < size:
            text.append(rng.choice(words))
        body = " ".join(text)[:size]
        tree[f"/topic-{n % dirs:02}/note-{n:04}.md"] = body + ("\nNEEDLE\n" if n % 7 == 0 else "\n")
    return tree


def client_env(url: str, key: str, work: Path) -> dict[str, str]:
    """The environment of the memfs commands a benchmark runs against its server."""
    env = dict(os.environ, ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY=key)
    env.pop("MEMFS_API_KEYS", None)
    # memfs runs from compiled bytecode, as an installed package does, even where the
    # environment says not to write it (PYTHONDONTWRITEBYTECODE would compile every module
    # of memfs at every start: ~0.1 s of CPU per process): cached outside the tree
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    return env


def run_header(tree: dict[str, str], dirs: int, versions: str = "") -> str:
    """Date, machine and the tree measured: the first line of a results table."""
    size = sum(len(c) for c in tree.values())
    return (
        f"{datetime.now(UTC):%Y-%m-%d}, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}{versions}; {len(tree)} memories, "
        f"{size / 1e6:.1f} MB in {dirs} directories"
    )


def write_tree(tree: dict[str, str], directory: Path) -> Path:
    """The same tree as plain files under ``directory`` (the local side of a comparison)."""
    for path, content in tree.items():
        target = directory / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    return directory


async def seed(config: ClientConfig, tree: dict[str, str]) -> str:
    async with StoreClient(config) as client:
        store = await client.create_store(f"bench-{secrets.token_hex(4)}")
        items = list(tree.items())

        async def worker(start: int) -> None:
            for path, content in items[start::8]:
                await client.create_memory(store.id, path, content)

        async with trio.open_nursery() as nursery:
            for start in range(8):
                nursery.start_soon(worker, start)
        return store.id


@dataclass
class SeededServer:
    """A benchmark's server, its store seeded with ``tree``, and the same tree on local disk."""

    tree: dict[str, str]
    work: Path
    local: Path
    url: str
    key: str
    config: ClientConfig
    store_id: str
    env: dict[str, str]  # for the memfs commands run against the server (client_env)


@contextmanager
def seeded_server(memories: int, dirs: int, prefix: str) -> Iterator[SeededServer]:
    """A throwaway work directory and server, one store seeded with ``make_tree``'s tree."""
    key = "sk-memfs-bench-" + secrets.token_hex(12)
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        work = Path(tmp)
        tree = make_tree(memories, dirs, seed=1)
        local = write_tree(tree, work / "local")
        with server(key, work) as url:
            config = ClientConfig(api_key=Secret(key), base_url=url)
            store_id = trio.run(seed, config, tree)
            yield SeededServer(
                tree, work, local, url, key, config, store_id, client_env(url, key, work)
            )


def sdk_worker_start(url: str, key: str, store_id: str, target: Path) -> tuple[float, int]:
    """The SDK's sync worker starting on ``store_id``: ``SessionMemoryStores.download`` (the
    ``anthropic`` package's environments worker runs it before a session) into ``target``, then
    the first ``ls``. Returns (seconds, requests)."""
    from types import SimpleNamespace

    import anyio
    import httpx2
    from anthropic import AsyncAnthropic
    from anthropic.lib.tools._memories import SessionMemoryStores

    requests = 0

    async def count(request: httpx2.Request) -> None:
        nonlocal requests
        requests += 1

    async def start() -> float:
        http = httpx2.AsyncClient(event_hooks={"request": [count]})
        client = AsyncAnthropic(api_key=key, base_url=url, max_retries=0, http_client=http)
        resource = SimpleNamespace(
            type="memory_store", memory_store_id=store_id, mount_path=str(target), name=None,
            access="read_write",
        )  # fmt: skip
        stores = SessionMemoryStores(client, workdir=target.parent)
        started = time.perf_counter()
        await stores.download(SimpleNamespace(resources=[resource]))  # type: ignore[arg-type]
        os.listdir(target)
        seconds = time.perf_counter() - started
        await client.close()
        return seconds

    return anyio.run(start), requests


class Mount:
    def __init__(self, store_id: str, point: Path, env: dict[str, str], cache: Path) -> None:
        self.store_id, self.point, self.env, self.cache = store_id, point, env, cache
        point.mkdir(parents=True, exist_ok=True)

    def memfs(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memfs", *args], env=self.env, capture_output=True, text=True
        )

    def mount(self, *extra: str) -> None:
        result = self.memfs(
            "mount", self.store_id, str(self.point), "--cache-dir", str(self.cache), *extra
        )
        if result.returncode:
            raise RuntimeError(result.stderr)

    def umount(self) -> None:
        self.memfs("umount", str(self.point))

    def settle(self) -> None:
        """Until the daemon has uploaded everything pending (an fsync of the mount's root)."""
        fd = os.open(self.point, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def status(self) -> dict[str, Any]:
        time.sleep(1.1)  # the daemon publishes its status every second
        doc: dict[str, Any] = json.loads(self.memfs("status", str(self.point), "--json").stdout)
        return doc

    def requests(self) -> int:
        routes = self.status()["requests"]["by_route"]
        return sum(n for r, n in routes.items() if not any(f in r for f in FEED_ROUTES))

    def rss_mb(self) -> float:
        pid = self.status()["pid"]
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def files_of(root: Path, tree: dict[str, str]) -> list[str]:
    return [str(root) + path for path in tree]


def read_all(files: list[str]) -> int:
    total = 0
    for name in files:
        with open(name, "rb") as handle:
            total += len(handle.read())
    return total


def stat_all(files: list[str]) -> None:
    for name in files:
        os.stat(name)


def walk_stat(root: Path) -> int:
    """``ls -lR``: every directory listed, every entry stat'ed."""
    count = 0
    for directory, _, files in os.walk(root):
        for name in files:
            os.stat(os.path.join(directory, name))
            count += 1
    return count


def grep(root: Path) -> None:
    subprocess.run(["grep", "-r", "-l", "NEEDLE", str(root)], capture_output=True, check=True)


def write_many(root: Path, label: str, count: int = 200, *, sync: bool = False) -> None:
    """``count`` new small files, each written and closed (``sync``: ``fdatasync`` before the
    close, the fair local comparison for memfs, whose close is durable)."""
    target = root / f"written-{label.replace(' ', '')}"
    target.mkdir(exist_ok=True)
    for n in range(count):
        with open(target / f"w{n:03}.md", "w") as handle:
            handle.write(f"small file {n}\n")
            if sync:
                handle.flush()
                os.fdatasync(handle.fileno())


def run_setting(
    latency: float, url: str, key: str, store_id: str, config: ClientConfig,
    local: Path, work: Path, env: dict[str, str], tree: dict[str, str],
) -> list[dict[str, Any]]:  # fmt: skip
    rows: list[dict[str, Any]] = []
    label = f"{int(latency * 1000)} ms" if latency else "plain"

    def row(name: str, seconds: float, local_seconds: float | None, requests: Any) -> None:
        ratio = None if not local_seconds else seconds / local_seconds
        rows.append(
            {"server": label, "benchmark": name, "seconds": seconds, "local_seconds": local_seconds,
             "ratio": ratio, "requests": requests}
        )  # fmt: skip

    set_latency(url, latency)
    cache = work / f"cache-{label}"
    a = Mount(store_id, work / f"a-{label}", env, cache)
    b = Mount(store_id, work / f"b-{label}", env, cache)
    c = Mount(store_id, work / f"c-{label}", env, cache)
    dl_seconds, dl_requests = sdk_worker_start(url, key, store_id, work / f"download-{label}")
    try:
        seconds = timed(lambda: (a.mount(), os.listdir(a.point)))
        row("mount to first ls", seconds, None, a.requests())
        row("  SDK sync worker: download + first ls", dl_seconds, None, dl_requests)
        before = a.requests()
        row("cold grep -r", timed(lambda: grep(a.point)), timed(lambda: grep(local)),
            a.requests() - before)  # fmt: skip
        mounted_files, local_files = files_of(a.point, tree), files_of(local, tree)
        read_all(mounted_files)  # make sure everything is warm
        before = a.requests()
        row("warm read of every file", timed(lambda: read_all(mounted_files)),
            timed(lambda: read_all(local_files)), a.requests() - before)  # fmt: skip
        before = a.requests()
        row("warm stat of every file", timed(lambda: stat_all(mounted_files)),
            timed(lambda: stat_all(local_files)), a.requests() - before)  # fmt: skip
        before = a.requests()
        row("warm ls -lR (walk + stat)", timed(lambda: walk_stat(a.point)),
            timed(lambda: walk_stat(local)), a.requests() - before)  # fmt: skip
        rows.append({"server": label, "benchmark": "daemon RSS with the store cached (MB)",
                     "seconds": None, "local_seconds": None, "ratio": None,
                     "requests": round(a.rss_mb(), 1)})  # fmt: skip
        # the 2,000-memory store is full: write into a fresh store of its own
        w = Mount(trio.run(seed, config, {}), work / f"w-{label}", env, cache)
        w.mount()
        before = w.requests()
        local_write = timed(lambda: write_many(local, label))
        local_synced = timed(lambda: write_many(local, label + "-sync", sync=True))
        closes = timed(lambda: write_many(w.point, label))
        row("write 200 small files (closes)", closes, local_write, None)
        row("  ... vs local with fdatasync per file", closes, local_synced, None)
        row("  ... until the store has them", timed(w.settle), None,
            w.requests() - before)  # fmt: skip
        w.umount()
        for suffix in ("", "-sync"):
            shutil.rmtree(local / f"written-{(label + suffix).replace(' ', '')}")
        for mount, mode in ((b, "auto"), (c, "poll")):
            mount.mount("--change-feed", mode)
            target = "topic-00/note-0000.md"
            (mount.point / target).read_text()
            samples = []
            for n in range(20):
                text = f"visible {n} {secrets.token_hex(4)}\n"
                started = time.perf_counter()
                with open(a.point / target, "w") as handle:
                    handle.write(text)
                    handle.flush()
                    os.fsync(handle.fileno())
                while (mount.point / target).read_text() != text:
                    time.sleep(0.005)
                    if time.perf_counter() - started > 20:
                        raise RuntimeError("change not visible in the other mount within 20 s")
                samples.append(time.perf_counter() - started)
                time.sleep(random.uniform(0, 0.3))  # not in step with the poller
            source = mount.status()["change_feed"]["source"]
            rows.append({"server": label, "benchmark": f"visible in another mount ({source}): "
                         "p50 / p99 (s)", "seconds": percentile(samples, 50),
                         "local_seconds": None, "ratio": None,
                         "requests": f"p99 {percentile(samples, 99):.3f}"})  # fmt: skip
            mount.umount()
    finally:
        for mount in (a, b, c):
            mount.umount()
        set_latency(url, 0)
    return rows


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cold_grep_rows(
    latency: float, url: str, store_id: str, work: Path, env: dict[str, str], rounds: int
) -> list[dict[str, Any]]:
    """A cold ``grep -r`` on ``rounds`` fresh mounts: the median's time, requests, CPU."""
    label = f"{int(latency * 1000)} ms" if latency else "plain"
    set_latency(url, latency)
    runs = []
    for n in range(rounds):
        mount = Mount(store_id, work / f"grep-{label}-{n}", env, work / f"grep-cache-{label}-{n}")
        mount.mount()
        try:
            os.listdir(mount.point)
            status = mount.status()
            before, pid = mount.requests(), status["pid"]
            cpu = cpu_seconds(pid)
            seconds = timed(lambda: grep(mount.point))  # noqa: B023 - called at once
            cpu = cpu_seconds(pid) - cpu
            cache = mount.status()["cache"]
            runs.append((seconds, mount.requests() - before, cpu, cache.get("walk_most_in_flight")))
        finally:
            mount.umount()
    set_latency(url, 0)
    seconds, requests, cpu, in_flight = sorted(runs)[len(runs) // 2]
    return [{"server": label, "benchmark": f"cold grep -r (median of {rounds}; daemon CPU "
             f"{cpu:.2f} s, at most {in_flight} walk fetches in flight)", "seconds": seconds,
             "local_seconds": None, "ratio": None, "requests": requests}]  # fmt: skip


def startup_rows(
    url: str, key: str, config: ClientConfig, tree: dict[str, str], store_id: str, work: Path,
    env: dict[str, str],
) -> list[dict[str, Any]]:  # fmt: skip
    """Mount to first ``ls`` against the SDK worker's start, at 200 memories and the whole tree:
    medians of 3 (a mount each time, unmounted after)."""
    small = dict(list(tree.items())[:200])
    warm_up = Mount(store_id, work / "start-warm-up", env, work / "cache-start")
    warm_up.mount()  # untimed: writes the bytecode cache, as an install would have
    warm_up.umount()
    rows: list[dict[str, Any]] = []
    for size, store in ((len(small), trio.run(seed, config, small)), (len(tree), store_id)):
        mounts, sdk, requests = [], [], 0
        for n in range(3):
            m = Mount(store, work / f"start-{size}-{n}", env, work / "cache-start")
            started = time.perf_counter()
            m.mount()
            os.listdir(m.point)
            mounts.append(time.perf_counter() - started)
            requests = m.requests()
            m.umount()
            seconds, sdk_requests = sdk_worker_start(url, key, store, work / f"sdk-{size}-{n}")
            sdk.append(seconds)
        for name, samples, count in (
            (f"mount to first ls, {size} memories (median of 3)", mounts, requests),
            (f"  SDK sync worker: download + first ls, {size} memories", sdk, sdk_requests),
        ):
            rows.append({"server": "plain", "benchmark": name, "seconds": percentile(samples, 50),
                         "local_seconds": None, "ratio": None, "requests": count})  # fmt: skip
    return rows


def tree_parser(doc: str | None) -> argparse.ArgumentParser:
    """The options of a benchmark of ``make_tree``'s tree at server latencies."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--dirs", type=int, default=40)
    parser.add_argument("--latencies", default="0,0.05", help="comma-separated seconds")
    parser.add_argument("--json", action="store_true")
    return parser


def table_rows(
    rows: list[dict[str, Any]], args: argparse.Namespace, tree: dict[str, str], *head: str
) -> list[dict[str, Any]]:
    """With ``--json``, prints ``rows`` as JSON, and none is left to print; else prints the run's
    header and the table's ``head`` lines, and gives the rows back for their lines."""
    if args.json:
        print(json.dumps(rows, indent=1))
        return []
    print(run_header(tree, args.dirs) + "\n")
    print("\n".join(head))
    return rows


def main() -> int:
    parser = tree_parser(__doc__)
    parser.add_argument(
        "--startup-only", action="store_true", help="only mount start-up against the SDK worker"
    )
    parser.add_argument("--cold-grep-only", action="store_true", help="only the cold grep -r")
    parser.add_argument("--rounds", type=int, default=3, help="with --cold-grep-only")
    args = parser.parse_args()
    latencies = [float(x) for x in args.latencies.split(",")]
    with seeded_server(args.memories, args.dirs, "memfs-bench-mount-") as bench:
        tree, work, local, url, key = bench.tree, bench.work, bench.local, bench.url, bench.key
        config, store_id, env = bench.config, bench.store_id, bench.env
        if args.cold_grep_only:
            rows = []
            for latency in latencies:
                rows += cold_grep_rows(latency, url, store_id, work, env, args.rounds)
            latencies = []
        else:
            rows = startup_rows(url, key, config, tree, store_id, work, env)
        if args.startup_only:
            latencies = []
        for latency in latencies:
            rows += run_setting(latency, url, key, store_id, config, local, work, env, tree)
    columns = "| server | benchmark | mount (s) | local dir (s) | ratio | requests |"
    for r in table_rows(rows, args, tree, columns, "|---|---|---:|---:|---:|---:|"):

        def fmt(value: float | None, digits: int = 3) -> str:
            return "" if value is None else f"{value:.{digits}f}"

        print(
            f"| {r['server']} | {r['benchmark']} | {fmt(r['seconds'])} | "
            f"{fmt(r['local_seconds'])} | {fmt(r['ratio'], 1)} | {r['requests'] or ''} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
