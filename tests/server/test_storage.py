"""The SQLite backend directly: migrations, persistence, transactions under concurrent tasks."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import trio

from memfs.contract.errors import PreconditionFailedError, StoreFullError
from memfs.contract.models import Actor, sha256_hex
from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.db import schema

ACTOR = Actor("api_actor", "apikey_test")


async def test_reopen_keeps_data_and_does_not_remigrate(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    first = await SqliteStorage.open(db)
    store = await first.create_store(name="p", description="d", metadata={"k": "v"})
    memory = await first.create_memory(store.id, path="/a", content="x", actor=ACTOR)
    await first.aclose()
    again = await SqliteStorage.open(db)
    try:
        assert (await again.get_store(store.id)) == store
        assert (await again.get_memory(store.id, memory.id)).content == "x"
    finally:
        await again.aclose()
    conn = sqlite3.connect(db)
    try:
        assert schema.current_version(conn) == schema.LATEST
        steps = conn.execute("SELECT COUNT(*) FROM schema_version").fetchone()[0]
        assert steps == len(schema.MIGRATIONS)  # one row per step, none added by the reopen
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


async def test_concurrent_creates_stop_exactly_at_the_limit(storage: SqliteStorage) -> None:
    store = await storage.create_store(name="race", description="", metadata={})
    outcomes: list[str] = []

    async def create(i: int) -> None:
        try:
            await storage.create_memory(store.id, path=f"/m{i}", content="", actor=ACTOR)
            outcomes.append("ok")
        except StoreFullError:
            outcomes.append("full")

    async with trio.open_nursery() as nursery:
        for i in range(30):
            nursery.start_soon(create, i)
    assert outcomes.count("ok") == storage.max_memories == 10
    assert outcomes.count("full") == 20


async def test_concurrent_conditional_updates_have_one_winner(storage: SqliteStorage) -> None:
    store = await storage.create_store(name="cas", description="", metadata={})
    memory = await storage.create_memory(store.id, path="/c", content="0", actor=ACTOR)
    winners: list[int] = []

    async def bump(i: int) -> None:
        try:
            await storage.update_memory(
                store.id,
                memory.id,
                content=f"by {i}",
                path=None,
                expected_sha256=sha256_hex("0"),
                actor=ACTOR,
            )
            winners.append(i)
        except PreconditionFailedError:
            pass

    async with trio.open_nursery() as nursery:
        for i in range(8):
            nursery.start_soon(bump, i)
    assert len(winners) == 1
    assert (await storage.get_memory(store.id, memory.id)).content == f"by {winners[0]}"


async def test_closed_storage_refuses_writes(tmp_path: Path) -> None:
    storage = await SqliteStorage.open(tmp_path / "c.db")
    await storage.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await storage.create_store(name="x", description="", metadata={})
