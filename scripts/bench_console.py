#!/usr/bin/env python3
"""Benchmark the console's pages on a store of 2,000 memories (issue 23: under 100 ms each).

In process (the app over ``httpx.ASGITransport``, so the time is the server's own: routing,
session lookup, storage, templates; no socket), on a SQLite database seeded with one store of
``--memories`` memories (paths in 40 folders of 50, contents of ~300 bytes) with ``--versions``
versions in all (the creates, then updates round the memories, the last 1 % deletions), and
``--stores`` other stores:
- the stores page (``/console/``), the store page (the tree of every memory), a memory page,
  the search page (``?q=``) and an edit page; the history pages: a memory's history, a version,
  two compared, the store's history (newest page, and filtered by operation) and the store as
  of a moment halfway through its history (every version read); each ``--runs`` times,
  signed in;
- baselines measured in the same run, so the ratios hold on a loaded machine: the API's own
  JSON listing of the same 2,000 memories (``GET …/memories?limit=100``, every page followed:
  what a client pays to see the tree), ``GET /v1/memory_stores/{id}/memories/{id}`` and the
  API's listing of 100 versions;
- the database transactions each page runs (counted at the storage's ``_read``/``_write``:
  deterministic), and the HTML size.

Prints a markdown table, or JSON with ``--json``. Owns no product code.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import trio

from memfs.contract.models import Actor, format_time
from memfs.server.app import create_app
from memfs.server.sqlite import SqliteStorage
from memfs.server.storage import VersionFilter

KEY = "sk-bench-console-" + "k" * 24
ACTOR = Actor("api_actor", "apikey_bench")
GOAL_MS = 100.0


class Counted:
    """Counts the transactions a storage runs (patched onto the instance: a bench only)."""

    def __init__(self, storage: SqliteStorage) -> None:
        self.count = 0
        read, write = storage._read, storage._write

        async def counted_read(fn: Any) -> Any:
            self.count += 1
            return await read(fn)

        async def counted_write(fn: Any) -> Any:
            self.count += 1
            return await write(fn)

        storage._read = counted_read  # type: ignore[method-assign]
        storage._write = counted_write  # type: ignore[method-assign]


async def seed(
    storage: SqliteStorage, memories: int, versions: int, stores: int
) -> tuple[str, str]:
    for n in range(stores):
        await storage.create_store(name=f"other {n}", description="another team", metadata={})
    store = await storage.create_store(name="big", description="2,000 memories", metadata={})
    body = "A line about the okapi and its forest, then some more words. " * 5
    first = ""
    for n in range(memories):
        memory = await storage.create_memory(
            store.id,
            path=f"/folder{n % 40:02d}/note{n:04d}.md",
            content=f"{n}: {body}",
            actor=ACTOR,
        )
        first = first or memory.id
    ids = [m.id for m in await storage.console.memory_paths(store.id)]
    extra = max(0, versions - memories)
    deletions = extra // 100
    for n in range(extra - deletions):
        await storage.update_memory(
            store.id, ids[n % len(ids)], content=f"{n}: {body}", path=None,
            expected_sha256=None, actor=ACTOR,
        )  # fmt: skip
    for memory_id in ids[-deletions:] if deletions else []:
        await storage.delete_memory(store.id, memory_id, expected_sha256=None, actor=ACTOR)
    return store.id, first


async def timed(runs: int, call: Callable[[], Awaitable[httpx.Response]]) -> dict[str, float]:
    await call()  # warm: templates compiled, pages cached by SQLite
    times = []
    size = 0
    for _ in range(runs):
        started = time.perf_counter()
        answer = await call()
        times.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200, answer.text[:300]
        size = len(answer.content)
    return {
        "median_ms": statistics.median(times),
        "p90_ms": sorted(times)[int(len(times) * 0.9) - 1],
        "bytes": size,
    }


async def timed_cases(
    runs: int, cases: dict[str, Callable[[], Awaitable[httpx.Response]]], counter: Counted
) -> dict[str, Any]:
    """Each case ``timed``, with the database transactions one more call of it runs."""
    results: dict[str, Any] = {}
    for name, call in cases.items():
        result = await timed(runs, call)
        before = counter.count
        await call()
        result["transactions"] = counter.count - before
        results[name] = result
    return results


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        storage = await SqliteStorage.open(Path(tmp) / "bench.db")
        try:
            store_id, memory_id = await seed(storage, args.memories, args.versions, args.stores)
            history = await storage.list_versions(
                store_id, VersionFilter(), after=None, limit=args.versions, with_content=False
            )
            mine = [v.id for v in history.items if v.memory_id == memory_id]
            halfway = format_time(history.items[len(history.items) // 2].created_at)
            counter = Counted(storage)
            app = create_app(storage, [KEY])
            transport = httpx.ASGITransport(app=app)
            async with (
                httpx.AsyncClient(transport=transport, base_url="http://bench") as page,
                httpx.AsyncClient(
                    transport=transport, base_url="http://bench", headers={"x-api-key": KEY}
                ) as api,
            ):
                form = await page.get("/console/sign-in")
                token = re.search(r'name="csrf" value="([0-9a-f]+)"', form.text)
                assert token is not None
                signed = await page.post(
                    "/console/sign-in", data={"csrf": token.group(1), "api_key": KEY}
                )
                assert signed.status_code == 303

                async def api_listing() -> httpx.Response:
                    url = f"/v1/memory_stores/{store_id}/memories"
                    answer = await api.get(url, params={"limit": 100})
                    while answer.json().get("next_page"):
                        answer = await api.get(
                            url, params={"limit": 100, "page": answer.json()["next_page"]}
                        )
                    return answer

                store = f"/console/stores/{store_id}"
                memory = f"{store}/memories/{memory_id}"
                cases: dict[str, Callable[[], Awaitable[httpx.Response]]] = {
                    "stores page": lambda: page.get("/console/"),
                    "store page (tree of all)": lambda: page.get(store),
                    "memory page": lambda: page.get(memory),
                    "edit page": lambda: page.get(memory + "/edit"),
                    "search page": lambda: page.get(store + "/search", params={"q": "okapi"}),
                    "memory history page": lambda: page.get(memory + "/history"),
                    "version page": lambda: page.get(f"{memory}/versions/{mine[-1]}"),
                    "compare page": lambda: page.get(
                        memory + "/history/compare", params={"from": mine[0], "to": mine[-1]}
                    ),
                    "store history page (newest 50)": lambda: page.get(store + "/history"),
                    "store history, deleted only": lambda: page.get(
                        store + "/history", params={"operation": "deleted"}
                    ),
                    "store as of halfway (tree of all)": lambda: page.get(
                        store + "/as-of", params={"at": halfway}
                    ),
                    "API: list all memories (baseline)": api_listing,
                    "API: get one memory (baseline)": lambda: api.get(
                        f"/v1/memory_stores/{store_id}/memories/{memory_id}"
                    ),
                    "API: list 100 versions (baseline)": lambda: api.get(
                        f"/v1/memory_stores/{store_id}/memory_versions", params={"limit": 100}
                    ),
                }
                results = await timed_cases(args.runs, cases, counter)
        finally:
            await storage.aclose()
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load": os.getloadavg(),
        "memories": args.memories,
        "versions": args.versions,
        "runs": args.runs,
        "results": results,
    }


def table(report: dict[str, Any]) -> str:
    results = report["results"]
    listing = results["API: list all memories (baseline)"]["median_ms"]
    lines = [
        f"{report['date']}, load {report['load'][0]:.2f}, {report['memories']} memories, "
        f"{report['versions']} versions, "
        f"{report['runs']} runs each (goal: every page under {GOAL_MS:.0f} ms)",
        "",
        "| page | median ms | p90 ms | x API listing | transactions | KiB |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['median_ms']:.1f} | {r['p90_ms']:.1f} | "
            f"{r['median_ms'] / listing:.2f} | {r['transactions']} | {r['bytes'] / 1024:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--versions", type=int, default=10_000)
    parser.add_argument("--stores", type=int, default=20)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = trio.run(bench, args)
    print(json.dumps(report, indent=2) if args.json else table(report))


if __name__ == "__main__":
    sys.exit(main())
