#!/usr/bin/env python3
"""Write+close of new small files: memfs against local disk and against the floor of a Python
FUSE daemon, in alternating rounds of one run.

Issue 13 asks that writing and closing 200 new files cost at most 2x the same loop on local disk
with ``fdatasync`` per file (a memfs close is durable). This separates what memfs adds from what
any pyfuse3 + trio daemon costs: each round writes 200 files (``bench_mount.write_many``) into

- a local directory, plain and with ``fdatasync`` before each close;
- ``floorfs --writable`` (``scripts/floorfs.py``: create and write into memory, nothing else),
  and ``floorfs --writable --journal`` (each close also appends the content to a file and
  ``fdatasync``s it: the least a durable close can cost in such a daemon);
- a memfs mount of a fresh store on a local ``memfs server``.

Targets run in a new order each round; medians over ``--rounds``. Owns no product code.
"""

from __future__ import annotations

import argparse
import os
import platform
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_floor import FLOORFS, stop_floorfs, stop_memfs, wait_mounted
from bench_mount import Mount, seed, server, timed, write_many

from memfs.api.config import ClientConfig, Secret

LOCAL, LOCAL_SYNC = "local directory", "local directory, fdatasync per file"
FLOOR, FLOOR_JOURNAL = "floorfs (create + write in memory)", "floorfs + fdatasync'd journal"
MEMFS = "memfs"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--files", type=int, default=200)
    args = parser.parse_args()
    key = "sk-memfs-bench-" + secrets.token_hex(12)
    times: dict[str, list[float]] = {
        t: [] for t in (LOCAL, LOCAL_SYNC, FLOOR, FLOOR_JOURNAL, MEMFS)
    }
    with (
        tempfile.TemporaryDirectory(prefix="memfs-bench-write-") as tmp,
        server(key, Path(tmp)) as url,
    ):
        work = Path(tmp)
        store_id = trio.run(seed, ClientConfig(api_key=Secret(key), base_url=url), {})
        env = dict(os.environ, ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY=key)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        (work / "empty").mkdir()
        (work / "local").mkdir()
        floors: dict[str, tuple[Path, subprocess.Popen[bytes]]] = {}
        memfs = Mount(store_id, work / "memfs", env, work / "cache")
        try:
            for name, extra in ((FLOOR, []), (FLOOR_JOURNAL, ["--journal", str(work / "j")])):
                point = work / f"floor{len(floors)}"
                point.mkdir()
                log = work / f"floor{len(floors)}.log"
                command = [sys.executable, str(FLOORFS), "--writable", *extra]
                with open(log, "wb") as out:
                    proc = subprocess.Popen(
                        [*command, str(work / "empty"), str(point)], stdout=out, stderr=out
                    )
                wait_mounted(point, proc, log)
                floors[name] = (point, proc)
            memfs.mount()
            roots = {
                LOCAL: work / "local",
                LOCAL_SYNC: work / "local",
                FLOOR: floors[FLOOR][0],
                FLOOR_JOURNAL: floors[FLOOR_JOURNAL][0],
                MEMFS: memfs.point,
            }
            order = list(times)
            for n in range(args.rounds):
                order = order[1:] + order[:1]  # each target first in turn
                for name in order:
                    label = f"r{n}-{order.index(name)}-{len(name)}"
                    sync = name == LOCAL_SYNC
                    files = args.files
                    times[name].append(
                        timed(lambda: write_many(roots[name], label, files, sync=sync))  # noqa: B023
                    )
                memfs.settle()  # this round's uploads do not run into the next round
                for path in memfs.point.iterdir():  # a store holds at most 2,000 memories
                    shutil.rmtree(path)
                memfs.settle()
        finally:
            stop_memfs(memfs)
            for point, proc in floors.values():
                stop_floorfs(point, proc)
    medians = {name: statistics.median(values) for name, values in times.items()}
    load = os.getloadavg()[0]
    print(
        f"{time.strftime('%Y-%m-%d %H:%M')}, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {load:.1f}; {args.files} new files a round, median of {args.rounds} rounds\n"
    )
    print("| target | seconds | ms per file | vs local with fdatasync |")
    print("|---|---:|---:|---:|")
    for name, seconds in medians.items():
        ratio = seconds / medians[LOCAL_SYNC]
        print(f"| {name} | {seconds:.3f} | {1000 * seconds / args.files:.2f} | {ratio:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
