"""Benchmark the ``.versions`` tree: requests and time to open ``.versions/<t>/`` and read a file.

Seeds a throwaway SQLite database directly through the server's storage layer
(``memfs.server.backends.sqlite.SqliteStorage``, before the server starts, so no HTTP is spent
on it):
``--memories`` memories (2,000) with ``--versions`` versions each (10: one create, then
modifications, interleaved across memories, with a clock that advances ``--step`` seconds per
write so the history spans days). Then starts ``memfs server`` on that file and drives the
filesystem core of the tree (``memfs.versions.tree.VersionsTree``, the code a mount runs, without
FUSE) through one ``StoreClient``, counting requests with its ``stats``:

- cold: a fresh tree; look up ``.versions/<t>/`` (t in the middle of the history), list it,
  walk to one file and read it (the version index is loaded here);
- another instant: list ``.versions/<t2>/`` and read a file of another memory;
- the same file again; the timeline (``ls .versions``); one path's history (ls + cat).

This case owns no product code.
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import trio

from bench.fixtures import bench_key, server_on
from bench.harness import Case, Row
from bench.history import ACTOR, content_of, create_memories
from memfs.api import StoreClient
from memfs.api.config import ClientConfig, Secret
from memfs.api.store import MemoryStoresAPI
from memfs.core.model.inodes import ROOT_INODE
from memfs.server.backends.sqlite import SqliteStorage
from memfs.versions.names import stamp
from memfs.versions.tree import VersionsTree

log = logging.getLogger(__name__)


@dataclass
class Step:
    step: str
    requests: int
    seconds: float
    detail: str


async def seed(
    db: Path, memories: int, versions: int, step: float
) -> tuple[str, datetime, datetime]:
    """Create the store and its history on ``db``; return the store id, first and last write."""
    start = datetime.now(UTC) - timedelta(seconds=step * memories * versions + 3600)
    ticks = 0

    def clock() -> datetime:
        nonlocal ticks
        ticks += 1
        return start + timedelta(seconds=step * ticks)

    storage = await SqliteStorage.open(db, clock=clock)
    try:
        store = await storage.create_store(name="bench-versions", description="", metadata={})
        oldest = newest = clock()
        made = await create_memories(storage, store.id, memories)
        ids = [memory.id for memory in made]
        oldest = min(oldest, *(memory.created_at for memory in made))
        for version in range(1, versions):
            for i, memory_id in enumerate(ids):
                updated = await storage.update_memory(
                    store.id, memory_id, content=content_of(i, version), path=None,
                    expected_sha256=None, actor=ACTOR,
                )  # fmt: skip
                newest = updated.updated_at
        return store.id, oldest, newest
    finally:
        await storage.aclose()


async def measure(
    client: StoreClient, name: str, work: Callable[[], Awaitable[str]], steps: list[Step]
) -> None:
    before = client.stats.total
    started = time.perf_counter()
    detail = await work()
    steps.append(Step(name, client.stats.total - before, time.perf_counter() - started, detail))


async def walk(
    base_url: str, key: str, store_id: str, oldest: datetime, newest: datetime
) -> list[Step]:
    steps: list[Step] = []
    config = ClientConfig(api_key=Secret(key), base_url=base_url)
    async with StoreClient(config) as client:
        tree = VersionsTree(MemoryStoresAPI(client, store_id))

        async def ino(*names: str) -> int:
            node = ROOT_INODE
            for name in (".versions", *names):
                node = (await tree.lookup(node, name)).ino
            return node

        async def cat(*names: str) -> bytes:
            fh, _ = await tree.open(await ino(*names), os.O_RDONLY)
            try:
                return await tree.read(fh, 0, 1 << 20)
            finally:
                await tree.release(fh)

        t1 = stamp(oldest + (newest - oldest) / 2)
        t2 = (oldest + (newest - oldest) / 4).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

        async def cold() -> str:
            names = [n for n, _ in await tree.readdir(await ino(t1))]
            files = [n for n, _ in await tree.readdir(await ino(t1, names[0]))]
            size = len(await cat(t1, names[0], files[0]))
            return f"{len(names)} dirs; {files[0]}: {size} bytes; index {len(tree.index.versions)}"

        async def other() -> str:
            names = [n for n, _ in await tree.readdir(await ino(t2))]
            files = [n for n, _ in await tree.readdir(await ino(t2, names[1]))]
            return f"{files[1]}: {len(await cat(t2, names[1], files[1]))} bytes"

        async def again() -> str:
            names = [n for n, _ in await tree.readdir(await ino(t2))]
            files = [n for n, _ in await tree.readdir(await ino(t2, names[1]))]
            return f"{files[1]}: {len(await cat(t2, names[1], files[1]))} bytes"

        async def timeline() -> str:
            return f"{len(await tree.readdir(await ino()))} entries"

        async def history() -> str:
            names = [
                n for n, _ in await tree.readdir(await ino("history", "dir03", "note00003.md"))
            ]
            text = await cat("history", "dir03", "note00003.md", names[4])
            return f"{len(names)} entries; {len(text)} bytes read"

        await measure(client, f"cold: ls .versions/{t1}/ + cat one file", cold, steps)
        await measure(client, f"ls .versions/{t2}/ + cat a file of another memory", other, steps)
        await measure(client, "the same again (within 2 s)", again, steps)
        await trio.sleep(1.1)  # let the "anything new?" interval pass: the timeline asks once
        await measure(client, "ls .versions (timeline)", timeline, steps)
        await measure(client, "ls + cat .versions/history/<path>/", history, steps)
    return steps


@dataclass
class Seeded:
    """The server on the seeded database, and the history's span."""

    base_url: str
    key: str
    store_id: str
    oldest: datetime
    newest: datetime


class VersionsCase(Case[Seeded]):
    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--memories", type=int, default=2000, help="memories (default 2000)")
        parser.add_argument("--versions", type=int, default=10, help="versions each (default 10)")
        parser.add_argument("--step", type=float, default=30.0, help="seconds between writes")

    def check(self, parser: argparse.ArgumentParser, options: argparse.Namespace) -> None:
        if options.memories < 4 or options.versions < 5:
            parser.error("at least 4 memories and 5 versions")

    @contextmanager
    def setup(self, options: argparse.Namespace) -> Iterator[Seeded]:
        key = bench_key()
        with tempfile.TemporaryDirectory(prefix="memfs-bench-versions-") as tmp:
            db = Path(tmp) / "versions.db"
            seeding = time.perf_counter()
            store_id, oldest, newest = trio.run(
                seed, db, options.memories, options.versions, options.step
            )
            log.info(
                "seeded %d versions in %.1f s through the storage layer",
                options.memories * options.versions, time.perf_counter() - seeding,
            )  # fmt: skip
            with server_on(db, key) as server:
                yield Seeded(server.base_url, key, store_id, oldest, newest)

    def run(self, options: argparse.Namespace, fixture: Seeded) -> list[Row]:
        f = fixture
        steps = trio.run(walk, f.base_url, f.key, f.store_id, f.oldest, f.newest)
        return [asdict(step) for step in steps]

    def note(self, options: argparse.Namespace) -> str:
        return f"{options.memories} memories x {options.versions} versions"


CASE = VersionsCase()
