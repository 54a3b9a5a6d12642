#!/usr/bin/env python3
"""Benchmark everyday work in one big directory: a mount against a local directory, same run.

Agents often keep every note in one directory. This seeds one store with ``--memories``
memories in ``/notes`` (1,500 by default; a store holds at most 2,000) and the same files in a
local directory, mounts the store, lists ``/notes`` once, then times on both sides:

- creating ``--ops`` new files there (create, write, close), until the store has them;
- ``stat`` of ``--ops`` names that do not exist (what editors and shells probe);
- renaming ``--ops`` files, then removing ``--ops`` files.

Requests are the daemon's own count (``memfs status --json``), change-feed traffic excluded:
each write should cost its one request, never a new listing of the directory (15 requests for
1,500 memories). Prints a markdown table (or JSON with ``--json``). Owns no product code.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_mount import Mount, seed, server, write_tree

from memfs.api.config import ClientConfig, Secret


def workload(ops: int) -> list[tuple[str, Callable[[Path], None]]]:
    """The steps, each run on the local directory and on the mount (``notes`` = the directory)."""

    def create(notes: Path) -> None:
        for n in range(ops):
            (notes / f"new-{n:04}.md").write_text(f"a new note {n}\n")

    def probe(notes: Path) -> None:
        for n in range(ops):
            with contextlib.suppress(FileNotFoundError):
                os.stat(notes / f"missing-{n:04}.md")

    def rename(notes: Path) -> None:
        for n in range(ops):
            os.rename(notes / f"note-{n:05}.md", notes / f"renamed-{n:05}.md")

    def remove(notes: Path) -> None:
        for n in range(ops, 2 * ops):
            os.unlink(notes / f"note-{n:05}.md")

    return [
        (f"create {ops} files", create),
        (f"stat {ops} missing names", probe),
        (f"rename {ops} files", rename),
        (f"remove {ops} files", remove),
    ]


def run(memories: int, ops: int, work: Path) -> list[dict[str, Any]]:
    key = "sk-memfs-bench-" + secrets.token_hex(12)
    tree = {f"/notes/note-{n:05}.md": f"note {n}\n" + "x" * 200 for n in range(memories)}
    local = write_tree(tree, work / "local") / "notes"
    rows: list[dict[str, Any]] = []
    with server(key, work) as url:
        config = ClientConfig(api_key=Secret(key), base_url=url)
        store_id = trio.run(seed, config, tree)
        env = dict(os.environ, ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY=key)
        env.pop("MEMFS_API_KEYS", None)
        mount = Mount(store_id, work / "mnt", env, work / "cache")
        mount.mount()
        try:
            notes = mount.point / "notes"
            os.listdir(notes)
            before = mount.requests()
            for label, step in workload(ops):
                started = time.perf_counter()
                step(local)
                local_seconds = time.perf_counter() - started
                started = time.perf_counter()
                step(notes)
                seconds = time.perf_counter() - started
                mount.settle()
                settled = time.perf_counter() - started
                after = mount.requests()
                rows.append(
                    {
                        "benchmark": label,
                        "ms_per_op": seconds / ops * 1000,
                        "local_ms_per_op": local_seconds / ops * 1000,
                        "ratio": seconds / local_seconds,
                        "settled_seconds": settled,
                        "requests": after - before,
                    }
                )
                before = after
        finally:
            mount.umount()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=1500)
    parser.add_argument("--ops", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memfs-bench-bigdir-") as tmp:
        rows = run(args.memories, args.ops, Path(tmp))
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{args.memories} memories in one directory, {os.cpu_count()} CPUs\n")
    print("| benchmark | mount ms/op | local ms/op | ratio | until uploaded (s) | requests |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['benchmark']} | {r['ms_per_op']:.3f} | {r['local_ms_per_op']:.3f} | "
            f"{r['ratio']:.0f} | {r['settled_seconds']:.2f} | {r['requests']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
