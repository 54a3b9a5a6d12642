"""Search: the Memory Stores extension endpoint and the engine (``memfs.server.search``) on
SQLite and PostgreSQL: found right after a write, updates/deletes keep the index right, scopes,
hostile queries, validation, the capability, and the migration's backfill."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from memfs.contract.models import Actor
from memfs.server.backends.postgres import PostgresStorage
from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.backends.storage import SqlStorage, Storage
from memfs.server.databricks.storage import EntryPatch, NewEntry
from memfs.server.search import SearchDocument, SearchScope
from memfs.server.search.semantic import fuse
from memfs.server.search.terms import content_terms

from .helpers import MakeMemory, assert_error, back_to_step

ACTOR = Actor("api_actor", "apikey_test")


def search_url(store_id: str) -> str:
    return f"/v1/memory_stores/{store_id}/memfs/search"


async def search(client: httpx.AsyncClient, store_id: str, query: str, **body: Any) -> list[Any]:
    r = await client.post(search_url(store_id), json={"query": query, **body})
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    assert answer["type"] == "memfs_search_results"
    scores = [hit["score"] for hit in answer["data"]]
    assert scores == sorted(scores, reverse=True)
    return [hit["memory"]["path"] for hit in answer["data"]]


async def test_a_memory_is_found_right_after_it_is_written(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory
) -> None:
    await mem("/notes/coffee.md", "I drink espresso every morning, never decaf.")
    await mem("/notes/tea.md", "Green tea in the afternoon.")
    await mem("/notes/both.md", "espresso espresso espresso, and tea")
    r = await client.post(search_url(store_id), json={"query": "espresso"})
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert [hit["memory"]["path"] for hit in data] == ["/notes/both.md", "/notes/coffee.md"]
    memory = data[1]["memory"]
    assert memory["content"] == "I drink espresso every morning, never decaf."
    assert memory["type"] == "memory" and memory["memory_store_id"] == store_id
    assert all(isinstance(hit["score"], float) and hit["score"] > 0 for hit in data)


async def test_words_match_any_of_several_and_by_stem_and_path(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory
) -> None:
    await mem("/people/alice.md", "She runs marathons.")
    await mem("/projects/gardening.md", "Tomatoes need sun.")
    assert await search(client, store_id, "running") == ["/people/alice.md"]
    assert await search(client, store_id, "alice") == ["/people/alice.md"]
    assert set(await search(client, store_id, "tomatoes alice")) == {
        "/people/alice.md",
        "/projects/gardening.md",
    }


async def test_function_words_do_not_rank(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory
) -> None:
    await mem("/chatter.md", "She said to me that she would be there, to be sure, and she was.")
    await mem("/contact.md", "Prefers being contacted by email.")
    found = await search(client, store_id, "how does she like to be contacted")
    assert found[0] == "/contact.md"


def test_a_query_of_function_words_only_keeps_them() -> None:
    assert content_terms(["how", "She", "contacted"]) == ["contacted"]
    assert content_terms(["to", "be"]) == ["to", "be"]


async def test_updates_deletes_and_store_deletion_keep_the_index_right(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory
) -> None:
    memory = await mem("/a.md", "the first draft mentions zebras")
    url = f"/v1/memory_stores/{store_id}/memories/{memory['id']}"
    r = await client.patch(url, json={"content": "now about giraffes", "path": "/renamed.md"})
    assert r.status_code == 200, r.text
    assert await search(client, store_id, "zebras") == []
    assert await search(client, store_id, "giraffes") == ["/renamed.md"]
    assert await search(client, store_id, "renamed") == ["/renamed.md"]
    r = await client.delete(url)
    assert r.status_code == 204 or r.status_code == 200, r.text
    assert await search(client, store_id, "giraffes") == []
    await mem("/b.md", "giraffes again")
    r = await client.delete(f"/v1/memory_stores/{store_id}")
    assert r.status_code in (200, 204), r.text
    r = await client.post(search_url(store_id), json={"query": "giraffes"})
    assert_error(r, 404, "not_found_error")


async def test_a_search_sees_only_its_store_and_path_prefix(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory
) -> None:
    r = await client.post("/v1/memory_stores", json={"name": "Other"})
    other = r.json()["id"]
    r = await client.post(
        f"/v1/memory_stores/{other}/memories", json={"path": "/x.md", "content": "walrus"}
    )
    assert r.status_code == 200, r.text
    await mem("/zoo/walrus.md", "a walrus")
    await mem("/sea/walrus.md", "another walrus")
    assert sorted(await search(client, store_id, "walrus")) == ["/sea/walrus.md", "/zoo/walrus.md"]
    assert await search(client, store_id, "walrus", path_prefix="/zoo/") == ["/zoo/walrus.md"]
    assert await search(client, store_id, "walrus", path_prefix="/zo") == ["/zoo/walrus.md"]
    assert await search(client, store_id, "walrus", path_prefix="/z%") == []  # not a pattern
    assert await search(client, store_id, "walrus", path_prefix="/_oo/") == []
    assert await search(client, other, "walrus") == ["/x.md"]
    assert len(await search(client, store_id, "walrus", limit=1)) == 1


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '"unbalanced quote',
        "*",
        "wal*",
        "NEAR(walrus",
        "NEAR(a b, 2)",
        "-walrus",
        "walrus -seal",
        "walrus AND",
        "OR OR",
        "NOT",
        "(",
        "content:walrus",
        "^walrus",
        "'; DROP TABLE memories; --",
        "100%",
        "?",
        "\\",
        "🦭 walrus",
        "the",
    ],
)
async def test_hostile_queries_are_plain_words(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory, query: str
) -> None:
    await mem("/walrus.md", "a walrus on the ice")
    found = await search(client, store_id, query)
    assert found in ([], ["/walrus.md"])
    if "walrus" in query:
        assert found == ["/walrus.md"]
    assert await search(client, store_id, "walrus") == ["/walrus.md"]  # nothing was dropped


async def test_diacritics_and_case_do_not_matter(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory
) -> None:
    await mem("/cafe.md", "Rendez-vous au Café de Flore")
    await mem("/naive.md", "a naive plan")
    assert await search(client, store_id, "cafe") == ["/cafe.md"]
    assert await search(client, store_id, "CAFÉ") == ["/cafe.md"]
    assert await search(client, store_id, "naïve") == ["/naive.md"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"query": ""}, "query: must not be empty"),
        ({"query": "   \n"}, "query: must not be empty"),
        ({}, "query: required"),
        ({"query": 3}, "query: expected a string"),
        ({"query": "x" * 5000}, "query: at most"),
        ({"query": "x", "limit": 0}, "limit: must be between 1 and 100"),
        ({"query": "x", "limit": 101}, "limit: must be between 1 and 100"),
        ({"query": "x", "limit": True}, "limit: expected an integer"),
        ({"query": "x", "path_prefix": "notes/"}, "path_prefix: must start with '/'"),
        ({"query": "x", "path_prefix": 7}, "path_prefix: expected a string"),
        ({"query": "x", "page": 2}, "page"),
    ],
)
async def test_bad_requests_are_400(
    client: httpx.AsyncClient, store_id: str, body: dict[str, Any], message: str
) -> None:
    r = await client.post(search_url(store_id), json=body)
    assert_error(r, 400, "invalid_request_error", message)


async def test_a_lone_surrogate_is_400(client: httpx.AsyncClient, store_id: str) -> None:
    r = await client.post(
        search_url(store_id),
        content=b'{"query": "\\ud800"}',
        headers={"content-type": "application/json"},
    )
    assert_error(r, 400, "invalid_request_error", "query: not valid unicode")


async def test_unknown_store_is_404(client: httpx.AsyncClient) -> None:
    r = await client.post(search_url("memstore_nope"), json={"query": "x"})
    assert_error(r, 404, "not_found_error")


async def test_capabilities_announce_search(client: httpx.AsyncClient) -> None:
    r = await client.get("/v1/memfs/capabilities")
    assert r.status_code == 200, r.text
    assert r.json()["search"] is True
    assert r.json()["search_path"] == "/v1/memory_stores/{store_id}/memfs/search"


def _doc(doc_id: str, content: str, actor: str, session: str | None) -> SearchDocument:
    return SearchDocument(
        "databricks", "store1", doc_id, f"/{doc_id}.md", content, "", actor, session
    )


async def test_the_interface_scopes_by_kind_actor_and_session(storage: Storage) -> None:
    """What helper dbx-server relies on: the contract's session rule, documents of the other
    kind never seen, description words found, remove and remove_store."""
    assert isinstance(storage, SqlStorage)
    index = storage.search
    docs = [
        _doc("a-none", "otter", "alice", None),
        _doc("a-s1", "otter", "alice", "s1"),
        _doc("a-s2", "otter", "alice", "s2"),
        _doc("b-none", "otter", "bob", None),
    ]

    def write(tx: Any) -> None:
        for doc in docs:
            index.index(tx, doc)
        index.index(tx, SearchDocument("memory_stores", "store1", "m1", "/m.md", "otter"))
        index.index(
            tx, SearchDocument("databricks", "store1", "d", "/d.md", "", "river otter", "carol")
        )

    await storage._write(write)

    def found(**scope: Any) -> Any:
        async def run() -> set[str]:
            s = SearchScope("databricks", "store1", **scope)
            hits = await storage._read(lambda tx: index.search(tx, s, "otter", 10))
            return {hit.doc_id for hit in hits}

        return run()

    assert await found(actor_id="alice") == {"a-none", "a-s1", "a-s2"}
    assert await found(actor_id="alice", session_id="s1") == {"a-s1"}
    assert await found(actor_id="bob", session_id="s1") == set()
    assert await found(actor_id="carol") == {"d"}
    assert await found() == {"a-none", "a-s1", "a-s2", "b-none", "d"}
    await storage._write(lambda tx: index.remove(tx, "databricks", "store1", "a-s1"))
    assert await found(actor_id="alice") == {"a-none", "a-s2"}
    await storage._write(lambda tx: index.remove_store(tx, "databricks", "store1"))
    assert await found() == set()
    hits = await storage._read(
        lambda tx: index.search(tx, SearchScope("memory_stores", "store1"), "otter", 10)
    )
    assert [hit.doc_id for hit in hits] == ["m1"]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_the_migration_indexes_existing_memories(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = request.getfixturevalue("pg_url") if backend == "postgres" else None

    async def open_storage() -> SqlStorage:
        if url is not None:
            return await PostgresStorage.open(url, pool_size=2)
        return await SqliteStorage.open(tmp_path / "old.db")

    storage = await open_storage()
    store = await storage.create_store(name="old", description="", metadata={})
    await storage.create_memory(store.id, path="/old/notes.md", content="an okapi", actor=ACTOR)

    await storage._write(back_to_step(2, backend))
    await storage.aclose()
    storage = await open_storage()
    try:
        for query in ("okapi", "notes"):
            hits = await storage.search_memories(store.id, query, limit=5, path_prefix=None)
            assert [memory.path for memory, _ in hits] == ["/old/notes.md"]
    finally:
        await storage.aclose()


def test_fusion_weighs_scores_not_ranks() -> None:
    """BM25 over the best BM25 (0.6) plus the relative cosine (0.4): agreement wins, and a
    document far behind in BM25 stays behind however close its rank."""
    fused = fuse([("a", 9.0), ("b", 5.0)], [("b", 0.9), ("c", 0.8)])
    assert sorted(fused, key=lambda doc: -fused[doc]) == ["b", "a", "c"]
    assert fused["b"] == pytest.approx(0.6 * 5 / 9 + 0.4 * 0.9)
    assert fused["a"] == pytest.approx(0.6)
    assert fuse([("a", 9.0), ("b", 0.9)], [])["b"] == pytest.approx(0.06)


def test_cosines_are_relative_to_the_scope_and_below_the_median_left_out() -> None:
    np = pytest.importorskip("numpy")
    from memfs.server.search.semantic import cosine_scores, to_bytes

    def unit(*xs: float) -> bytes:
        v = np.array(xs, dtype=np.float32)
        return to_bytes(v / np.linalg.norm(v))

    vectors = [("best", unit(1, 0)), ("mid", unit(1, 1)), ("far", unit(0, 1)), ("med", unit(1, 2))]
    scores = dict(cosine_scores(np.array([1, 0], dtype=np.float32), vectors, 10))
    assert scores["best"] == pytest.approx(1.0)
    assert 0 < scores["mid"] < 1
    assert "far" not in scores and "med" not in scores  # at or below the median cosine


def test_a_document_s_best_vector_is_its_cosine_and_broken_blobs_are_skipped() -> None:
    """A document stored as two vectors (two chunks) scores by the one nearer the query; a blob
    that holds no whole vector (written by another model's size) is left out, not misread."""
    np = pytest.importorskip("numpy")
    from memfs.server.search.semantic import cosine_scores, to_bytes

    def units(*rows: tuple[float, float]) -> bytes:
        v = np.array(rows, dtype=np.float32)
        return to_bytes(v / np.linalg.norm(v, axis=1, keepdims=True))

    vectors = [
        ("long", units((0, 1), (1, 0.1))),  # its second chunk is about the query
        ("short", units((1, 0.5))),
        ("far", units((0, 1))),
        ("other", units((-1, 1))),
        ("broken", units((1, 0))[:3]),
        ("empty", b""),
    ]
    scores = dict(cosine_scores(np.array([1, 0], dtype=np.float32), vectors, 10))
    assert list(scores) == ["long", "short"]
    assert scores["long"] == pytest.approx(1.0)


def test_a_long_document_is_embedded_in_two_chunks_cut_at_lines() -> None:
    from memfs.server.search.semantic import EMBED_CHARS, MAX_CHUNKS, document_chunks

    assert MAX_CHUNKS == 2
    assert document_chunks("a note", "short") == ("a note\nshort",)
    assert document_chunks("", "") == ("",)
    line = "x" * 99 + "\n"
    chunks = document_chunks("", line * 100)  # 10,000 characters
    assert len(chunks) == MAX_CHUNKS
    assert all(len(chunk) <= EMBED_CHARS for chunk in chunks)
    assert chunks[0].endswith("x") and chunks[1].startswith("\n")  # cut before a line break
    assert "".join(chunks) == (line * 100)[: len("".join(chunks))]
    unbroken = document_chunks("", "y" * 5000)
    assert [len(chunk) for chunk in unbroken] == [EMBED_CHARS, EMBED_CHARS]
    # white space alone is no chunk, however much of it there is
    assert document_chunks("", "z" * 10 + " " * 1_000_000) == ("z" * 10 + " " * (EMBED_CHARS - 10),)


async def test_the_kept_scope_counts_follow_every_write(tmp_path: Path) -> None:
    """SQLite keeps each scope's document count and token total (``search_scope_stats``) for
    BM25: after creates, updates, renames and deletes of both APIs, and a store delete, they
    are what the indexed documents add up to."""
    storage = await SqliteStorage.open(tmp_path / "s.db")
    try:
        store = await storage.create_store(name="s", description="", metadata={})
        one = await storage.create_memory(store.id, path="/a.md", content="a b", actor=ACTOR)
        await storage.create_memory(store.id, path="/b.md", content="c", actor=ACTOR)
        await storage.update_memory(
            store.id, one.id, content="a b c d e", path="/x/a.md", expected_sha256=None,
            actor=ACTOR,
        )  # fmt: skip
        dbx = storage.databricks
        for store_id in ("kept", "gone"):
            await dbx.create_store(store_id, description=None, creator="apikey_test")
        entries = [
            await dbx.create_entry(
                store_id, NewEntry(None, actor, session, "/n.md", "one two", None, "AGENT")
            )
            for store_id in ("kept", "gone")
            for actor in ("a", "b")
            for session in (None, "s1")
        ]
        await dbx.update_entry("kept", entries[0].id, EntryPatch({"description": "three four"}))
        await dbx.delete_entry("kept", entries[1].id)
        await dbx.delete_store("gone")
        await storage.delete_memory(store.id, (await storage.create_memory(
            store.id, path="/c.md", content="gone soon", actor=ACTOR)).id,
            expected_sha256=None, actor=ACTOR)  # fmt: skip

        def counts(tx: Any) -> tuple[list[Any], list[Any]]:
            kept = tx.execute(
                "SELECT kind, store_id, actor_id, session_key, docs, tokens "
                "FROM search_scope_stats WHERE docs <> 0 OR tokens <> 0 ORDER BY 1, 2, 3, 4"
            ).fetchall()
            summed = tx.execute(
                "SELECT kind, store_id, actor_id, coalesce(session_id, ''), count(*), "
                "sum(doc_len) FROM search_docs GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4"
            ).fetchall()
            return [tuple(row) for row in kept], [tuple(row) for row in summed]

        kept, summed = await storage._read(counts)
        assert kept == summed
        assert [(row[0], row[1], row[4]) for row in kept] == [
            ("databricks", "kept", 1), ("databricks", "kept", 1), ("databricks", "kept", 1),
            ("memory_stores", store.id, 2),
        ]  # fmt: skip
        assert kept[-1][5] == 5 + 3 + 1 + 2  # "a b c d e", "x a md", "c", "b md"
    finally:
        await storage.aclose()


async def test_a_dated_query_prefers_the_memory_that_speaks_of_that_week(storage: Storage) -> None:
    """On both backends, through the engine: two memories of the same words in folders of
    their own, the one written on 3 August about "last week" answers "the week before August
    3, 2023" first, though the other matches its words better (texts read by the backend)."""
    store = await storage.create_store(name="dated", description="", metadata={})
    await storage.create_memory(
        store.id,
        path="/may/log.md",
        content="9 May, 2023: a military memorial visit, the memorial with the kids",
        actor=ACTOR,
    )
    await storage.create_memory(
        store.id,
        path="/august/log.md",
        content="3 August, 2023: last week we had a meaningful day at a memorial",
        actor=ACTOR,
    )
    hits = await storage.search_memories(
        store.id, "memorial visit the week before August 3, 2023", limit=5, path_prefix=None
    )
    assert [memory.path for memory, _ in hits] == ["/august/log.md", "/may/log.md"]
    undated = await storage.search_memories(store.id, "memorial visit", limit=5, path_prefix=None)
    assert [memory.path for memory, _ in undated] == ["/may/log.md", "/august/log.md"]


async def test_a_question_lends_its_reply_more_than_a_statement_lends_its_neighbour(
    storage: Storage,
) -> None:
    """On both backends, through the engine: two conversations match the query in their first
    turn, the one that states a little better; the reply after the turn that asks (ending "?",
    then white space) ranks above the turn after the one that states, though neither reply
    holds a query word (the backend tells which candidates ask)."""
    store = await storage.create_store(name="replies", description="", metadata={})
    turns = {
        "/a/turn_1.md": "I walk the dog, a big dog.",
        "/a/turn_2.md": "Lovely, mine sleeps all day.",
        "/b/turn_1.md": "Where do you walk the dog?  \n\t",
        "/b/turn_2.md": "Along the river, past the mill.",
    }
    for path, content in turns.items():
        await storage.create_memory(store.id, path=path, content=content, actor=ACTOR)
    hits = await storage.search_memories(store.id, "walk dog", limit=5, path_prefix=None)
    assert [memory.path for memory, _ in hits] == [
        "/a/turn_1.md", "/b/turn_1.md", "/b/turn_2.md", "/a/turn_2.md"
    ]  # fmt: skip
