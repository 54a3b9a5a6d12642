"""``DatabricksStorage`` under concurrency, on SQLite and PostgreSQL (``storage`` fixture):
each mutation is one transaction that locks its store first (a store create relies on the
primary key), so of many exclusive creates of one key or one store id exactly one wins and the
others get ALREADY_EXISTS, never an internal error."""

from __future__ import annotations

import trio

from memfs.server.databricks_storage import (
    SOURCE_AGENT,
    AlreadyExistsError,
    EntryFilter,
    NewEntry,
)
from memfs.server.storage import Storage


async def test_concurrent_creates_of_one_key_have_one_winner(storage: Storage) -> None:
    dbx = storage.databricks
    await dbx.create_store("race", description=None, creator="apikey_x")
    outcomes: list[str] = []

    async def create(i: int) -> None:
        entry = NewEntry(None, "a", None, "/same", f"writer {i}", None, SOURCE_AGENT)
        try:
            await dbx.create_entry("race", entry)
            outcomes.append("ok")
        except AlreadyExistsError:
            outcomes.append("exists")

    async with trio.open_nursery() as nursery:
        for i in range(8):
            nursery.start_soon(create, i)
    assert sorted(outcomes) == ["exists"] * 7 + ["ok"]
    page = await dbx.list_entries(
        "race", EntryFilter(actor_id="a"), after=None, limit=10, with_content=True
    )
    assert [e.path for e in page.items] == ["/same"]


async def test_concurrent_creates_of_one_store_have_one_winner(storage: Storage) -> None:
    outcomes: list[str] = []

    async def create() -> None:
        try:
            await storage.databricks.create_store("same-id", description=None, creator="k")
            outcomes.append("ok")
        except AlreadyExistsError:
            outcomes.append("exists")

    async with trio.open_nursery() as nursery:
        for _ in range(8):
            nursery.start_soon(create)
    assert sorted(outcomes) == ["exists"] * 7 + ["ok"]
