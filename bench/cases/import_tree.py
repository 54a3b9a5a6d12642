"""Benchmark ``memfs import``: a tree of ``--files`` files (2,000) into an empty store, against
the create requests it needs issued directly through the client with the same concurrency.

Starts ``memfs server`` on a throwaway SQLite database and writes the tree (``--size`` bytes a
file, in directories of 100). Then, each round (``--rounds``, 5), alternating so that the load
of the machine falls on both alike:

- baseline: into a new store, one ``MemoryStoresAPI.create`` per file, 8 in flight
  (``memfs.transfer.import_tree.CONCURRENCY``), the contents already in memory;
- import: into another new store, what ``memfs import`` runs (``plan_import``: the tree walked
  and hashed, the store listed; then ``carry_out``: each file read again and created, 8 in
  flight), timed from the open store to the last create;
- again: the same import a second time (nothing to write: the listing only).

Odd rounds run the import first. The ratio is the median of each round's import / baseline
(wall and CPU).

Requests are counted by the client's ``stats`` (deterministic), CPU seconds of this process and
the server's (``/proc``: what a run costs on a machine whose other load stretches wall times).
This case owns no product code.
"""

from __future__ import annotations

import argparse
import itertools
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import trio

from bench import proc
from bench.fixtures import bench_key, server_on
from bench.harness import Case, Row
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
    return time.process_time() + proc.cpu_seconds(server_pid)


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


async def one_round(
    base_url: str, server_pid: int, key: str, root: Path, contents: dict[str, str], round_: int
) -> tuple[dict[str, float], dict[str, float], dict[str, int]]:
    """Seconds, CPU seconds and requests of the baseline, the import and the import again."""
    config = ClientConfig(api_key=Secret(key), base_url=base_url)
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    times: dict[str, float] = {}
    cpu: dict[str, float] = {}
    requests: dict[str, int] = {}
    try:
        async with StoreClient(config) as client:
            capabilities = await memory_stores_capabilities(client)
            # alternated: odd rounds import first, so that neither always meets the database
            # (or the machine) the other left behind
            order = ("baseline", "import") if round_ % 2 == 0 else ("import", "baseline")
            for name in order:
                if name == "baseline":
                    before, cpu_before = requests_of(client), cpu_seconds(server_pid)
                    times[name] = await baseline(client, contents, f"base-{round_}")
                    cpu[name] = cpu_seconds(server_pid) - cpu_before
                    requests[name] = requests_of(client) - before - 1  # less the store's create
                    continue
                store_id = (await client.create_store(f"import-{round_}")).id
                store = MemoryStoresAPI(client, store_id, capabilities)
                for run in ("import", "again"):
                    before, cpu_before = requests_of(client), cpu_seconds(server_pid)
                    times[run] = await run_import(client, store, root_fd)
                    cpu[run] = cpu_seconds(server_pid) - cpu_before
                    requests[run] = requests_of(client) - before
    finally:
        os.close(root_fd)
    return times, cpu, requests


@dataclass
class Served:
    base_url: str
    server_pid: int
    key: str
    root: Path
    contents: dict[str, str]
    rounds: Iterator[int] = field(default_factory=itertools.count)


class ImportCase(Case[Served]):
    rounds = 5

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--files", type=int, default=2000)
        parser.add_argument("--size", type=int, default=512, help="bytes a file")

    def note(self, options: argparse.Namespace) -> str:
        return (
            f"{options.files} files of {options.size} bytes, {CONCURRENCY} in flight; CPU: "
            "client + server; goal: import / baseline <= 1.2x"
        )

    @contextmanager
    def setup(self, options: argparse.Namespace) -> Iterator[Served]:
        key = bench_key()
        with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
            root = Path(tmp) / "tree"
            contents = write_tree(root, options.files, options.size)
            with server_on(Path(tmp) / "bench.db", key) as server:
                assert server.proc is not None
                yield Served(server.base_url, server.proc.pid, key, root, contents)

    def run(self, options: argparse.Namespace, fixture: Served) -> list[Row]:
        f = fixture
        times, cpu, requests = trio.run(
            one_round, f.base_url, f.server_pid, f.key, f.root, f.contents, next(f.rounds)
        )
        labels = {
            "baseline": f"{options.files} creates through the client, {CONCURRENCY} in flight",
            "import": "memfs import into an empty store (plan + creates)",
            "again": "memfs import again (nothing to write)",
        }
        rows: list[Row] = [
            {"run": label, "seconds": times[name], "cpu_s": cpu[name], "requests": requests[name]}
            for name, label in labels.items()
        ]
        rows.append({"import / baseline": "ratio", "wall": times["import"] / times["baseline"],
                     "cpu": cpu["import"] / cpu["baseline"]})  # fmt: skip
        return rows


CASE = ImportCase()
