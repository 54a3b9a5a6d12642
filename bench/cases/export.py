"""Benchmark ``memfs export --git``: its time against the time of listing the same versions
through the API (the goal: at most 2x), and the requests of an export with nothing new (the
goal: one listing).

Seeds a throwaway SQLite database through the server's storage layer (before the server starts:
no HTTP spent on it): ``--memories`` memories (2,000) with ``--versions`` versions in all
(10,000: one create each, then modifications spread over the memories, every 50th a rename).
Then starts ``memfs server`` on it and, each round:

- listing: every version with its content, as the export asks for them (``view=full``, pages of
  20, newest first), through one ``StoreClient``: the baseline;
- export: ``memfs.transfer.export_history.export_history`` into a new directory (the code the
  command runs, in this process: no interpreter start-up in either measure), through its own
  client;

and the time to create as many files as the store has memories (with plain ``open``: the
machine's floor for the working tree); then an export into the last directory with nothing new
(requests counted by the client), and, for scale, ``memfs export`` without ``--git`` (the
current memories as files); then the ratios export / listing, wall and CPU. Owns no product
code.
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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import trio

from bench import proc
from bench.fixtures import bench_key, server_on
from bench.harness import Case, Row
from bench.history import ACTOR, content_of, create_memories
from memfs.api import StoreClient
from memfs.api.config import ClientConfig, Secret
from memfs.api.store import MemoryStoresAPI
from memfs.server.backends.sqlite import SqliteStorage
from memfs.transfer.export import export_memories
from memfs.transfer.export_history import export_history, store_info


async def seed(db: Path, memories: int, versions: int) -> str:
    """The store and its history on ``db``; its id."""
    start = datetime.now(UTC) - timedelta(days=1)
    ticks = 0

    def clock() -> datetime:
        nonlocal ticks
        ticks += 1
        return start + timedelta(milliseconds=3 * ticks)

    storage = await SqliteStorage.open(db, clock=clock)
    try:
        store = await storage.create_store(name="bench-export", description="", metadata={})
        ids = [memory.id for memory in await create_memories(storage, store.id, memories)]
        for n in range(versions - memories):
            i = n % memories
            path = f"/moved/dir{i % 20:02d}/note{i:05d}-{n}.md" if n % 50 == 0 else None
            await storage.update_memory(
                store.id, ids[i], content=content_of(i, n + 1), path=path,
                expected_sha256=None, actor=ACTOR,
            )  # fmt: skip
        return store.id
    finally:
        await storage.aclose()


async def list_versions(config: ClientConfig, store_id: str) -> tuple[float, int, int]:
    """(seconds, requests, versions) of listing every version with its content."""
    async with StoreClient(config) as client:
        started = time.perf_counter()
        count, cursor = 0, None
        while True:
            page = await client.list_versions_page(store_id, limit=20, view="full", page=cursor)
            count += len(page.data)
            if page.next_page is None:
                break
            cursor = page.next_page
        return time.perf_counter() - started, client.stats.total, count


async def export(config: ClientConfig, store_id: str, root: Path) -> tuple[float, int, int]:
    """(seconds, requests, commits) of ``export_history`` into ``root``."""
    async with StoreClient(config) as client:
        store = await client.get_store(store_id)
        before = client.stats.total
        started = time.perf_counter()
        report = await export_history(client, store, root)
        return time.perf_counter() - started, client.stats.total - before, report.commits


async def export_files(config: ClientConfig, store_id: str, root: Path) -> tuple[float, int]:
    async with StoreClient(config) as client:
        store = await client.get_store(store_id)
        before = client.stats.total
        started = time.perf_counter()
        await export_memories(MemoryStoresAPI(client, store.id), store_info(store), root)
        return time.perf_counter() - started, client.stats.total - before


def create_files(root: Path, count: int) -> float:
    """Seconds to create ``count`` small files in 20 directories: this machine's floor for the
    working tree an export writes. On ext4 without a journal (this VM's root) it varies
    twentyfold: allocating an inode skips every inode of the group freed in the last 1-5
    minutes, one by one, so it grows with what was deleted just before (a test run, the last
    benchmark's directory); 0.06 s after 5 quiet minutes."""
    started = time.perf_counter()
    for i in range(count):
        directory = root / f"dir{i % 20:02d}"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"note{i:05d}.md").write_bytes(content_of(i, 0).encode())
    return time.perf_counter() - started


def cpu_seconds(server_pid: int) -> float:
    """CPU seconds so far of this process, its waited-for children (git) and the server."""
    mine = os.times()
    server = proc.cpu_seconds(server_pid)
    return mine.user + mine.system + mine.children_user + mine.children_system + server


def timed(server_pid: int, work: Any, *args: Any) -> tuple[Any, float]:
    """``trio.run(work, *args)`` and the CPU seconds it cost (client, git and server)."""
    before = cpu_seconds(server_pid)
    result = trio.run(work, *args)
    return result, cpu_seconds(server_pid) - before


def row(what: str, seconds: float, requests: int, items: int, cpu: float = 0.0) -> Row:
    return {"what": what, "seconds": seconds, "cpu_s": cpu, "requests": requests, "items": items}


@dataclass
class Seeded:
    """The server on the seeded database; a fresh directory for each round's exports."""

    tmp: Path
    config: ClientConfig
    server_pid: int
    store_id: str
    rounds: Iterator[int] = field(default_factory=itertools.count)


class ExportCase(Case[Seeded]):
    rounds = 2

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--memories", type=int, default=2000)
        parser.add_argument("--versions", type=int, default=10000)

    def note(self, options: argparse.Namespace) -> str:
        return (
            f"memfs export --git: {options.memories} memories, {options.versions} versions; "
            "CPU: client, git and server"
        )

    @contextmanager
    def setup(self, options: argparse.Namespace) -> Iterator[Seeded]:
        key = bench_key()
        with tempfile.TemporaryDirectory(prefix="bench-export-") as tmp:
            db = Path(tmp) / "memfs.db"
            store_id = trio.run(seed, db, options.memories, options.versions)
            with server_on(db, key) as server:
                assert server.proc is not None
                config = ClientConfig(api_key=Secret(key), base_url=server.base_url)
                yield Seeded(Path(tmp), config, server.proc.pid, store_id)

    def run(self, options: argparse.Namespace, fixture: Seeded) -> list[Row]:
        server, config, store_id = fixture.server_pid, fixture.config, fixture.store_id
        round_ = next(fixture.rounds)
        rows: list[Row] = []
        (seconds, requests, count), cpu = timed(server, list_versions, config, store_id)
        rows.append(row("list versions (full)", seconds, requests, count, cpu))
        listing, cpu_listing = seconds, cpu
        root = fixture.tmp / f"export-{round_}"
        (seconds, requests, commits), cpu = timed(server, export, config, store_id, root)
        rows.append(row("export --git", seconds, requests, commits, cpu))
        ratios: Row = {"export / listing": "ratio", "wall": seconds / listing,
                       "cpu": cpu / cpu_listing}  # fmt: skip
        seconds = create_files(fixture.tmp / f"floor-{round_}", options.memories)
        rows.append(row("create the files alone", seconds, 0, options.memories))
        (seconds, requests, commits), cpu = timed(server, export, config, store_id, root)
        rows.append(row("export --git, nothing new", seconds, requests, commits, cpu))
        files = fixture.tmp / f"files-{round_}"
        (seconds, requests), cpu = timed(server, export_files, config, store_id, files)
        rows.append(row("export (files)", seconds, requests, options.memories, cpu))
        return [*rows, ratios]


CASE = ExportCase()
