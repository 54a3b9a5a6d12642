"""Benchmark the reference server through StoreClient: throughput and p50/p99 latency.

Starts ``memfs server`` on a throwaway database (a subprocess, as the test fixture does), seeds
one store, then runs each operation for ``--duration`` seconds under ``--concurrency`` client
tasks sharing one StoreClient (one connection pool): retrieve (view=full), list basic (limit
100), list full (limit 20) and update (unconditional, new content every time, so each call
writes a version).

With ``--base-url`` it measures an already running server instead (key from
``ANTHROPIC_API_KEY``); it then creates a store there and deletes it at the end.

This case owns no product code: it only drives ``memfs.api.StoreClient``.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from bench.fixtures import bench_key, server_on
from bench.harness import Case, Row
from bench.load import Result, content_of, measure, result_row, seed_store
from memfs.api import StoreClient
from memfs.api.config import ClientConfig, Secret

log = logging.getLogger(__name__)

OPERATIONS = ["retrieve", "list_basic", "list_full", "update"]


async def run_benchmark(args: argparse.Namespace, base_url: str, key: str) -> list[Result]:
    config = ClientConfig(
        api_key=Secret(key),
        base_url=base_url,
        max_retries=0,  # measure the server, not the retry policy
        max_connections=max(args.concurrency, 1),
        timeout=30.0,
    )
    rng = random.Random(args.seed)
    results: list[Result] = []
    async with StoreClient(config) as client:
        store_id, ids = await seed_store(client, args.memories, args.size, args.concurrency)
        operations: dict[str, Callable[[int], Awaitable[object]]] = {
            "retrieve": lambda n: client.get_memory(store_id, rng.choice(ids)),
            "list_basic": lambda n: client.list_memories_page(store_id, limit=100),
            "list_full": lambda n: client.list_memories_page(store_id, limit=20, view="full"),
            "update": lambda n: client.update_memory(
                store_id, rng.choice(ids), content=content_of(args.size, 1_000_000 + n)
            ),
        }
        try:
            for name in args.operations:
                result = await measure(name, operations[name], args.concurrency, args.duration)
                log.info("%s: %d requests, %.1f/s", name, result.requests, result.throughput)
                results.append(result)
        finally:
            if args.base_url:
                await client.delete_store(store_id)
    return results


class ServerCase(Case[None]):
    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "-c", "--concurrency", type=int, default=8, help="client tasks (default 8)"
        )
        parser.add_argument(
            "-d", "--duration", type=float, default=3.0, help="seconds per operation"
        )
        parser.add_argument(
            "--memories", type=int, default=200, help="memories to seed (default 200)"
        )
        parser.add_argument("--size", type=int, default=1024, help="content bytes (default 1024)")
        parser.add_argument("--seed", type=int, default=1, help="random seed")
        parser.add_argument(
            "--operations", nargs="+", choices=OPERATIONS, default=OPERATIONS, metavar="OP",
            help=f"which operations ({', '.join(OPERATIONS)})",
        )  # fmt: skip
        parser.add_argument(
            "--base-url", help="measure this running server (key: ANTHROPIC_API_KEY)"
        )
        parser.add_argument("--server-log-level", default="WARNING", help="log level of the server")

    def check(self, parser: argparse.ArgumentParser, options: argparse.Namespace) -> None:
        if options.concurrency < 1 or options.duration <= 0 or options.memories < 1:
            parser.error("--concurrency, --duration and --memories must be positive")
        if options.base_url and not os.environ.get("ANTHROPIC_API_KEY"):
            parser.error("--base-url needs ANTHROPIC_API_KEY")

    def run(self, options: argparse.Namespace, fixture: None) -> list[Row]:
        if options.base_url:
            results = trio.run(
                run_benchmark, options, options.base_url, os.environ["ANTHROPIC_API_KEY"]
            )
        else:
            key = bench_key()
            with (
                tempfile.TemporaryDirectory(prefix="memfs-bench-") as tmp,
                server_on(
                    Path(tmp) / "bench.db", key, log_level=options.server_log_level
                ) as server,
            ):
                results = trio.run(run_benchmark, options, server.base_url, key)
        return [result_row(r) for r in results]

    def note(self, options: argparse.Namespace) -> str:
        return (
            f"{options.memories} memories of {options.size} bytes, {options.concurrency} "
            f"concurrent tasks, {options.duration:g} s per operation."
        )

    def ok(self, rows: list[Row]) -> bool:
        return all(row["errors"] == 0 for row in rows)


CASE = ServerCase()
