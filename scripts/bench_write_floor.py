#!/usr/bin/env python3
"""Write+close of new small files: memfs against local disk and against the floor of a Python
FUSE daemon, in alternating rounds of one run.

Issue 13 asks that writing and closing 200 new files cost at most 2x the same loop on local disk
with ``fdatasync`` per file (a memfs close is durable); issue 21 asks the same in a directory
that already holds 1,700 memories. This separates what memfs adds from what any pyfuse3 + trio
daemon costs: each round writes ``--files`` new files into a directory that holds
``--directory-memories`` files already (the tree of ``bench_mount.py``, in one directory; 0: a
fresh directory each round, as ``bench_mount.write_many``), in

- a local directory, plain and with ``fdatasync`` before each close;
- ``floorfs --writable`` (``scripts/floorfs.py``: create and write into memory, nothing else),
  and ``floorfs --writable --journal`` (each close also appends the content to a file and
  ``fdatasync``s it: the least a durable close can cost in such a daemon);
- a memfs mount of a fresh store on a local ``memfs server``.

Targets run in a new order each round; medians over ``--rounds``, with each daemon's CPU time per
file (utime + stime from ``/proc/PID/stat`` over its loop: steadier than wall time on a shared
machine, where a local ``fdatasync`` moves by 2x from minute to minute). The files a round wrote are
removed after it (memfs: until the store has the removals), so every round finds the directory
at its size. Owns no product code.
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
from bench_floor import FLOORFS, cpu_seconds, stop_floorfs, stop_memfs, wait_mounted
from bench_mount import Mount, make_tree, seed, server, timed, write_many, write_tree

from memfs.api.config import ClientConfig, Secret

LOCAL, LOCAL_SYNC = "local directory", "local directory, fdatasync per file"
FLOOR, FLOOR_JOURNAL = "floorfs (create + write in memory)", "floorfs + fdatasync'd journal"
MEMFS = "memfs"


def write_into(directory: Path, label: str, count: int, *, sync: bool) -> None:
    """``count`` new small files in ``directory``, each written and closed (``sync``:
    ``fdatasync`` before the close), as ``bench_mount.write_many`` does in a fresh directory."""
    for n in range(count):
        with open(directory / f"{label}-w{n:03}.md", "w") as handle:
            handle.write(f"small file {n}\n")
            if sync:
                handle.flush()
                os.fdatasync(handle.fileno())


def remove_written(directory: Path) -> None:
    """What the rounds wrote: every name ``write_into`` or ``write_many`` made."""
    for path in directory.iterdir():
        if path.name.startswith("r") and "-w" in path.name:
            path.unlink()
        elif path.name.startswith("written-"):
            shutil.rmtree(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument(
        "--directory-memories", type=int, default=1700,
        help="files the directory written into holds already (0: a fresh directory each round)",
    )  # fmt: skip
    args = parser.parse_args()
    size = args.directory_memories
    tree = make_tree(size, 1, seed=1)  # one directory: topic-00
    big = Path("topic-00") if size else Path()
    key = "sk-memfs-bench-" + secrets.token_hex(12)
    times: dict[str, list[float]] = {
        t: [] for t in (LOCAL, LOCAL_SYNC, FLOOR, FLOOR_JOURNAL, MEMFS)
    }
    cpu: dict[str, list[float]] = {t: [] for t in (FLOOR, FLOOR_JOURNAL, MEMFS)}
    with (
        tempfile.TemporaryDirectory(prefix="memfs-bench-write-") as tmp,
        server(key, Path(tmp)) as url,
    ):
        work = Path(tmp)
        store_id = trio.run(seed, ClientConfig(api_key=Secret(key), base_url=url), tree)
        env = dict(os.environ, ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY=key)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        write_tree(tree, work / "source")  # floorfs serves a copy of it
        write_tree(tree, work / "local")
        for directory in ("source", "local"):
            (work / directory).mkdir(exist_ok=True)
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
                        [*command, str(work / "source"), str(point)], stdout=out, stderr=out
                    )
                wait_mounted(point, proc, log)
                floors[name] = (point, proc)
            memfs.mount()
            pids = {name: proc.pid for name, (_, proc) in floors.items()}
            pids[MEMFS] = memfs.status()["pid"]
            roots = {
                LOCAL: work / "local" / big,
                LOCAL_SYNC: work / "local" / big,
                FLOOR: floors[FLOOR][0] / big,
                FLOOR_JOURNAL: floors[FLOOR_JOURNAL][0] / big,
                MEMFS: memfs.point / big,
            }
            write = write_into if size else write_many
            order = list(times)
            for n in range(args.rounds):
                order = order[1:] + order[:1]  # each target first in turn
                for name in order:
                    label = f"r{n}-{order.index(name)}-{len(name)}"
                    sync = name == LOCAL_SYNC
                    files = args.files
                    before = cpu_seconds(pids[name]) if name in pids else 0.0
                    times[name].append(
                        timed(lambda: write(roots[name], label, files, sync=sync))  # noqa: B023
                    )
                    if name in pids:
                        cpu[name].append(cpu_seconds(pids[name]) - before)
                memfs.settle()  # this round's uploads do not run into the next round
                remove_written(roots[MEMFS])  # a store holds at most 2,000 memories
                remove_written(roots[LOCAL])
                memfs.settle()
        finally:
            stop_memfs(memfs)
            for point, proc in floors.values():
                stop_floorfs(point, proc)
    medians = {name: statistics.median(values) for name, values in times.items()}
    load = os.getloadavg()[0]
    print(
        f"{time.strftime('%Y-%m-%d %H:%M')}, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {load:.1f}; {args.files} new files a round in a directory of {size} "
        f"files, median of {args.rounds} rounds\n"
    )
    print("| target | seconds | ms per file | vs local with fdatasync | daemon CPU ms per file |")
    print("|---|---:|---:|---:|---:|")
    for name, seconds in medians.items():
        ratio = seconds / medians[LOCAL_SYNC]
        used = f"{1000 * statistics.median(cpu[name]) / args.files:.2f}" if name in cpu else ""
        print(
            f"| {name} | {seconds:.3f} | {1000 * seconds / args.files:.2f} | {ratio:.2f} | {used} |"
        )
    print("\nEach round, ms per file:")
    for name, values in times.items():
        print(f"- {name}: " + ", ".join(f"{1000 * v / args.files:.2f}" for v in values))
    return 0


if __name__ == "__main__":
    sys.exit(main())
