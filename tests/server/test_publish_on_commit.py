"""The SQLite backend tells its change hub of a write once the write's transaction has
committed (``memfs.server.backends.sqlite``): every committed change of a store, of either
API, publishes its topic; a write that changed nothing, or was refused, publishes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from memfs.contract.errors import PreconditionFailedError
from memfs.contract.models import Actor
from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.databricks.storage import SOURCE_AGENT, NewEntry, change_topic
from memfs.server.db.notify import ChangeHub

ACTOR = Actor("api_actor", "apikey_test")


async def test_committed_writes_publish_and_empty_or_refused_ones_do_not(tmp_path: Path) -> None:
    hub = ChangeHub()
    storage = await SqliteStorage.open(tmp_path / "s.db", hub=hub)
    try:
        store = await storage.create_store(name="s", description="", metadata={})
        with hub.subscribe(store.id) as sub:
            memory = await storage.create_memory(store.id, path="/a.md", content="a", actor=ACTOR)
            assert sub.take_news()
            same = {"content": "a", "path": None, "expected_sha256": None, "actor": ACTOR}
            await storage.update_memory(store.id, memory.id, **same)  # a no-op: no version
            assert not sub.take_news()
            with pytest.raises(PreconditionFailedError):
                await storage.update_memory(
                    store.id,
                    memory.id,
                    content="b",
                    path=None,
                    expected_sha256="0" * 64,
                    actor=ACTOR,
                )
            assert not sub.take_news()
            await storage.delete_memory(store.id, memory.id, expected_sha256=None, actor=ACTOR)
            assert sub.take_news()
            await storage.delete_store(store.id)
            assert sub.take_news()

        await storage.databricks.create_store("d", description=None, creator="alice")
        with hub.subscribe(change_topic("d")) as dbx:
            entry = NewEntry(None, "alice", None, "/x.md", "x", None, SOURCE_AGENT)
            await storage.databricks.create_entry("d", entry)
            assert dbx.take_news()
            await storage.databricks.get_store("d")
            assert not dbx.take_news()
            await storage.databricks.delete_store("d")
            assert dbx.take_news()
    finally:
        await storage.aclose()
