#!/usr/bin/env python3
"""Benchmark warm reads on a local directory, on the floor of a Python FUSE daemon and on memfs.

A warm read on memfs (``open(name, 'rb').read()`` of a file already in the kernel's page cache,
``keep_cache``) costs three FUSE requests: OPEN, FLUSH and RELEASE. Most of the time goes to
the kernel's round trips and to pyfuse3 + trio answering each request, not to memfs's own
handlers. This script measures that claim. ``scripts/floorfs.py`` is a minimal in-memory
pyfuse3 + trio filesystem whose handlers do next to nothing, with the same ``keep_cache`` and
60 s timeouts as memfs. It is the floor any pyfuse3 + trio daemon stands on. The gap from the
local directory to floorfs is what FUSE through pyfuse3 + trio costs. The gap from floorfs to
memfs is what memfs's own code adds.

It builds the tree of ``scripts/bench_mount.py`` (``--memories`` files of 0.2-20 kB in
``--dirs`` directories, seed 1) and writes it to a local directory. It mounts floorfs on a copy
of that directory (a subprocess) and memfs (``memfs mount``) on a store seeded with the same
tree on ``memfs server --faults none`` with no latency. Both mounts are warmed by reading every
file twice. Then, with the loop of ``bench_mount.py`` (every file opened and read), it does
``--passes`` passes; each pass times the local directory, floorfs and memfs one after the other
(the order rotates from pass to pass). It does this twice:

- unpinned: the scheduler places the reader and the daemons, as in ``bench_mount.py``;
- one CPU: this process and every thread of both daemons (``/proc/PID/task/*``) pinned to one
  CPU with ``sched_setaffinity``.

On a small VM the placement alone can move the unpinned number by 2x from run to run (a reader
and a daemon woken on different CPUs pay cross-CPU wakeups on every request). The pinned number
is the stable one to compare.

For each placement it reports the median time per file and its ratio to the local directory;
each daemon's CPU time per file (utime + stime from ``/proc/PID/stat`` over the timed passes;
memfs's includes its background tasks); and memfs's HTTP requests during the timed passes,
which must be 0 (the daemon's own count, change feed excluded, as ``bench_mount.py`` counts).
Prints a markdown table (or JSON with ``--json``). Owns no product code.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import pyfuse3
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_mount import (
    Mount,
    files_of,
    make_tree,
    read_all,
    run_header,
    seed,
    server,
    set_latency,
    timed,
    write_tree,
)

from memfs.api.config import ClientConfig, Secret

FLOORFS = Path(__file__).resolve().parent / "floorfs.py"
TICKS = os.sysconf("SC_CLK_TCK")
TARGETS = ("local directory", "floorfs (pyfuse3 + trio floor)", "memfs")


def mounted(point: Path) -> bool:
    """True if ``point`` is in the mount table (asks /proc, never the file system itself)."""
    with open("/proc/self/mounts") as mounts:
        return any(line.split()[1] == str(point) for line in mounts)


def wait_mounted(point: Path, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while not mounted(point):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"floorfs did not mount {point}: {log.read_text()[-2000:]}")
        time.sleep(0.02)


def stop_floorfs(point: Path, proc: subprocess.Popen[bytes]) -> None:
    """Unmount (the daemon then exits by itself), else kill it and detach the mount."""
    if mounted(point):
        subprocess.run(["fusermount3", "-u", str(point)], capture_output=True)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    if mounted(point):
        subprocess.run(["fusermount3", "-u", "-z", str(point)], capture_output=True)


def stop_memfs(mount: Mount) -> None:
    mount.umount()
    if mounted(mount.point):
        subprocess.run(["fusermount3", "-u", "-z", str(mount.point)], capture_output=True)


def cpu_seconds(pid: int) -> float:
    """utime + stime of every thread of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def pin(pid: int, cpus: set[int]) -> None:
    """Pin every thread of ``pid`` (threads started later inherit it from their creator)."""
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):  # a thread that just exited
            os.sched_setaffinity(int(task), cpus)


def measure(
    placement: str, files: dict[str, list[str]], daemons: dict[str, int], passes: int,
    memfs: Mount,
) -> list[dict[str, Any]]:  # fmt: skip
    """Timed passes over every target, interleaved; one row per target."""
    for names in files.values():
        read_all(names)  # settle in the new placement, untimed
    seconds: dict[str, list[float]] = {target: [] for target in files}
    requests_before = memfs.requests()
    cpu_before = {target: cpu_seconds(pid) for target, pid in daemons.items()}
    for n in range(passes):
        order = list(files)[n % len(files) :] + list(files)[: n % len(files)]
        for target in order:
            seconds[target].append(timed(partial(read_all, files[target])))
    cpu = {target: cpu_seconds(pid) - cpu_before[target] for target, pid in daemons.items()}
    requests = memfs.requests() - requests_before
    count = len(files[TARGETS[0]])
    local = statistics.median(seconds[TARGETS[0]])
    rows = []
    for target, times in seconds.items():
        median = statistics.median(times)
        daemon_cpu = cpu[target] / (passes * count) * 1e6 if target in cpu else None
        rows.append(
            {"placement": placement, "target": target, "files": count,
             "median_us_per_file": median / count * 1e6, "ratio": median / local,
             "daemon_cpu_us_per_file": daemon_cpu,
             "requests": requests if target == TARGETS[2] else None, "pass_seconds": times}
        )  # fmt: skip
    return rows


def run(
    args: argparse.Namespace, work: Path, tree: dict[str, str], local: Path
) -> list[dict[str, Any]]:
    key = "sk-memfs-bench-" + secrets.token_hex(12)
    floor_point, floor_log = work / "floorfs", work / "floorfs.log"
    floor_point.mkdir()
    with server(key, work) as url:
        config = ClientConfig(api_key=Secret(key), base_url=url)
        store_id = trio.run(seed, config, tree)
        set_latency(url, 0)
        env = dict(os.environ, ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY=key)
        env["XDG_RUNTIME_DIR"] = str(work / "runtime")  # the daemon's pid, status and log files
        env.pop("MEMFS_API_KEYS", None)
        memfs = Mount(store_id, work / "memfs", env, work / "cache")
        with open(floor_log, "wb") as log:
            floor = subprocess.Popen(
                [sys.executable, str(FLOORFS), str(local), str(floor_point)],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        try:
            wait_mounted(floor_point, floor, floor_log)
            memfs.mount()
            try:
                files = {
                    TARGETS[0]: files_of(local, tree),
                    TARGETS[1]: files_of(floor_point, tree),
                    TARGETS[2]: files_of(memfs.point, tree),
                }
                size = sum(len(content.encode()) for content in tree.values())
                for target, names in files.items():
                    for _ in range(2):  # the first read of memfs fetches from the server
                        if read_all(names) != size:
                            raise RuntimeError(f"{target} does not serve the tree")
                daemons = {TARGETS[1]: floor.pid, TARGETS[2]: memfs.status()["pid"]}
                rows = measure("unpinned", files, daemons, args.passes, memfs)
                allowed = os.sched_getaffinity(0)
                cpu = min(allowed)
                try:
                    for pid in (os.getpid(), *daemons.values()):
                        pin(pid, {cpu})
                    rows += measure(f"one CPU ({cpu})", files, daemons, args.passes, memfs)
                finally:
                    os.sched_setaffinity(0, allowed)
                return rows
            finally:
                stop_memfs(memfs)
        finally:
            stop_floorfs(floor_point, floor)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--dirs", type=int, default=40)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memfs-bench-floor-") as tmp:
        work = Path(tmp)
        tree = make_tree(args.memories, args.dirs, seed=1)
        local = write_tree(tree, work / "local")
        rows = run(args, work, tree, local)
    requests = sum(r["requests"] or 0 for r in rows)
    if requests:
        print(f"warning: memfs made {requests} requests in the timed passes", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    versions = f", pyfuse3 {pyfuse3.__version__}, trio {trio.__version__}"
    header = run_header(tree, args.dirs, versions)
    print(f"{header}; warm read of every file, median of {args.passes} passes\n")
    print("| placement | target | µs/file | ratio vs local | daemon CPU µs/file | requests |")
    print("|---|---|---:|---:|---:|---:|")
    for r in rows:
        cpu = r["daemon_cpu_us_per_file"]
        print(
            f"| {r['placement']} | {r['target']} | {r['median_us_per_file']:.1f} | "
            f"{r['ratio']:.1f} | {'' if cpu is None else f'{cpu:.0f}'} | "
            f"{'' if r['requests'] is None else r['requests']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
