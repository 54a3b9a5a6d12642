"""Benchmark one SQLite server against 1 and 3 PostgreSQL replicas, and change-stream latency.

For each setup (``sqlite``: one ``memfs server`` on a SQLite file; ``pg1`` / ``pg3``: one or
three ``memfs server --db postgresql://…`` on one database of a throwaway cluster, see
``kit/pgcluster.py``) it seeds a store and runs retrieve, list (basic, limit 100) and update
for ``--duration`` seconds each under ``--concurrency`` client tasks, spreading requests over
the replicas round-robin (as a load balancer would), with the measuring code of the server
case (``bench.load``). Then it measures the change stream: a subscriber on the last
replica, ``--events`` sequential writes on the first; latency = write sent → event received.
Last, a mount: ``memfs mount --change-feed auto`` against the last replica, ``--mount-samples``
writes through the first, each timed from the write's answer until ``read()`` of the file in
the mount (already in the kernel's page cache) returns the new content.

This case owns no product code.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path

import httpx
import trio

from bench.fixtures import pg_cluster, server_on
from bench.harness import Case, Row
from bench.load import Result, content_of, latency_result, measure, result_row, seed_store
from kit.mounts import memfs
from kit.pgcluster import PgCluster
from kit.servers import ServerProcess, free_port
from memfs.api import StoreClient
from memfs.api.changes import ChangeStream
from memfs.api.config import ClientConfig, Secret

log = logging.getLogger(__name__)
KEY = "sk-bench-replicas-" + "r" * 20


def server(db: str, workdir: Path) -> AbstractContextManager[ServerProcess]:
    """One replica (or the SQLite server) on ``db``, logging into ``workdir``."""
    return server_on(db, KEY, log_path=workdir / f"server-{free_port()}.log")


def config(url: str, concurrency: int) -> ClientConfig:
    return ClientConfig(
        api_key=Secret(KEY), base_url=url, max_retries=0, max_connections=concurrency, timeout=30
    )


Setup = tuple[list[Result], Result, str, str]


async def run_setup(args: argparse.Namespace, urls: list[str]) -> Setup:
    rng = random.Random(1)
    clients = [StoreClient(config(u, args.concurrency)) for u in urls]
    results: list[Result] = []
    try:
        store_id, ids = await seed_store(clients[0], args.memories, args.size, args.concurrency)

        def pick(n: int) -> StoreClient:
            return clients[n % len(clients)]

        operations: dict[str, Callable[[int], Awaitable[object]]] = {
            "retrieve": lambda n: pick(n).get_memory(store_id, rng.choice(ids)),
            "list_basic": lambda n: pick(n).list_memories_page(store_id, limit=100),
            "update": lambda n: pick(n).update_memory(
                store_id, rng.choice(ids), content=content_of(args.size, 1_000_000 + n)
            ),
        }
        for name, call in operations.items():
            results.append(await measure(name, call, args.concurrency, args.duration))
        stream_result = await stream_latency(args, urls, clients[0], store_id, ids)
    finally:
        for client in clients:
            await client.aclose()
    return results, stream_result, store_id, ids[0]


def mount_visibility(
    args: argparse.Namespace, urls: list[str], store_id: str, memory_id: str, workdir: Path
) -> Result:
    """Write through the first replica; time until a mount on the last one reads the change."""
    point = workdir / f"mnt-{free_port()}"
    point.mkdir()
    env = dict(os.environ, ANTHROPIC_API_KEY=KEY, ANTHROPIC_BASE_URL=urls[-1])
    env["XDG_CACHE_HOME"] = str(workdir / "xdg-cache")
    env.pop("MEMFS_API_KEYS", None)
    headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
    route = f"/v1/memory_stores/{store_id}/memories/{memory_id}"
    latencies: list[float] = []
    with httpx.Client(base_url=urls[0], headers=headers, timeout=30) as writer:
        path = writer.get(route).json()["path"]
        mounted = memfs("mount", store_id, str(point), "--change-feed", "auto", env=env)
        if mounted.returncode:
            raise RuntimeError(mounted.stderr)
        try:
            target = point / path.lstrip("/")
            target.read_bytes()  # warm: the kernel now caches the old content
            for i in range(args.mount_samples):
                text = f"mount sample {i}"
                writer.post(route, json={"content": text}).raise_for_status()
                written = time.perf_counter()
                while target.read_text() != text:
                    if time.perf_counter() - written > 10:
                        raise RuntimeError("a change was not visible in the mount within 10 s")
                    time.sleep(0.002)
                latencies.append((time.perf_counter() - written) * 1000)
        finally:
            memfs("umount", str(point), env=env)
    return latency_result("write on first replica → visible in a mount on the last", latencies)


async def stream_latency(
    args: argparse.Namespace, urls: list[str], writer: StoreClient, store_id: str, ids: list[str]
) -> Result:
    latencies: list[float] = []
    arrived = trio.Event()
    ready = trio.Event()
    async with (
        StoreClient(config(urls[-1], 1)) as client,
        ChangeStream(client, store_id) as stream,
        trio.open_nursery() as n,
    ):

        async def read() -> None:
            nonlocal arrived
            async for event in stream:
                if event.kind == "ready":
                    ready.set()
                else:
                    arrived.set()

        n.start_soon(read)
        await ready.wait()
        for i in range(args.events):
            arrived = trio.Event()
            sent = time.perf_counter()
            await writer.update_memory(store_id, ids[i % len(ids)], content=f"event {i}")
            with trio.fail_after(10):
                await arrived.wait()
            latencies.append((time.perf_counter() - sent) * 1000)
        n.cancel_scope.cancel()
    return latency_result("stream write→event", latencies)


class ReplicasCase(Case[PgCluster | None]):
    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-c", "--concurrency", type=int, default=8)
        parser.add_argument("-d", "--duration", type=float, default=3.0)
        parser.add_argument("--memories", type=int, default=200)
        parser.add_argument("--size", type=int, default=1024)
        parser.add_argument("--events", type=int, default=100, help="change-stream writes")
        parser.add_argument("--mount-samples", type=int, default=20, help="mount visibility writes")
        parser.add_argument("--setups", nargs="+", default=["sqlite", "pg1", "pg3"])

    def check(self, parser: argparse.ArgumentParser, options: argparse.Namespace) -> None:
        if PgCluster.find_bin() is None and any(s.startswith("pg") for s in options.setups):
            parser.error("PostgreSQL binaries not found (apt-get install postgresql)")

    def note(self, options: argparse.Namespace) -> str:
        return f"-c {options.concurrency} -d {options.duration}"

    def setup(self, options: argparse.Namespace) -> AbstractContextManager[PgCluster | None]:
        return pg_cluster(any(s.startswith("pg") for s in options.setups))

    def run(self, options: argparse.Namespace, fixture: PgCluster | None) -> list[Row]:
        cluster = fixture
        rows: list[Row] = []
        with tempfile.TemporaryDirectory(prefix="memfs-bench-") as tmp:
            for setup in options.setups:
                with ExitStack() as servers:
                    if setup == "sqlite":
                        db = str(Path(tmp) / "b.db")
                        urls = [servers.enter_context(server(db, Path(tmp))).base_url]
                    else:
                        assert cluster is not None
                        db = cluster.create_database("bench")
                        count = int(setup[2:])
                        urls = [
                            servers.enter_context(server(db, Path(tmp))).base_url
                            for _ in range(count)
                        ]
                    results, stream, store_id, memory_id = trio.run(run_setup, options, urls)
                    mount = mount_visibility(options, urls, store_id, memory_id, Path(tmp))
                for result in (*results, stream, mount):
                    rows.append({"setup": setup, **result_row(result)})
        return rows


CASE = ReplicasCase()
