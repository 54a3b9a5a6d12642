"""``entries:search`` through databricks-sdk: the search index follows every write at once.

Each entry write (create, update, delete, store delete) updates the index in its own
transaction (``memfs.server.search``, kind ``databricks``), so a search right after it sees the
new text and never the old. The scope is one actor: a session narrows it to that session (no
session-less entries), ``path_prefix`` to a plain string prefix; results are best first.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing

import psycopg
import pytest
from databricks.sdk import WorkspaceClient
from databricks.sdk.common.types.fieldmask import FieldMask
from databricks.sdk.errors import InvalidParameterValue, NotFound
from databricks.sdk.service.agentkit import ManagedMemoryEntry, ManagedMemoryStore
from support.servers import ServerProcess

from .helpers import new_store_id


def paths(workspace: WorkspaceClient, store: str, query: str, **scope: str) -> list[str]:
    results = workspace.agent_kit.search_memories(store, scope.pop("actor_id", "a"), query, **scope)
    return [r.managed_memory_entry.path for r in results]


def index_rows(server: ServerProcess, store_id: str) -> int:
    """How many rows the server's search index holds for the Databricks store, read from its
    database directly (PostgreSQL or the SQLite file, read-only)."""
    query = "SELECT COUNT(*) FROM search_docs WHERE kind = 'databricks' AND store_id = "
    if server.db_url is not None:
        with psycopg.connect(server.db_url) as pg:
            row = pg.execute(query + "%s", (store_id,)).fetchone()
    else:
        with closing(sqlite3.connect(f"file:{server.db}?mode=ro", uri=True)) as db:
            row = db.execute(query + "?", (store_id,)).fetchone()
    assert row is not None
    return int(row[0])


def test_the_index_follows_every_write(workspace: WorkspaceClient, store: str) -> None:
    ak = workspace.agent_kit
    made = ak.create_memory(
        store, ManagedMemoryEntry(actor_id="a", path="/pets.md", content="a parrot named Kiwi")
    )
    assert paths(workspace, store, "parrot") == ["/pets.md"]
    ak.update_memory(
        made.name,
        ManagedMemoryEntry(actor_id="a", path="/pets.md", content="a tortoise"),
        FieldMask(["content"]),
    )
    assert paths(workspace, store, "parrot") == []
    assert paths(workspace, store, "tortoise") == ["/pets.md"]
    ak.update_memory(
        made.name,
        ManagedMemoryEntry(actor_id="a", path="/pets.md", description="reptile facts"),
        FieldMask(["description"]),
    )
    assert paths(workspace, store, "reptile") == ["/pets.md"]  # descriptions are searched
    ak.delete_memory(made.name)
    assert paths(workspace, store, "tortoise") == []


def test_ranking_and_scope(workspace: WorkspaceClient, store: str) -> None:
    ak = workspace.agent_kit
    for path, session, content in [
        ("/garden/roses.md", None, "roses roses roses need pruning in spring"),
        ("/garden/tulips.md", None, "tulips bloom in spring, unlike roses"),
        ("/kitchen/jam.md", "s1", "rose hip jam: roses, sugar"),
        ("/other.md", None, "nothing about flowers"),
    ]:
        ak.create_memory(
            store, ManagedMemoryEntry(actor_id="a", path=path, session_id=session, content=content)
        )
    ak.create_memory(store, ManagedMemoryEntry(actor_id="b", path="/b.md", content="roses"))
    results = list(ak.search_memories(store, "a", "roses"))
    assert results[0].managed_memory_entry.path == "/garden/roses.md"
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    assert {r.managed_memory_entry.path for r in results} == {
        "/garden/roses.md",
        "/garden/tulips.md",
        "/kitchen/jam.md",
    }
    assert paths(workspace, store, "roses", session_id="s1") == ["/kitchen/jam.md"]
    # An empty session_id is unset (docs/server.md, decision 8): the whole actor.
    assert sorted(paths(workspace, store, "roses", session_id="")) == sorted(
        r.managed_memory_entry.path for r in results
    )
    assert set(paths(workspace, store, "roses", path_prefix="/garden/")) == {
        "/garden/roses.md",
        "/garden/tulips.md",
    }
    assert len(paths(workspace, store, "roses", page_size=1)) == 1
    assert paths(workspace, store, "roses", actor_id="b") == ["/b.md"]
    with pytest.raises(InvalidParameterValue, match="query"):
        paths(workspace, store, "   ")


def test_function_words_are_the_same_on_both_backends(
    workspace: WorkspaceClient, store: str
) -> None:
    """A query leaves out the same function words on SQLite as PostgreSQL's ``english``
    configuration does (``memfs.search_words.STOP_WORDS``): "don" and "t" of "don't" are
    function words, "would" is not."""
    ak = workspace.agent_kit
    for path, content in [("/panic.md", "don't panic"), ("/forget.md", "forget it"),
                          ("/tea.md", "I would like tea")]:  # fmt: skip
        ak.create_memory(store, ManagedMemoryEntry(actor_id="a", path=path, content=content))
    assert paths(workspace, store, "don't forget") == ["/forget.md"]
    assert paths(workspace, store, "would travel") == ["/tea.md"]


def test_a_deleted_store_leaves_nothing_behind(
    workspace: WorkspaceClient, dbx_server: ServerProcess
) -> None:
    ak = workspace.agent_kit
    store_id = new_store_id()
    name = ak.create_memory_store(ManagedMemoryStore(), store_id).name
    entry = ManagedMemoryEntry(actor_id="a", path="/x", content="comet")
    ak.create_memory(name, entry, managed_memory_entry_id="e1")
    assert index_rows(dbx_server, store_id) == 1
    ak.delete_memory_store(name)
    with pytest.raises(NotFound):
        paths(workspace, name, "comet")
    assert index_rows(dbx_server, store_id) == 0  # the index forgot the store with it
    # The same ids again: the old text must not find the new entry.
    ak.create_memory_store(ManagedMemoryStore(), store_id)
    entry = ManagedMemoryEntry(actor_id="a", path="/x", content="asteroid")
    ak.create_memory(name, entry, managed_memory_entry_id="e1")
    try:
        assert paths(workspace, name, "comet") == []
        assert paths(workspace, name, "asteroid") == ["/x"]
    finally:
        ak.delete_memory_store(name)
