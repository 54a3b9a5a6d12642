#!/usr/bin/env python3
"""Benchmark ``memfs import``: a tree of ``--files`` files (2,000) into an empty store, against
the create requests it needs issued directly through the client with the same concurrency.

Starts ``memfs server`` on a throwaway SQLite database and writes the tree (``--size`` bytes a
file, in directories of 100). Then, ``--rounds`` times, alternating so that the load of the
machine falls on both alike:

- baseline: into a new store, one ``MemoryStoresAPI.create`` per file, 8 in flight
  (``memfs.transfer.import_tree.CONCURRENCY``), the contents already in memory;
- import: into another new store, what ``memfs import`` runs (``plan_import``: the tree walked
  and hashed, the store listed; then ``carry_out``: each file read again and created, 8 in
  flight), timed from the open store to the last create;
- again: the same import a second time (nothing to write: the listing only).

Odd rounds run the import first. The ratio is the median of each round's import / baseline.

Requests are counted by the client's ``stats`` (deterministic), CPU seconds of this process and
the server's (``/proc``: what a run costs on a machine whose other load stretches wall times).
Prints a markdown table (median
seconds of each, the ratio import / baseline, the requests) or JSON with ``--json``, with the
load average before and after. This script owns no product code.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_server import server_on

from memfs.api import StoreClient
from memfs.api.config import ClientConfig, Secret
from memfs.api.store import MemoryStoresAPI, memory_stores_capabilities
from memfs.transfer.import_tree import CONCURRENCY, Results, carry_out, plan_import


def write_tree(root: Path, files: int, size: int) -> dict[str, str]:
    """``files`` files of ``size`` bytes, 100 a directory; returns path -> content."""
    contents = {}
    for number in range(files):
        relative = f"dir-{number // 100:03d}/note-{number:05d}.md"
        text = (f"note {number}\n" + "lorem ipsum dolor sit amet. " * (size // 28 + 1))[:size]
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        contents["/" + relative] = text
    return contents


def cpu_seconds(server_pid: int) -> float:
    """CPU time of this process and of the server so far: what a run costs whatever the load
    of the machine (its wall time on 2 busy cores is mostly waiting for them)."""
    with open(f"/proc/{server_pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    server = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return time.process_time() + server


def requests_of(client: StoreClient) -> int:
    return int(client.stats.total)


async def baseline(client: StoreClient, contents: dict[str, str], name: str) -> float:
    store = MemoryStoresAPI(client, (await client.create_store(name)).id)
    items = iter(sorted(contents.items()))
    started = time.perf_counter()

    async def worker() -> None:
        for path, text in items:
            await store.create(path, text)

    async with trio.open_nursery() as nursery:
        for _ in range(CONCURRENCY):
            nursery.start_soon(worker)
    return time.perf_counter() - started


async def run_import(client: StoreClient, store: MemoryStoresAPI, root_fd: int) -> float:
    started = time.perf_counter()
    plan = await plan_import(store, root_fd)
    results = Results()
    await carry_out(store, plan, root_fd, results)
    seconds = time.perf_counter() - started
    failed = [o for o in results.outcomes if not o.done]
    assert not failed and plan.count("refuse") == 0, (failed[:3], plan.count("refuse"))
    return seconds


async def bench(
    base_url: str, server_pid: int, key: str, root: Path, contents: dict[str, str], rounds: int
) -> Any:
    config = ClientConfig(api_key=Secret(key), base_url=base_url)
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    times: dict[str, list[float]] = {"baseline": [], "import": [], "again": []}
    cpu: dict[str, list[float]] = {"baseline": [], "import": [], "again": []}
    requests: dict[str, int] = {}
    try:
        async with StoreClient(config) as client:
            capabilities = await memory_stores_capabilities(client)
            for round_ in range(rounds):
                # alternated: odd rounds import first, so that neither always meets the database
                # (or the machine) the other left behind
                order = ("baseline", "import") if round_ % 2 == 0 else ("import", "baseline")
                for name in order:
                    if name == "baseline":
                        before, cpu_before = requests_of(client), cpu_seconds(server_pid)
                        times[name].append(await baseline(client, contents, f"base-{round_}"))
                        cpu[name].append(cpu_seconds(server_pid) - cpu_before)
                        requests[name] = requests_of(client) - before - 1  # less the store's create
                        continue
                    store_id = (await client.create_store(f"import-{round_}")).id
                    store = MemoryStoresAPI(client, store_id, capabilities)
                    for run in ("import", "again"):
                        before, cpu_before = requests_of(client), cpu_seconds(server_pid)
                        times[run].append(await run_import(client, store, root_fd))
                        cpu[run].append(cpu_seconds(server_pid) - cpu_before)
                        requests[run] = requests_of(client) - before
    finally:
        os.close(root_fd)
    return times, cpu, requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--size", type=int, default=512, help="bytes a file")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    key = "sk-bench-import-" + secrets.token_hex(12)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        root = Path(tmp) / "tree"
        contents = write_tree(root, args.files, args.size)
        pids: list[int] = []
        with server_on(Path(tmp) / "bench.db", key, pids=pids) as base_url:
            times, cpu, requests = trio.run(
                bench, base_url, pids[0], key, root, contents, args.rounds
            )
    medians = {name: statistics.median(values) for name, values in times.items()}
    ratios = [i / b for i, b in zip(times["import"], times["baseline"], strict=True)]
    cpu_medians = {name: statistics.median(values) for name, values in cpu.items()}
    cpu_ratio = cpu_medians["import"] / cpu_medians["baseline"]
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}",
        "python": platform.python_version(),
        "files": args.files,
        "size": args.size,
        "rounds": args.rounds,
        "concurrency": CONCURRENCY,
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }
    ratio = statistics.median(ratios)
    if args.json:
        print(
            json.dumps(
                {
                    "meta": meta,
                    "seconds": times,
                    "cpu_seconds": cpu,
                    "requests": requests,
                    "ratio": ratio,
                    "cpu_ratio": cpu_ratio,
                }
            )
        )
        return
    print(f"{meta}\n")
    print("| run | median s | all rounds s | CPU s (client + server), median | requests |")
    print("|---|---:|---|---:|---:|")
    for name, label in (
        ("baseline", f"{args.files} creates through the client, {CONCURRENCY} in flight"),
        ("import", "memfs import into an empty store (plan + creates)"),
        ("again", "memfs import again (nothing to write)"),
    ):
        rounds = ", ".join(f"{t:.2f}" for t in times[name])
        print(
            f"| {label} | {medians[name]:.2f} | {rounds} | {cpu_medians[name]:.2f} "
            f"| {requests[name]} |"
        )
    shown = ", ".join(f"{r:.2f}" for r in ratios)
    print(f"\nimport / baseline, median of the rounds: {ratio:.2f}x ({shown}; goal <= 1.2x)")
    print(f"CPU (client + server), import / baseline: {cpu_ratio:.2f}x")


if __name__ == "__main__":
    main()
