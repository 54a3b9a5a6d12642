"""Benchmark warm reads on a local directory, on the floor of a Python FUSE daemon and on memfs.

A warm read on memfs (``open(name, 'rb').read()`` of a file already in the kernel's page cache,
``keep_cache``) costs three FUSE requests: OPEN, FLUSH and RELEASE. Most of the time goes to
the kernel's round trips and to pyfuse3 + trio answering each request, not to memfs's own
handlers. This case measures that claim. ``bench/floorfs.py`` is a minimal in-memory
pyfuse3 + trio filesystem whose handlers do next to nothing, with the same ``keep_cache`` and
60 s timeouts as memfs. It is the floor any pyfuse3 + trio daemon stands on. The gap from the
local directory to floorfs is what FUSE through pyfuse3 + trio costs. The gap from floorfs to
memfs is what memfs's own code adds.

It builds the tree of the mount case (``bench.mounted.make_tree``: ``--memories`` files of
0.2-20 kB in ``--dirs`` directories, seed 1) and writes it to a local directory. It mounts
floorfs on a copy of that directory (a subprocess) and memfs (``memfs mount``) on a store seeded
with the same tree on ``memfs server --faults none`` with no latency. Both mounts are warmed by
reading every file twice. Then, with the loop of the mount case (every file opened and read), it
does ``--passes`` passes; each pass times the local directory, floorfs and memfs one after the
other (the order rotates from pass to pass). It does this twice:

- unpinned: the scheduler places the reader and the daemons, as in the mount case;
- one CPU: this process and every thread of both daemons (``/proc/PID/task/*``) pinned to one
  CPU with ``sched_setaffinity``.

On a small VM the placement alone can move the unpinned number by 2x from run to run (a reader
and a daemon woken on different CPUs pay cross-CPU wakeups on every request). The pinned number
is the stable one to compare.

For each placement it reports the median time per file and its ratio to the local directory;
each daemon's CPU time per file (utime + stime from ``/proc/PID/stat`` over the timed passes;
memfs's includes its background tasks); and memfs's HTTP requests during the timed passes,
which must be 0 (the daemon's own count, change feed excluded, as the mount case counts).
Owns no product code.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import statistics
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pyfuse3
import trio

from bench import proc
from bench.fixtures import bench_key
from bench.harness import Case, Row, timed
from bench.mounted import (
    Mount,
    files_of,
    floorfs,
    make_tree,
    read_all,
    seed,
    server,
    set_latency,
    tree_note,
    write_tree,
)
from memfs.api.config import ClientConfig, Secret

log = logging.getLogger(__name__)
TARGETS = ("local directory", "floorfs (pyfuse3 + trio floor)", "memfs")


def pin(pid: int, cpus: set[int]) -> None:
    """Pin every thread of ``pid`` (threads started later inherit it from their creator)."""
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):  # a thread that just exited
            os.sched_setaffinity(int(task), cpus)


def measure(
    placement: str, files: dict[str, list[str]], daemons: dict[str, int], passes: int,
    memfs: Mount,
) -> list[Row]:  # fmt: skip
    """Timed passes over every target, interleaved; one row per target."""
    for names in files.values():
        read_all(names)  # settle in the new placement, untimed
    seconds: dict[str, list[float]] = {target: [] for target in files}
    requests_before = memfs.requests()
    cpu_before = {target: proc.cpu_seconds(pid) for target, pid in daemons.items()}
    for n in range(passes):
        order = list(files)[n % len(files) :] + list(files)[: n % len(files)]
        for target in order:
            seconds[target].append(timed(partial(read_all, files[target])))
    cpu = {target: proc.cpu_seconds(pid) - cpu_before[target] for target, pid in daemons.items()}
    requests = memfs.requests() - requests_before
    count = len(files[TARGETS[0]])
    local = statistics.median(seconds[TARGETS[0]])
    rows: list[Row] = []
    for target, times in seconds.items():
        median = statistics.median(times)
        daemon_cpu = cpu[target] / (passes * count) * 1e6 if target in cpu else None
        rows.append(
            {"placement": placement, "target": target, "files": count,
             "median_us_per_file": median / count * 1e6, "ratio": median / local,
             "daemon_cpu_us_per_file": daemon_cpu,
             "requests": requests if target == TARGETS[2] else None}
        )  # fmt: skip
    return rows


@dataclass
class Mounted:
    """The same tree on a local directory, on floorfs and on memfs, each read twice."""

    files: dict[str, list[str]]
    daemons: dict[str, int]  # target: its daemon's pid
    memfs: Mount


@contextmanager
def mounted_tree(options: argparse.Namespace) -> Iterator[Mounted]:
    key = bench_key()
    with (
        tempfile.TemporaryDirectory(prefix="memfs-bench-floor-") as tmp,
        ExitStack() as stack,
    ):
        work = Path(tmp)
        tree = make_tree(options.memories, options.dirs, seed=1)
        local = write_tree(tree, work / "local")
        url = stack.enter_context(server(key, work))
        config = ClientConfig(api_key=Secret(key), base_url=url)
        store_id = trio.run(seed, config, tree)
        set_latency(url, 0)
        env = dict(os.environ, ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY=key)
        env["XDG_RUNTIME_DIR"] = str(work / "runtime")  # the daemon's pid, status and log files
        env.pop("MEMFS_API_KEYS", None)
        memfs = Mount(store_id, work / "memfs", env, work / "cache")
        floor = stack.enter_context(floorfs(local, work / "floorfs"))
        memfs.mount()
        stack.callback(memfs.stop)
        files = {
            TARGETS[0]: files_of(local, tree),
            TARGETS[1]: files_of(work / "floorfs", tree),
            TARGETS[2]: files_of(memfs.point, tree),
        }
        size = sum(len(content.encode()) for content in tree.values())
        for target, names in files.items():
            for _ in range(2):  # the first read of memfs fetches from the server
                if read_all(names) != size:
                    raise RuntimeError(f"{target} does not serve the tree")
        yield Mounted(files, {TARGETS[1]: floor.pid, TARGETS[2]: memfs.status()["pid"]}, memfs)


class FloorCase(Case[Mounted]):
    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--memories", type=int, default=2000)
        parser.add_argument("--dirs", type=int, default=40)
        parser.add_argument("--passes", type=int, default=5)

    def note(self, options: argparse.Namespace) -> str:
        return (
            f"{tree_note(options.memories, options.dirs)}; pyfuse3 {pyfuse3.__version__}, trio "
            f"{trio.__version__}; warm read of every file, median of {options.passes} passes"
        )

    def setup(self, options: argparse.Namespace) -> contextlib.AbstractContextManager[Mounted]:
        return mounted_tree(options)

    def run(self, options: argparse.Namespace, fixture: Mounted) -> list[Row]:
        files, daemons, memfs = fixture.files, fixture.daemons, fixture.memfs
        rows = measure("unpinned", files, daemons, options.passes, memfs)
        allowed = os.sched_getaffinity(0)
        cpu = min(allowed)
        try:
            for pid in (os.getpid(), *daemons.values()):
                pin(pid, {cpu})
            rows += measure(f"one CPU ({cpu})", files, daemons, options.passes, memfs)
        finally:
            os.sched_setaffinity(0, allowed)
            for pid in daemons.values():  # the next round starts unpinned again
                pin(pid, allowed)
        if any(row["requests"] for row in rows):
            log.warning("memfs made requests in the timed passes")
        return rows


CASE = FloorCase()
