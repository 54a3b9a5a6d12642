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

Owns no product code.
"""

from __future__ import annotations

import argparse
import re
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import trio

from bench.harness import Case, Row
from bench.pages import GOAL_MS, KEY, Counted, page_rows, timed_cases
from memfs.contract.models import Actor, format_time
from memfs.server.app import create_app
from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.console.sql import SqlConsole
from memfs.server.memory_stores.storage import VersionFilter

ACTOR = Actor("api_actor", "apikey_bench")


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
    ids = [m.id for m in await SqlConsole(storage).tree_memories(store.id)]
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


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    """Every page's times and transactions."""
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
    return results


class ConsoleCase(Case[None]):
    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--memories", type=int, default=2000)
        parser.add_argument("--versions", type=int, default=10_000)
        parser.add_argument("--stores", type=int, default=20)
        parser.add_argument("--runs", type=int, default=30)

    def note(self, options: argparse.Namespace) -> str:
        return (
            f"{options.memories} memories, {options.versions} versions, {options.runs} runs "
            f"each (goal: every page under {GOAL_MS:.0f} ms)"
        )

    def run(self, options: argparse.Namespace, fixture: None) -> list[Row]:
        return page_rows(trio.run(bench, options), "API: list all memories (baseline)")


CASE = ConsoleCase()
