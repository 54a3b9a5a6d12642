"""Write+close of new small files: memfs against local disk and against the floor of a Python
FUSE daemon, in alternating rounds of one run.

Issue 13 asks that writing and closing 200 new files cost at most 2x the same loop on local disk
with ``fdatasync`` per file (a memfs close is durable); issue 21 asks the same in a directory
that already holds 1,700 memories. This separates what memfs adds from what any pyfuse3 + trio
daemon costs: each round writes ``--files`` new files into a directory that holds
``--directory-memories`` files already (the tree of the mount case, in one directory; 0: a
fresh directory each round, as ``bench.mounted.write_many``), in

- a local directory, plain and with ``fdatasync`` before each close;
- ``floorfs --writable`` (``bench/floorfs.py``: create and write into memory, nothing else),
  and ``floorfs --writable --journal`` (each close also appends the content to a file and
  ``fdatasync``s it: the least a durable close can cost in such a daemon);
- a memfs mount of a fresh store on a local ``memfs server``.

Targets run in a new order each round; medians over ``--rounds`` (3), with each daemon's CPU
time per file (utime + stime from ``/proc/PID/stat`` over its loop: steadier than wall time on a
shared machine, where a local ``fdatasync`` moves by 2x from minute to minute). The files a
round wrote are removed after it (memfs: until the store has the removals), so every round finds
the directory at its size. Owns no product code.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import trio

from bench import proc
from bench.fixtures import bench_key
from bench.harness import Case, Row, timed
from bench.mounted import (
    Mount,
    floorfs,
    make_tree,
    seed,
    server,
    write_many,
    write_small_files,
    write_tree,
)
from memfs.api.config import ClientConfig, Secret

LOCAL, LOCAL_SYNC = "local directory", "local directory, fdatasync per file"
FLOOR, FLOOR_JOURNAL = "floorfs (create + write in memory)", "floorfs + fdatasync'd journal"
MEMFS = "memfs"


def write_into(directory: Path, label: str, count: int, *, sync: bool) -> None:
    """``count`` new small files in ``directory``, each written and closed (``sync``:
    ``fdatasync`` before the close), as ``bench.mounted.write_many`` does in a fresh directory."""
    write_small_files(directory, f"{label}-", count, sync=sync)


def remove_written(directory: Path) -> None:
    """What the rounds wrote: every name ``write_into`` or ``write_many`` made."""
    for path in directory.iterdir():
        if path.name.startswith("r") and "-w" in path.name:
            path.unlink()
        elif path.name.startswith("written-"):
            shutil.rmtree(path)


TARGETS = (LOCAL, LOCAL_SYNC, FLOOR, FLOOR_JOURNAL, MEMFS)


@dataclass
class Targets:
    """Where each target writes, and the pid of its daemon (none for the local directory)."""

    roots: dict[str, Path]
    pids: dict[str, int]
    memfs: Mount
    rounds: Iterator[int] = field(default_factory=itertools.count)


@contextmanager
def targets(options: argparse.Namespace) -> Iterator[Targets]:
    size = options.directory_memories
    tree = make_tree(size, 1, seed=1)  # one directory: topic-00
    big = Path("topic-00") if size else Path()
    key = bench_key()
    with (
        tempfile.TemporaryDirectory(prefix="memfs-bench-write-") as tmp,
        server(key, Path(tmp)) as url,
        ExitStack() as stack,
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
        floors = {
            FLOOR: stack.enter_context(floorfs(work / "source", work / "floor0", "--writable")),
            FLOOR_JOURNAL: stack.enter_context(
                floorfs(
                    work / "source", work / "floor1", "--writable", "--journal", str(work / "j")
                )
            ),
        }
        memfs = Mount(store_id, work / "memfs", env, work / "cache")
        memfs.mount()
        stack.callback(memfs.stop)
        pids = {name: floor.pid for name, floor in floors.items()}
        pids[MEMFS] = memfs.status()["pid"]
        roots = {
            LOCAL: work / "local" / big,
            LOCAL_SYNC: work / "local" / big,
            FLOOR: work / "floor0" / big,
            FLOOR_JOURNAL: work / "floor1" / big,
            MEMFS: memfs.point / big,
        }
        yield Targets(roots, pids, memfs)


class WriteFloorCase(Case[Targets]):
    rounds = 3

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--files", type=int, default=200)
        parser.add_argument(
            "--directory-memories", type=int, default=1700,
            help="files the directory written into holds already (0: a fresh directory each round)",
        )  # fmt: skip

    def note(self, options: argparse.Namespace) -> str:
        return (
            f"{options.files} new files a round in a directory of {options.directory_memories} "
            "files; ratio: against the local directory with fdatasync"
        )

    def setup(self, options: argparse.Namespace) -> AbstractContextManager[Targets]:
        return targets(options)

    def run(self, options: argparse.Namespace, fixture: Targets) -> list[Row]:
        roots, pids, memfs = fixture.roots, fixture.pids, fixture.memfs
        n = next(fixture.rounds)
        write = write_into if options.directory_memories else write_many
        files = options.files
        turn = (n + 1) % len(TARGETS)
        order = [*TARGETS[turn:], *TARGETS[:turn]]  # each target first in turn
        seconds: dict[str, float] = {}
        cpu: dict[str, float] = {}
        for name in order:
            label = f"r{n}-{order.index(name)}-{len(name)}"
            sync = name == LOCAL_SYNC
            before = proc.cpu_seconds(pids[name]) if name in pids else 0.0
            seconds[name] = timed(lambda: write(roots[name], label, files, sync=sync))  # noqa: B023
            if name in pids:
                cpu[name] = proc.cpu_seconds(pids[name]) - before
        memfs.settle()  # this round's uploads do not run into the next round
        remove_written(roots[MEMFS])  # a store holds at most 2,000 memories
        remove_written(roots[LOCAL])
        memfs.settle()
        return [
            {"target": name, "seconds": seconds[name], "ms_per_file": 1000 * seconds[name] / files,
             "ratio": None,
             "daemon_cpu_ms_per_file": 1000 * cpu[name] / files if name in cpu else None}
            for name in TARGETS
        ]  # fmt: skip

    def finish(self, options: argparse.Namespace, rows: list[Row]) -> list[Row]:
        local_sync = next(float(r["seconds"] or 0) for r in rows if r["target"] == LOCAL_SYNC)
        return [{**row, "ratio": float(row["seconds"] or 0) / local_sync} for row in rows]


CASE = WriteFloorCase()
