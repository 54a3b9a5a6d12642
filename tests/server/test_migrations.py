"""Upgrades of older databases on both backends (``memfs.server.db.schema``): data written at an
older step is served after the upgrade, by every API, and the steps are recorded once each."""

from __future__ import annotations

from pathlib import Path

import pytest

from memfs.contract.models import Actor
from memfs.server.backends.postgres import PostgresStorage
from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.backends.storage import SqlStorage
from memfs.server.databricks.storage import DbxChange, EntryFilter, NewEntry, SearchRequest
from memfs.server.db import schema
from memfs.server.db.transaction import Tx
from memfs.server.memory_stores.storage import VersionFilter

from .helpers import back_to_step

ACTOR = Actor("api_actor", "apikey_test")
AGENT = "MANAGED_MEMORY_ENTRY_SOURCE_TYPE_AGENT"


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def database(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return request.getfixturevalue("pg_url") if backend == "postgres" else str(tmp_path / "db")


async def open_storage(database: str) -> SqlStorage:
    if database.startswith("postgresql://"):
        return await PostgresStorage.open(database, pool_size=2)
    return await SqliteStorage.open(database)


def steps_recorded(tx: Tx) -> list[int]:
    return [int(row["version"]) for row in tx.execute("SELECT version FROM schema_version")]


def entry(path: str, content: str) -> NewEntry:
    return NewEntry(None, "agent", None, path, content, None, AGENT)


async def test_a_step_3_database_with_databricks_entries_upgrades_to_step_4(
    backend: str, database: str
) -> None:
    storage = await open_storage(database)
    dbx = storage.databricks
    await dbx.create_store("old", description=None, creator="apikey_test")
    old = await dbx.create_entry("old", entry("/old/notes.md", "an okapi"))
    await storage._write(back_to_step(3, backend))  # as a memfs of step 3 left it
    await storage.aclose()

    storage = await open_storage(database)  # upgrades
    try:
        assert sorted(await storage._read(steps_recorded)) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
        dbx = storage.databricks
        page = await dbx.list_entries(
            "old", EntryFilter("agent"), after=None, limit=10, with_content=True
        )
        assert [(e.id, e.content) for e in page.items] == [(old.id, "an okapi")]
        hits = await dbx.search_entries(
            "old", SearchRequest("agent", "okapi", 5), with_content=False
        )
        assert [e.id for e, _ in hits] == [old.id]
        # No history before the upgrade: the change log starts empty, then records each write.
        assert await dbx.change_bounds("old") == (0, 0)
        await dbx.delete_entry("old", old.id)
        changes = await dbx.list_changes("old", after=0, actor_id="agent", limit=10)
        assert [(c.kind, c.entry_id, c.path) for c in changes] == [
            ("deleted", old.id, "/old/notes.md")
        ]
    finally:
        await storage.aclose()


async def test_a_database_from_before_step_2_upgrades_through_every_step(
    backend: str, database: str
) -> None:
    """Memory Stores data only (step 1): steps 2 to 7 add Databricks stores, the search index
    (the memories indexed), the change log and the token counts of search statistics."""
    storage = await open_storage(database)
    store = await storage.create_store(name="old", description="", metadata={})
    memory = await storage.create_memory(store.id, path="/a/okapi.md", content="x", actor=ACTOR)
    await storage._write(back_to_step(1, backend))
    assert await storage._read(steps_recorded) == [1]
    await storage.aclose()

    storage = await open_storage(database)
    try:
        assert sorted(await storage._read(steps_recorded)) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
        assert (await storage.get_memory(store.id, memory.id)).content == "x"
        hits = await storage.search_memories(store.id, "okapi", limit=5, path_prefix=None)
        assert [m.id for m, _ in hits] == [memory.id]
        dbx = storage.databricks
        await dbx.create_store("fresh", description=None, creator="apikey_test")
        made = await dbx.create_entry("fresh", entry("/n.md", "new"))
        changes = await dbx.list_changes("fresh", after=0, actor_id=None, limit=10)
        assert [(c.kind, c.entry_id) for c in changes] == [("created", made.id)]
    finally:
        await storage.aclose()


def test_both_backends_have_the_same_steps() -> None:
    steps = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert [n for n, _ in schema.MIGRATIONS] == [n for n, _ in schema.PG_MIGRATIONS] == steps


async def test_a_step_9_database_keeps_its_contents_and_stores_nul_after_step_10(
    backend: str, database: str
) -> None:
    """Step 10 lets a content hold NUL, escaped on PostgreSQL with U+FFFF: a content stored
    before it that holds U+FFFF reads back as it was, and its memory then takes a NUL."""
    storage = await open_storage(database)
    store = await storage.create_store(name="old", description="", metadata={})
    old = "kept \uffff as it was \uffff0"  # also what an escaped NUL looks like
    memory = await storage.create_memory(store.id, path="/a.md", content=old, actor=ACTOR)
    await storage._write(back_to_step(9, backend))  # as a memfs of step 9 left it
    await storage.aclose()

    storage = await open_storage(database)  # upgrades
    try:
        assert sorted(await storage._read(steps_recorded)) == list(range(1, 11))
        assert (await storage.get_memory(store.id, memory.id)).content == old
        updated = await storage.update_memory(
            store.id, memory.id, content=old + "\x00", path=None, expected_sha256=None, actor=ACTOR
        )
        assert (await storage.get_memory(store.id, memory.id)).content == old + "\x00"
        versions = await storage.list_versions(
            store.id, VersionFilter(memory_id=memory.id), after=None, limit=10, with_content=True
        )
        assert [v.content for v in versions.items] == [old + "\x00", old]
        assert updated.content_size_bytes == len((old + "\x00").encode())
    finally:
        await storage.aclose()


def doc_lengths(tx: Tx) -> list[tuple[str, int]]:
    rows = tx.execute("SELECT doc_id, doc_len FROM search_docs ORDER BY doc_id").fetchall()
    return [(row["doc_id"], int(row["doc_len"])) for row in rows]


async def test_a_step_4_database_counts_the_tokens_of_its_search_documents(
    backend: str, database: str
) -> None:
    """Steps 5 and 6 (per-scope search statistics) backfill each indexed document's token count
    and each scope's counts: after the upgrade, documents written before it score as if
    written after it."""
    storage = await open_storage(database)
    store = await storage.create_store(name="old", description="", metadata={})
    await storage.create_memory(store.id, path="/a/okapi.md", content="an okapi", actor=ACTOR)
    await storage.create_memory(store.id, path="/b.md", content="one okapi " * 40, actor=ACTOR)
    dbx = storage.databricks
    await dbx.create_store("old", description=None, creator="apikey_test")
    await dbx.create_entry("old", entry("/old/notes.md", "the okapi of the forest"))
    written = await storage._read(doc_lengths)
    before = await storage.search_memories(store.id, "okapi", limit=5, path_prefix=None)
    assert all(length > 0 for _, length in written)
    await storage._write(back_to_step(4, backend))
    await storage.aclose()

    storage = await open_storage(database)
    try:
        assert sorted(await storage._read(steps_recorded)) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
        assert await storage._read(doc_lengths) == written
        after = await storage.search_memories(store.id, "okapi", limit=5, path_prefix=None)
        assert [(m.id, score) for m, score in after] == [(m.id, score) for m, score in before]
    finally:
        await storage.aclose()


def ordinals(changes: list[DbxChange]) -> list[int]:
    return [change.ordinal for change in changes]


async def test_a_step_6_database_numbers_its_databricks_changes_per_store(
    backend: str, database: str
) -> None:
    """Step 7 (change-stream ids per store): the changes logged before keep their number, so a
    cursor held across the upgrade means the same position; each store then counts on from
    its newest, one by one, whatever the other stores write."""
    storage = await open_storage(database)
    dbx = storage.databricks
    for store in ("a", "b"):
        await dbx.create_store(store, description=None, creator="apikey_test")
    await dbx.create_entry("a", entry("/1.md", "x"))
    await dbx.create_entry("b", entry("/1.md", "x"))
    await dbx.create_entry("b", entry("/2.md", "x"))
    await dbx.create_entry("a", entry("/2.md", "x"))
    await storage._write(back_to_step(6, backend))  # a global ``seq`` numbered these
    await storage.aclose()

    storage = await open_storage(database)
    try:
        assert sorted(await storage._read(steps_recorded)) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
        dbx = storage.databricks
        old_a = await dbx.list_changes("a", after=0, actor_id=None, limit=10)
        held = old_a[0].ordinal  # a client's cursor from before the upgrade
        assert await dbx.change_bounds("a") == (0, old_a[-1].ordinal)
        await dbx.create_entry("b", entry("/3.md", "x"))
        await dbx.create_entry("a", entry("/3.md", "x"))
        await dbx.create_entry("a", entry("/4.md", "x"))
        after_held = await dbx.list_changes("a", after=held, actor_id=None, limit=10)
        assert [c.path for c in after_held] == ["/2.md", "/3.md", "/4.md"]
        newest = old_a[-1].ordinal
        assert ordinals(after_held) == [newest, newest + 1, newest + 2]
        b = await dbx.list_changes("b", after=0, actor_id=None, limit=10)
        assert ordinals(b)[-1] == ordinals(b)[-2] + 1
    finally:
        await storage.aclose()


def test_a_stores_last_deletion_is_found_by_its_own_index(tmp_path: Path) -> None:
    """Step 9: ``change_bounds`` (every Databricks change stream's opening) finds a store's
    last deletion in the partial index, not by walking every change of the store (100,000
    changes: 20 ms -> 5 us, docs/benchmarks.md)."""
    import sqlite3

    conn = sqlite3.connect(tmp_path / "plan.db")
    try:
        schema.migrate(conn)
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT MAX(ordinal) FROM dbx_changes "
            "WHERE store_id = ? AND kind = 'store_deleted'",
            ("s",),
        ).fetchall()
    finally:
        conn.close()
    assert any("USING INDEX dbx_changes_store_deletions" in str(row[-1]) for row in plan), plan
