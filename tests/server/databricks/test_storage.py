"""``DatabricksStorage`` under concurrency, on SQLite and PostgreSQL (``storage`` fixture):
each mutation is one transaction that locks its store first (a store create relies on the
primary key), so of many exclusive creates of one key or one store id exactly one wins and the
others get ALREADY_EXISTS, never an internal error."""

from __future__ import annotations

from datetime import timedelta

import pytest
import trio

from memfs.contract.errors import NotFoundError, PreconditionFailedError
from memfs.contract.models import sha256_hex
from memfs.server.backends.storage import Storage
from memfs.server.databricks.storage import (
    SOURCE_AGENT,
    AlreadyExistsError,
    EntryFilter,
    EntryPatch,
    NewEntry,
)

from ..helpers import FakeClock


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


async def test_each_store_numbers_its_changes_one_by_one(
    storage: Storage, clock: FakeClock
) -> None:
    """The change log's ordinals (the stream's event ids) count one store's changes only, even
    with concurrent writers in two stores; retention that drops every logged change of an
    idle store, and a store created again under a deleted one's id, both number on."""
    dbx = storage.databricks
    for store in ("one", "two"):
        await dbx.create_store(store, description=None, creator="k")

    async def write(store: str, i: int) -> None:
        await dbx.create_entry(store, NewEntry(None, "a", None, f"/{i}", "x", None, SOURCE_AGENT))

    async with trio.open_nursery() as nursery:
        for i in range(12):
            nursery.start_soon(write, ("one", "two")[i % 2], i)
    for store in ("one", "two"):
        changes = await dbx.list_changes(store, after=0, actor_id=None, limit=100)
        assert [c.ordinal for c in changes] == list(range(1, 7))

    clock.advance(days=400)
    await storage.prune_versions(clock.now - timedelta(days=1))
    assert await dbx.list_changes("one", after=0, actor_id=None, limit=100) == []
    await write("one", 100)
    await dbx.delete_store("two")
    await dbx.create_store("two", description=None, creator="k")
    await write("two", 100)

    async def log(store: str) -> list[tuple[int, str]]:
        changes = await dbx.list_changes(store, after=0, actor_id=None, limit=100)
        return [(c.ordinal, c.kind) for c in changes]

    assert await log("one") == [(7, "created")]
    assert await log("two") == [(7, "store_deleted"), (8, "created")]
    assert await dbx.change_bounds("two") == (7, 8)  # its own history starts after 7


async def test_a_content_precondition_is_checked_in_the_writes_transaction(
    storage: Storage,
) -> None:
    """``expected_sha256`` (the server's MCP tools): an update or delete of content that changed
    since it was read is refused and changes nothing; with the content read, it goes through."""
    dbx = storage.databricks
    await dbx.create_store("guarded", description=None, creator="apikey_x")
    entry = await dbx.create_entry(
        "guarded", NewEntry(None, "a", None, "/n.md", "first", None, SOURCE_AGENT)
    )
    read = sha256_hex("first")
    await dbx.update_entry("guarded", entry.id, EntryPatch({"content": "second"}))  # elsewhere
    with pytest.raises(PreconditionFailedError):
        await dbx.update_entry(
            "guarded", entry.id, EntryPatch({"content": "blind"}), expected_sha256=read
        )
    with pytest.raises(PreconditionFailedError):
        await dbx.delete_entry("guarded", entry.id, expected_sha256=read)
    now = await dbx.get_entry("guarded", entry.id, with_content=True)
    assert now.content == "second"
    updated = await dbx.update_entry(
        "guarded", entry.id, EntryPatch({"content": "third"}), expected_sha256=sha256_hex("second")
    )
    assert updated.content == "third"
    await dbx.delete_entry("guarded", entry.id, expected_sha256=sha256_hex("third"))
    with pytest.raises(NotFoundError):
        await dbx.get_entry("guarded", entry.id, with_content=False)
