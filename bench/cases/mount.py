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
``--cold-grep-only``: only the cold ``grep -r``, a fresh mount per latency each round (with
``--rounds 3``, the medians of three; requests, the daemon's CPU time and the most walk fetches
it had in flight at once). Each round runs in a directory of its own (fresh caches). Owns no
product code.
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import shutil
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import trio

from bench import proc
from bench.harness import Case, Row, percentile, timed
from bench.mounted import (
    Mount,
    SeededServer,
    add_tree_options,
    files_of,
    grep,
    read_all,
    sdk_worker_start,
    seed,
    seeded_server,
    set_latency,
    stat_all,
    tree_note,
    walk_stat,
    write_many,
)
from memfs.api.config import ClientConfig


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

    def first_ls() -> None:
        a.mount()
        os.listdir(a.point)

    try:
        seconds = timed(first_ls)
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


def cold_grep_row(latency: float, url: str, store_id: str, work: Path, env: dict[str, str]) -> Row:
    """A cold ``grep -r`` on a fresh mount: its time, requests, the daemon's CPU time."""
    label = f"{int(latency * 1000)} ms" if latency else "plain"
    set_latency(url, latency)
    mount = Mount(store_id, work / f"grep-{label}", env, work / f"grep-cache-{label}")
    mount.mount()
    try:
        os.listdir(mount.point)
        status = mount.status()
        before, pid = mount.requests(), status["pid"]
        cpu = proc.cpu_seconds(pid)
        seconds = timed(lambda: grep(mount.point))
        cpu = proc.cpu_seconds(pid) - cpu
        in_flight = mount.status()["cache"].get("walk_most_in_flight")
        requests = mount.requests() - before
    finally:
        mount.umount()
        set_latency(url, 0)
    return {
        "server": label, "benchmark": "cold grep -r", "seconds": seconds, "requests": requests,
        "daemon_cpu_s": cpu, "walk_fetches_in_flight": in_flight,
    }  # fmt: skip


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


class MountCase(Case[SeededServer]):
    def add_options(self, parser: argparse.ArgumentParser) -> None:
        add_tree_options(parser)
        parser.add_argument(
            "--startup-only", action="store_true", help="only mount start-up against the SDK worker"
        )
        parser.add_argument("--cold-grep-only", action="store_true", help="only the cold grep -r")

    def note(self, options: argparse.Namespace) -> str:
        return tree_note(options.memories, options.dirs) + "; mount (s) against local dir (s)"

    def setup(self, options: argparse.Namespace) -> AbstractContextManager[SeededServer]:
        return seeded_server(options.memories, options.dirs, "memfs-bench-mount-")

    def run(self, options: argparse.Namespace, fixture: SeededServer) -> list[Row]:
        bench = fixture
        tree, local, url, key = bench.tree, bench.local, bench.url, bench.key
        config, store_id, env = bench.config, bench.store_id, bench.env
        work = bench.work / f"round-{secrets.token_hex(3)}"  # fresh mount points and caches
        work.mkdir()
        latencies = [float(x) for x in options.latencies.split(",")]
        if options.cold_grep_only:
            return [cold_grep_row(latency, url, store_id, work, env) for latency in latencies]
        rows = startup_rows(url, key, config, tree, store_id, work, env)
        if not options.startup_only:
            for latency in latencies:
                rows += run_setting(latency, url, key, store_id, config, local, work, env, tree)
        return rows


CASE = MountCase()
