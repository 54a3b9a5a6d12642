"""``entries:search`` through databricks-sdk: the search index follows every write at once.

Each entry write (create, update, delete, store delete) updates the index in its own
transaction (``memfs.server.search``, kind ``databricks``), so a search right after it sees the
new text and never the old. The scope is one actor: a session narrows it to that session (no
session-less entries), ``path_prefix`` to a plain string prefix; results are best first.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import httpx
import psycopg
import pytest
from databricks.sdk import WorkspaceClient
from databricks.sdk.common.types.fieldmask import FieldMask
from databricks.sdk.errors import InvalidParameterValue, NotFound
from databricks.sdk.service.agentkit import ManagedMemoryEntry, ManagedMemoryStore

from kit.databricks import API, Workspace
from kit.servers import ServerProcess
from memfs.api.config import ClientConfig, Secret
from memfs.api.databricks.client import DatabricksClient
from memfs.api.databricks.store import DatabricksStore

from .helpers import new_store_id


def paths(workspace: WorkspaceClient, store: str, query: str, **scope: str) -> list[str]:
    results = workspace.agent_kit.search_memories(store, scope.pop("actor_id", "a"), query, **scope)
    return [r.managed_memory_entry.path for r in results]


@pytest.fixture
def space(dbx_server: ServerProcess) -> Iterator[Workspace]:
    """The server's Databricks API over plain HTTP (for bodies the SDK cannot send)."""
    with Workspace(dbx_server) as workspace:
        yield workspace


@pytest.fixture
def memory_stores(dbx_server: ServerProcess) -> Iterator[httpx.Client]:
    """The same server's Memory Stores API."""
    headers = {"x-api-key": dbx_server.api_key, "anthropic-version": "2023-06-01"}
    with httpx.Client(base_url=dbx_server.base_url, headers=headers, timeout=30) as client:
        yield client


def search_scores(space: Workspace, store: str, query: str, **scope: Any) -> dict[str, float]:
    """ "session:path" -> score of ``entries:search`` (body fields as given, extensions too)."""
    body = {"actor_id": "a", "query": query, "page_size": 100, **scope}
    answer = space.http.post(f"{API}/{store}/entries:search", json=body)
    assert answer.status_code == 200, answer.text
    entries = [(hit["managed_memory_entry"], hit["score"]) for hit in answer.json()["results"]]
    return {f"{entry.get('session_id', '')}:{entry['path']}": score for entry, score in entries}


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
    configuration does (``memfs.contract.search_words.STOP_WORDS``): "don" and "t" of "don't" are
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


def test_a_score_depends_on_its_own_scope_only(
    space: Workspace, memory_stores: httpx.Client
) -> None:
    """Search statistics are counted within the search's scope: the score of a word in one
    store (one actor, one session, or none) is the same whether or not other stores, actors,
    sessions or the other API hold it many times, so a score reveals nothing about them."""

    def ms_store() -> str:
        answer = memory_stores.post("/v1/memory_stores", json={"name": "oracle"})
        assert answer.status_code == 200, answer.text
        return str(answer.json()["id"])

    def remember(store: str, path: str, content: str) -> None:
        answer = memory_stores.post(
            f"/v1/memory_stores/{store}/memories", json={"path": path, "content": content}
        )
        assert answer.status_code == 200, answer.text

    def ms_scores(store: str) -> dict[str, float]:
        answer = memory_stores.post(
            f"/v1/memory_stores/{store}/memfs/search", json={"query": "okapi", "limit": 100}
        )
        assert answer.status_code == 200, answer.text
        return {hit["memory"]["path"]: hit["score"] for hit in answer.json()["data"]}

    mine, theirs = ms_store(), ms_store()
    dbx, other_dbx = space.create_store(), space.create_store()
    texts = {"/okapi.md": "the okapi lives in the forest", "/zebra.md": "a zebra", "/x.md": "x"}
    for path, content in texts.items():
        remember(mine, path, content)
        space.put(dbx, path, content, actor="a")
        space.put(dbx, path, content, actor="a", session="s1")

    def everything() -> list[dict[str, float]]:
        return [
            ms_scores(mine),
            search_scores(space, dbx, "okapi", memfs_session_less=True),
            search_scores(space, dbx, "okapi", session_id="s1"),
        ]

    alone = everything()
    assert [list(scores) for scores in alone] == [["/okapi.md"], [":/okapi.md"], ["s1:/okapi.md"]]
    for i in range(12):  # the word, many times, everywhere but in the scopes searched
        remember(theirs, f"/{i}.md", "okapi okapi")
        space.put(other_dbx, f"/{i}.md", "okapi okapi", actor="a")
        space.put(dbx, f"/{i}.md", "okapi okapi", actor="b")
        space.put(dbx, f"/{i}.md", "okapi okapi", actor="a", session="s2")
    assert everything() == alone
    assert len(search_scores(space, dbx, "okapi")) == 1 + 1 + 12  # the whole actor: every session


async def test_a_session_less_search_finds_what_ranks_below_100_session_entries(
    space: Workspace, dbx_server: ServerProcess
) -> None:
    """Without a session a mount shows the actor's session-less entries; its search asks the
    server for them alone (``memfs_session_less``), so one that ranks below more than 100 of
    the actor's session entries is still found."""
    store = space.create_store()
    for i in range(101):
        space.put(store, f"/s/{i}.md", "okapi okapi okapi", actor="a", session=f"s{i % 3}")
    space.put(store, "/mine.md", "an okapi among many other words of a long text", actor="a")
    config = ClientConfig(
        api_key=Secret(dbx_server.api_key), base_url=dbx_server.base_url, auth_scheme="bearer"
    )
    async with DatabricksClient(config) as client:
        plain = DatabricksStore(client, store, "a")
        assert await plain.offers_search()
        assert [hit.path for hit in await plain.search("okapi")] == ["/mine.md"]
        session = DatabricksStore(client, store, "a", "s1")
        assert len(await session.search("okapi", limit=100)) == 34
    assert list(search_scores(space, store, "okapi", memfs_session_less=True)) == [":/mine.md"]
    for bad in ({"memfs_session_less": "yes"}, {"memfs_session_less": True, "session_id": "s1"}):
        answer = space.http.post(
            f"{API}/{store}/entries:search", json={"actor_id": "a", "query": "okapi", **bad}
        )
        assert answer.status_code == 400, answer.text
        assert "memfs_session_less" in answer.json()["message"]
