"""Benchmark the console's Databricks pages on a big Databricks store (issue 23: under 100 ms).

In process (the app over ``httpx.ASGITransport``, with a change hub so the pages are live, as
``memfs server`` serves them), on a SQLite database seeded with one Databricks store of
``--entries`` entries (the API's limit is 100,000 a store) spread over ``--actors`` actors, each
with 10 sessions and a third of its entries without a session, ~100-byte contents:
- the store page (every actor with its entry count), an actor's page (its sessions), one
  session's entries, all of an actor's entries (the first 500), an entry, its edit page, and
  a search of one actor; each ``--runs`` times, signed in;
- baselines in the same run: the Databricks API's listing of one actor's entries (every page of
  100 followed: what a client pays to see them) and its GET of one entry;
- the database transactions of each page (deterministic) and the HTML size.

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
from memfs.server.app import create_app
from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.databricks.storage import SOURCE_AGENT, NewEntry
from memfs.server.db.notify import ChangeHub

STORE = "big-dbx"
API = "/api/2.0/agents/memory-stores"


async def seed(storage: SqliteStorage, entries: int, actors: int) -> str:
    dbx = storage.databricks
    await dbx.create_store(STORE, description="a big one", creator="bench")
    body = "A line about the okapi and its forest, then some more words. "
    first = ""
    for n in range(entries):
        session = None if n % 3 == 0 else f"session-{n % 10}"
        made = await dbx.create_entry(
            STORE,
            NewEntry(
                None, f"actor-{n % actors:03d}", session, f"/notes/{n:06d}.md",
                f"{n}: {body}", "a note", SOURCE_AGENT,
            ),
        )  # fmt: skip
        first = first or made.id
    return first


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        storage = await SqliteStorage.open(Path(tmp) / "bench.db")
        try:
            entry_id = await seed(storage, args.entries, args.actors)
            counter = Counted(storage)
            app = create_app(storage, [KEY], change_hub=ChangeHub())
            transport = httpx.ASGITransport(app=app)
            async with (
                httpx.AsyncClient(transport=transport, base_url="http://bench") as page,
                httpx.AsyncClient(
                    transport=transport,
                    base_url="http://bench",
                    headers={"authorization": f"Bearer {KEY}"},
                ) as api,
            ):
                form = await page.get("/console/sign-in")
                token = re.search(r'name="csrf" value="([0-9a-f]+)"', form.text)
                assert token is not None
                await page.post("/console/sign-in", data={"csrf": token.group(1), "api_key": KEY})

                async def api_listing() -> httpx.Response:
                    url = f"{API}/{STORE}/entries"
                    params: dict[str, Any] = {"actor_id": "actor-000", "page_size": 100}
                    answer = await api.get(url, params=params)
                    while answer.json().get("next_page_token"):
                        params["page_token"] = answer.json()["next_page_token"]
                        answer = await api.get(url, params=params)
                    return answer

                store = f"/console/databricks/{STORE}"
                entry = f"{store}/entries/{entry_id}"
                actor = {"actor": "actor-000"}
                cases: dict[str, Callable[[], Awaitable[httpx.Response]]] = {
                    "store page (every actor)": lambda: page.get(store),
                    "actor page (its sessions)": lambda: page.get(store + "/actor", params=actor),
                    "one session's entries": lambda: page.get(
                        store + "/entries", params={**actor, "session": "session-0"}
                    ),
                    "an actor's entries (first 500)": lambda: page.get(
                        store + "/entries", params=actor
                    ),
                    "entry page": lambda: page.get(entry),
                    "edit page": lambda: page.get(entry + "/edit"),
                    "search page (one actor)": lambda: page.get(
                        store + "/search", params={**actor, "q": "okapi forest"}
                    ),
                    "API: list one actor's entries (baseline)": api_listing,
                    "API: get one entry (baseline)": lambda: api.get(
                        f"{API}/{STORE}/entries/{entry_id}"
                    ),
                }
                results = await timed_cases(args.runs, cases, counter)
        finally:
            await storage.aclose()
    return results


class ConsoleDatabricksCase(Case[None]):
    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--entries", type=int, default=20_000)
        parser.add_argument("--actors", type=int, default=100)
        parser.add_argument("--runs", type=int, default=20)

    def note(self, options: argparse.Namespace) -> str:
        return (
            f"{options.entries:,} entries, {options.actors} actors, {options.runs} runs; "
            f"goal {GOAL_MS:.0f} ms"
        )

    def run(self, options: argparse.Namespace, fixture: None) -> list[Row]:
        return page_rows(trio.run(bench, options), "API: list one actor's entries (baseline)")


CASE = ConsoleDatabricksCase()
