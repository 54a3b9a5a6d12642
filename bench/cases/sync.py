"""Benchmark ``memfs sync`` against the SDK's sync worker: the goals of issue 32.

Starts ``memfs server --faults none`` on a throwaway database and seeds one store with the tree
of the mount case (``--memories`` memories of 0.2-20 kB in ``--dirs`` directories;
``bench.mounted``). Then, for each server latency (plain, and 50 ms injected per
request through the fault admin endpoint):

- first complete local copy: ``memfs sync STORE DIR --once`` into an empty directory (wall time,
  interpreter start included), against the SDK worker's ``SessionMemoryStores.download`` from
  PyPI ``anthropic`` (in-process) and against ``cp -r`` of the same tree on local disk;
- a restart of a detached sync on that copy, until it says DIR is in step;
- a change made through the API until DIR has it (p50/p99 of ``--samples``, from the API's
  answer), with one detached sync on the server's change stream and one on ``--change-feed
  poll``; the worker reconciles at most every 15 s (its default ``memory_sync_interval``);
- a local write until the store has it (p50/p99, from the ``close`` of the file until the
  version arrives on a change stream the benchmark follows: no polling of the server, so no
  round trip is added at 50 ms);
- idle for ``--idle`` seconds: requests besides the open change stream (the sync's own count and
  the server's ``/metrics``), and CPU of the sync process (``/proc/PID/stat``);
- a full comparison of the unchanged copy (the engine's ``last_rescan_seconds``, a sync run
  with ``--rescan-interval 1``: the median of what it reports), against a walk + ``lstat`` of
  the same tree on local disk;
- RSS of the sync process with the store in step.

Requests of the first copies are the server's (``/metrics``, stream excluded). memfs runs from
compiled bytecode, as when installed. Each round runs in directories of its own. Owns no product
code.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import secrets
import shutil
import statistics
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import AbstractContextManager, aclosing, contextmanager
from pathlib import Path
from typing import Any

import trio

from bench import proc
from bench.harness import Case, Row, percentile, timed
from bench.mounted import (
    SeededServer,
    add_tree_options,
    sdk_worker_start,
    seeded_server,
    set_latency,
    tree_note,
    walk_stat,
)
from kit.mounts import memfs
from memfs.api import StoreClient
from memfs.api.changes import ChangeStream
from memfs.api.config import ClientConfig
from memfs.contract.models import Memory

STREAM_ROUTE = "/memfs/changes"  # the change stream: open all along, not a request per change
UNCOUNTED = ("/metrics", "/healthz", "/v1/memfs/faults")
WORKER_INTERVAL = 15.0  # the SDK worker's memory_sync_interval default (peer-sync-worker.md)


def server_requests(url: str) -> int:
    """Requests the server answered so far, the change stream and the bench's own excluded."""
    text = urllib.request.urlopen(url + "/metrics", timeout=5).read().decode()
    total = 0
    for match in re.finditer(r"^memfs_server_requests_total\{(.*)\} (\d+)$", text, re.M):
        route = re.search(r'route="([^"]*)"', match.group(1))
        name = route.group(1) if route else ""
        if STREAM_ROUTE in name or name in UNCOUNTED:
            continue
        total += int(match.group(2))
    return total


class Sync:
    """One synced directory: ``memfs sync`` on it (``--once``, ``--detach``, ``--stop``)."""

    def __init__(self, store_id: str, directory: Path, cache: Path, env: dict[str, str]) -> None:
        self.store_id, self.directory, self.cache, self.env = store_id, directory, cache, env

    def memfs(self, *args: str) -> subprocess.CompletedProcess[str]:
        return memfs(*args, env=self.env, timeout=600)

    def _sync(self, *extra: str) -> dict[str, Any]:
        result = self.memfs(
            "sync", self.store_id, str(self.directory), "--cache-dir", str(self.cache), *extra
        )
        if result.returncode:
            raise RuntimeError(
                f"memfs sync {' '.join(extra)}: {result.returncode} {result.stderr}{result.stdout}"
            )
        return json.loads(result.stdout) if "--json" in extra else {}

    def once(self) -> dict[str, Any]:
        return self._sync("--once", "--json")

    def detach(self, *extra: str) -> None:
        self._sync("--detach", *extra)

    def stop(self) -> None:
        self.memfs("sync", "--stop", str(self.directory))

    def status(self) -> dict[str, Any]:
        time.sleep(1.1)  # the sync publishes its status every second
        result = self.memfs("status", str(self.directory), "--json")
        doc: dict[str, Any] = json.loads(result.stdout)
        return doc

    def own_requests(self, doc: dict[str, Any]) -> int:
        routes = doc["requests"]["by_route"]
        return sum(n for route, n in routes.items() if STREAM_ROUTE not in route)


async def memory_ids(config: ClientConfig, store_id: str) -> dict[str, str]:
    async with StoreClient(config) as client:
        return {
            item.path: item.id
            async for item in client.list_memories(store_id, limit=100)
            if isinstance(item, Memory)
        }


def read_or_none(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


async def remote_changes(
    config: ClientConfig, store_id: str, ids: dict[str, str], dirs: list[Path], samples: int
) -> list[list[tuple[float, float]]]:
    """Change a memory through the API ``samples`` times; for each directory of ``dirs``, the
    seconds until it had the new text, counted from the API's answer and from the request sent."""
    targets = sorted(ids)[:samples]
    results: list[list[tuple[float, float]]] = [[] for _ in dirs]
    async with StoreClient(config) as client:
        for n, path in enumerate(targets):
            text = f"changed remotely {n} {secrets.token_hex(6)}\n"
            sent = time.perf_counter()
            await client.update_memory(store_id, ids[path], content=text)
            answered = time.perf_counter()
            waiting = dict(enumerate(dirs))
            while waiting:
                for index, directory in list(waiting.items()):
                    if read_or_none(directory / path.lstrip("/")) == text:
                        now = time.perf_counter()
                        results[index].append((now - answered, now - sent))
                        del waiting[index]
                if time.perf_counter() - sent > 30:
                    raise RuntimeError(f"{path}: not in DIR within 30 s")
                await trio.sleep(0.003)
            await trio.sleep(random.uniform(0, 0.3))  # not in step with a poller
    return results


async def local_writes(
    config: ClientConfig, store_id: str, directory: Path, paths: list[str]
) -> list[float]:
    """Write each of ``paths`` in ``directory`` (open, write, close); the seconds from the
    close until the store has the text: its version arrives on a change stream followed here."""
    samples: list[float] = []
    async with (
        StoreClient(config) as client,
        ChangeStream(client, store_id) as stream,
        # closed here, not by the garbage collector (an async generator, typed as an iterator)
        aclosing(stream.__aiter__()) as events,  # type: ignore[type-var]
    ):
        while (await events.__anext__()).kind != "ready":
            pass
        for n, path in enumerate(paths):
            text = f"written locally {n} {secrets.token_hex(6)}\n"
            sha = hashlib.sha256(text.encode()).hexdigest()
            with open(directory / path.lstrip("/"), "w") as handle:
                handle.write(text)
            closed = time.perf_counter()
            with trio.fail_after(30):
                while True:
                    event = await events.__anext__()
                    version = event.version
                    if version is not None and version.content_sha256 == sha:
                        break
            samples.append(time.perf_counter() - closed)
            await trio.sleep(random.uniform(0.05, 0.3))
    return samples


@contextmanager
def detached(sync: Sync, *extra: str) -> Iterator[float]:
    """``memfs sync --detach`` running on ``sync``'s directory; yields the seconds it took
    to say DIR is in step. Stopped at the end, even on failure."""
    started = time.perf_counter()
    try:
        sync.detach(*extra)
        yield time.perf_counter() - started
    finally:
        sync.stop()


def run_setting(
    latency: float, url: str, key: str, store_id: str, config: ClientConfig,
    local: Path, work: Path, env: dict[str, str], args: argparse.Namespace,
) -> list[Row]:  # fmt: skip
    label = f"{int(latency * 1000)} ms" if latency else "plain"
    rows: list[Row] = []

    def row(name: str, value: str, local_seconds: float | None = None, ratio: float | None = None,
            requests: Any = None, worker: str = "") -> None:  # fmt: skip
        rows.append({"server": label, "benchmark": name, "sync": value, "local": local_seconds,
                     "ratio": ratio, "requests": requests, "worker": worker,
                     "note": ""})  # fmt: skip

    set_latency(url, latency)
    try:
        # the first complete copy, against the SDK worker's download and cp -r on local disk
        a = Sync(store_id, work / f"a-{label}", work / f"cache-a-{label}", env)
        before = server_requests(url)
        seconds = timed(a.once)
        copy_requests = server_requests(url) - before
        before = server_requests(url)
        worker_seconds, worker_requests = sdk_worker_start(
            url, key, store_id, work / f"worker-{label}" / "store"
        )
        worker_server = server_requests(url) - before
        copy = work / f"cp-{label}"
        local_seconds = timed(lambda: shutil.copytree(local, copy))
        shutil.rmtree(copy)
        row(
            "first complete copy (`memfs sync --once`, wall)",
            f"{seconds:.3f}",
            local_seconds,
            seconds / local_seconds,
            copy_requests,
            f"{worker_seconds:.3f} s, {worker_server} requests ({worker_requests} its own count)",
        )
        # a restart on the copy: the feed position and the basis persisted
        b = Sync(store_id, work / f"b-{label}", work / f"cache-b-{label}", env)
        with detached(a) as ready, detached(b, "--change-feed", "poll"):
            row("restart on the copy until in step (`--detach`)", f"{ready:.3f}", None, None, None)
            ids = trio.run(memory_ids, config, store_id)
            stream_s, poll_s = trio.run(
                remote_changes, config, store_id, ids, [a.directory, b.directory], args.samples
            )
            for name, samples in (("change stream", stream_s), ("`--change-feed poll`", poll_s)):
                answered = [s[0] for s in samples]
                sent = [s[1] for s in samples]
                row(f"API change visible in DIR ({name}): p50 / p99 (s)",
                    f"{percentile(answered, 50):.3f} / {percentile(answered, 99):.3f}",
                    worker=f"up to {WORKER_INTERVAL:.0f} s (its interval)")  # fmt: skip
                rows[-1]["note"] = f"from the request sent: p50 {percentile(sent, 50):.3f}"
        with detached(a):
            targets = sorted(trio.run(memory_ids, config, store_id))[-args.samples :]
            written = trio.run(local_writes, config, store_id, a.directory, targets)
            row("local write on the server after close: p50 / p99 (s)",
                f"{percentile(written, 50):.3f} / {percentile(written, 99):.3f}",
                worker=f"up to {WORKER_INTERVAL:.0f} s (its interval)")  # fmt: skip
            time.sleep(2)  # the uploads' own feed echoes settle
            doc = a.status()
            pid = doc["pid"]
            own, at_server, cpu = a.own_requests(doc), server_requests(url), proc.cpu_seconds(pid)
            started = time.perf_counter()
            time.sleep(args.idle)
            doc = a.status()
            elapsed = time.perf_counter() - started
            cpu = proc.cpu_seconds(pid) - cpu
            row(f"idle {args.idle:.0f} s: requests (own count / server's), CPU of one core",
                f"{a.own_requests(doc) - own} / {server_requests(url) - at_server}, "
                f"{100 * cpu / elapsed:.2f}%",
                worker=f"a listing every {WORKER_INTERVAL:.0f} s")  # fmt: skip
            row("sync process RSS, store in step (MB)", f"{proc.rss_kib(pid) / 1024:.1f}")
        # full comparisons of the unchanged copy, one a second
        rescans: list[float] = []
        with detached(a, "--rescan-interval", "1"):
            seen = None
            deadline = time.perf_counter() + args.rescan_seconds
            while time.perf_counter() < deadline:
                doc = a.status()
                sync_doc = doc["sync"]
                if sync_doc.get("last_rescan") != seen and sync_doc.get("last_rescan_seconds"):
                    seen = sync_doc["last_rescan"]
                    rescans.append(float(sync_doc["last_rescan_seconds"]))
        rescans = rescans[1:]  # the first is the start's, with the listings fetched
        walk = min(timed(lambda: walk_stat(local)) for _ in range(3))
        median = statistics.median(rescans) if rescans else float("nan")
        row(f"rescan of the unchanged copy (median of {len(rescans)})", f"{median:.3f}", walk,
            median / walk if walk else None)  # fmt: skip
    finally:
        set_latency(url, 0)
    return rows


@contextmanager
def synced_server(options: argparse.Namespace) -> Iterator[SeededServer]:
    with seeded_server(options.memories, options.dirs, "memfs-bench-sync-") as bench:
        # untimed: writes the bytecode cache, as an install would have
        Sync(bench.store_id, bench.work / "warm-up", bench.work / "cache-warm-up", bench.env).once()
        yield bench


class SyncCase(Case[SeededServer]):
    def add_options(self, parser: argparse.ArgumentParser) -> None:
        add_tree_options(parser)
        parser.add_argument("--samples", type=int, default=20, help="per visibility figure")
        parser.add_argument("--idle", type=float, default=60.0, help="seconds idle measured")
        parser.add_argument("--rescan-seconds", type=float, default=12.0, help="rescans sampled")

    def note(self, options: argparse.Namespace) -> str:
        return tree_note(options.memories, options.dirs)

    def setup(self, options: argparse.Namespace) -> AbstractContextManager[SeededServer]:
        return synced_server(options)

    def run(self, options: argparse.Namespace, fixture: SeededServer) -> list[Row]:
        bench = fixture
        work = bench.work / f"round-{secrets.token_hex(3)}"  # fresh directories and caches
        work.mkdir()
        rows: list[Row] = []
        for latency in (float(x) for x in options.latencies.split(",")):
            rows += run_setting(
                latency, bench.url, bench.key, bench.store_id, bench.config, bench.local, work,
                bench.env, options,
            )  # fmt: skip
        return rows


CASE = SyncCase()
