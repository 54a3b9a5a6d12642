"""The local search of a store without server-side search (``memfs.search.engine``), FUSE-free.

``LocalSearch`` on a ``FakeStore`` (which, like the hosted API, offers no search): the first
search fetches the store in ``view=full`` pages, later ones only the store's recent changes;
query rules (every word quoted and OR-ed, never a syntax error), ranking, the best line, the
text format.
"""

from __future__ import annotations

import itertools

import pytest

from kit.fake_store import FakeStore
from memfs.core.fetch.cache import ContentCache
from memfs.search.engine import (
    Hit,
    LocalSearch,
    StoreSearch,
    best_line,
    parse,
    relevance,
    render,
)
from memfs.search.index import SearchIndex, match_expression


def paths_of(hits: list[Hit]) -> list[str]:
    return [hit.path for hit in hits]


@pytest.mark.parametrize(
    "query",
    ['"', "a AND", "NOT", "x*", "(", 'title:"x"', "NEAR(a b)", "^", "-", "'", "a OR OR b", "💡"],
)
def test_no_input_is_a_syntax_error(query: str) -> None:
    index = SearchIndex()
    index.put("mem_1", "/a.md", "a b x title near", sha="s1")
    index.search(query)  # never raises


def test_query_rules() -> None:
    assert match_expression("Alpha beta, alpha!") == '"Alpha" OR "beta"'  # FTS5 folds case
    assert match_expression("how does she like to be contacted") == '"like" OR "contacted"'
    assert match_expression("to be") == '"to" OR "be"'  # nothing but function words: kept
    assert match_expression("  ..  ") is None
    assert SearchIndex().search("   ") == []


def test_ranking_paths_descriptions_and_prefix() -> None:
    index = SearchIndex()
    index.put("mem_1", "/notes/cooking.md", "pasta with tomato\nand basil", sha="1")
    index.put("mem_2", "/notes/garden.md", "tomato plants need sun\ntomato tomato", sha="2")
    index.put("mem_3", "/work/todo.md", "nothing here", sha="3", description="tomato soup")
    found = index.search("tomato")
    assert {hit.path for hit in found} == {"/notes/cooking.md", "/notes/garden.md", "/work/todo.md"}
    assert found[0].path == "/notes/garden.md"  # most occurrences in a short text
    assert all(a.score >= b.score for a, b in itertools.pairwise(found))
    assert [h.path for h in index.search("tomato", path_prefix="/work/")] == ["/work/todo.md"]
    assert [h.path for h in index.search("tomato", limit=1)] == ["/notes/garden.md"]
    assert [h.path for h in index.search("searching gardens")] == ["/notes/garden.md"]  # stems
    index.move("mem_2", "/old/garden.md")
    index.remove("mem_1")
    assert {h.path for h in index.search("tomato")} == {"/old/garden.md", "/work/todo.md"}


async def test_a_reply_without_the_query_s_words_follows_the_turn_that_has_them(
    store: FakeStore,
) -> None:
    """Ranking in context, as the server's (``memfs.contract.search_context``): the reply to a
    matching turn is answered right after it, showing its first line; a note that matched
    nothing is not, however many there are; a neighbour outside ``path_prefix`` is not."""
    store.seed("/chat/turn_001.md", "What did you take away from the book about gardening?")
    store.seed("/chat/turn_002.md", "\n  \nIt taught me self-acceptance.\nAnd patience.\n")
    store.seed("/chat/turn_003.md", "Shall we meet on Sunday?")
    store.seed("/chat/turn_004.md", "Yes, at ten.")
    store.seed("/notes/todo.md", "buy milk\ncall the plumber")
    store.seed("/notes/seeds.md", "gardening: order seeds")
    search = LocalSearch(store)
    hits = await search.search("book gardening")
    assert paths_of(hits)[:2] == ["/chat/turn_001.md", "/chat/turn_002.md"]
    assert hits[1].line == "It taught me self-acceptance."  # no word matched: the first line
    assert 0 < hits[1].score < hits[0].score
    assert "/notes/todo.md" not in paths_of(hits)  # in no series: no neighbour lends it score
    assert "/chat/turn_004.md" not in paths_of(hits)  # three places from the match
    assert set(paths_of(hits)) == {
        "/chat/turn_001.md",
        "/chat/turn_002.md",
        "/chat/turn_003.md",
        "/notes/seeds.md",
    }
    found = await search.search("book gardening", path_prefix="/chat/turn_001")
    assert paths_of(found) == ["/chat/turn_001.md"]
    assert paths_of(await search.search("book gardening", limit=1)) == ["/chat/turn_001.md"]


def test_a_match_in_the_best_match_s_folder_ranks_above_an_equal_one_elsewhere() -> None:
    """Two memories match equally; the one in the folder of the best match comes first (by
    path alone it would not: ``/a-work/`` sorts first)."""
    index = SearchIndex()
    index.put("best", "/z_garden/tomatoes.md", "tomato soil tomato", sha="1")
    index.put("there", "/z_garden/beds.md", "soil", sha="2")
    index.put("elsewhere", "/a-work/beds.md", "soil", sha="3")
    for n in range(5):
        index.put(f"other{n}", f"/misc/other{n}.md", "nothing to see", sha=f"o{n}")
    hits = index.search("tomato soil")
    assert [hit.memory_id for hit in hits] == ["best", "there", "elsewhere"]
    assert hits[1].score > hits[2].score


def test_a_question_lends_its_reply_more_than_a_statement_lends_its_neighbour() -> None:
    """As the server's: the reply after a turn that asks ranks above the turn after one that
    states a little better; known from the content at indexing, and kept by a move."""
    index = SearchIndex()
    index.put("a1", "/a/turn_1.md", "I walk the dog, a big dog.", sha="1")
    index.put("a2", "/a/turn_2.md", "Lovely, mine sleeps all day.", sha="2")
    index.put("b1", "/b/turn_1.md", "Where do you walk the dog?\n", sha="3")
    index.put("b2", "/b/turn_2.md", "Along the river, past the mill.", sha="4")
    assert [hit.memory_id for hit in index.search("walk dog")] == ["a1", "b1", "b2", "a2"]
    index.move("b1", "/b/turn_0.md")  # re-indexed under its new name: still asks
    assert [hit.memory_id for hit in index.search("walk dog")] == ["a1", "b1", "b2", "a2"]


def test_best_line() -> None:
    content = "# Title\n\nthe cat sat\nthe cat sat on the mat\n\tmat\n"
    assert best_line(content, "mat cat") == "the cat sat on the mat"
    assert best_line(content, "dog") == "# Title"  # no line matches: the first one
    assert best_line("", "dog") == ""
    assert len(best_line("word " * 100, "word")) == 200


def test_text_format_round_trip() -> None:
    hits = [
        Hit("/a b.md", 3.25, "a\tdescription", "mem_1", "line\twith tab"),
        Hit("/c.md", 1.3, "", "mem_2", ""),
    ]
    text = render(hits)
    assert text == "/a b.md\t100\ta description\tline with tab\n/c.md\t40\t\t\n"
    assert [line.split("\t")[0] for line in text.splitlines()] == ["/a b.md", "/c.md"]
    assert parse(text) == [
        Hit("/a b.md", 100, "a description", "", "line with tab"),
        Hit("/c.md", 40, "", "", ""),
    ]
    assert render(parse(text)) == text  # what `memfs search` prints from a mount's file


@pytest.mark.parametrize(
    ("scores", "shown"),
    [
        ([9.028e-07, 4.514e-07, 1e-12], [100, 50, 1]),  # a local index's BM25 floor
        ([0.0325, 0.0164], [100, 50]),  # reciprocal rank fusion
        ([7.31], [100]),  # one hit is the best, whatever its score
        ([0.0, 0.0], [0, 0]),  # an answer without scores (Databricks' older one)
        ([2.0, 0.0, -1.0], [100, 0, 0]),
        ([float("nan"), 1.0], [0, 100]),
        ([], []),
    ],
)
def test_relevance_is_a_percentage_of_the_best(scores: list[float], shown: list[int]) -> None:
    hits = [Hit(f"/{n}.md", score) for n, score in enumerate(scores)]
    assert relevance(hits) == shown
    assert [line.split("\t")[1] for line in render(hits).splitlines()] == list(map(str, shown))


async def test_first_search_fetches_the_store_in_pages(store: FakeStore) -> None:
    for n in range(45):
        store.seed(f"/deep/dir{n % 3}/note{n}.md", f"note {n}\nkeyword{n}\n")
    store.seed("/top.md", "the keyword7 again")
    search = LocalSearch(store)
    hits = await search.search("keyword7")
    # the two matches first; note7's neighbours in its series (note1 … note13) follow
    assert sorted(paths_of(hits)[:2]) == ["/deep/dir1/note7.md", "/top.md"]
    assert hits[0].line in ("keyword7", "the keyword7 again")
    assert store.calls["read"] == 0  # contents came with the listing pages
    pages = store.calls["list_directory_page"]
    assert pages == 1 + 1 + 3 * 1  # root, /deep/, each dir of 15 memories: one page of 20
    # a second search asks only for the recent changes
    await search.search("keyword8")
    assert store.calls["list_directory_page"] == pages
    assert store.calls["recent_changes"] == 2  # the build's starting point, this refresh
    assert search.builds == 1


async def test_changes_are_seen_by_the_next_search(store: FakeStore) -> None:
    kept = store.seed("/kept.md", "apple")
    moved = store.seed("/moved.md", "banana")
    edited = store.seed("/edited.md", "cherry")
    gone = store.seed("/gone.md", "apple banana cherry")
    search = LocalSearch(store)
    assert sorted(paths_of(await search.search("apple"))) == ["/gone.md", "/kept.md"]
    store.edit(moved.id, path="/dir/moved.md")
    store.edit(edited.id, content="durian")
    store.remove(gone.id)
    store.seed("/new.md", "durian apple")
    reads = store.calls["read"]
    assert sorted(paths_of(await search.search("apple banana cherry durian"))) == [
        "/dir/moved.md",
        "/edited.md",
        "/kept.md",
        "/new.md",
    ]
    assert paths_of(await search.search("cherry")) == []
    assert store.calls["read"] == reads + 2  # the edited and the new memory; the move is free
    assert search.builds == 1
    store.edit(kept.id, content="fig")
    assert paths_of(await search.search("fig")) == ["/kept.md"]


async def test_a_gap_fetches_the_store_again(store: FakeStore) -> None:
    first = store.seed("/first.md", "one")
    search = LocalSearch(store)
    await search.search("one")
    for n in range(120):  # more than one page of changes
        store.seed(f"/n{n}.md", f"two {n}")
    store.remove(first.id)
    hits = await search.search("one two")
    assert len(hits) == 10 and "/first.md" not in paths_of(hits)
    assert search.builds == 2


async def test_store_search_asks_the_store_once_then_searches_locally(store: FakeStore) -> None:
    store.seed("/a.md", "hello world")
    flushed = []

    async def before() -> None:
        flushed.append(1)

    search = StoreSearch(store, before=before)
    assert paths_of(await search.search("hello")) == ["/a.md"]
    assert paths_of(await search.search("world")) == ["/a.md"]
    assert search.by_server is False
    assert len(flushed) == 2


async def test_the_mounts_content_cache_is_shared(store: FakeStore) -> None:
    first = store.seed("/a.md", "alpha")
    contents = ContentCache()
    search = LocalSearch(store, contents)
    await search.search("alpha")
    assert contents.get(first.content_sha256) == b"alpha"  # a hit can be read at no cost
    edited = store.edit(first.id, content="beta")
    contents.put(edited.content_sha256, b"beta")  # as the mount's own upload leaves it
    assert paths_of(await search.search("beta")) == ["/a.md"]
    assert store.calls["read"] == 0
