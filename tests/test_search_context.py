"""Ranking in context (``memfs.contract.search_context``) on small made-up stores."""

from __future__ import annotations

import pytest

from memfs.contract.search_context import (
    CONTEXT_DEPTH,
    FOLDER_WEIGHT,
    NEIGHBOUR_WEIGHTS,
    REPLY_WEIGHT,
    asks,
    context_folders,
    folder_of,
    in_context,
    series_of,
)


def ranked(scores: dict[str, float], store: dict[str, str]) -> list[str]:
    """The memories of ``store`` (id -> path) best first after ``in_context``."""
    paths = {doc: store[doc] for doc in scores}
    context = in_context(scores, paths, store.items())
    return sorted(context, key=lambda doc: (-context[doc], doc))


def test_folders_and_series() -> None:
    assert folder_of("/a/b.md") == "/a/"
    assert folder_of("/b.md") == "/"
    assert folder_of("b.md") == "/"
    assert series_of("/chat/turn_012.md") == ("/chat/", "turn_", ".md", 12)
    assert series_of("/log/2024-05-01.md") == ("/log/", "2024-05-", ".md", 1)
    assert series_of("/notes/todo.md") is None


def test_a_reply_without_the_query_s_words_follows_the_turn_that_has_them() -> None:
    """ "What did you take away from the book?" then "It taught me self-acceptance": the reply
    shares no word with the question but is returned, next to the turn that matched, and
    above a weaker match in another conversation."""
    store = {
        "q": "/s1/turn_001.md",
        "reply": "/s1/turn_002.md",
        "next": "/s1/turn_003.md",
        "unrelated": "/s1/turn_004.md",
        "other": "/s2/turn_001.md",
    }
    order = ranked({"q": 8.0, "other": 4.0}, store)
    assert order.index("q") < order.index("reply") < order.index("other")
    # three places on in the series: in the folder, but no neighbour matched: not returned
    assert "unrelated" not in order


def test_neighbours_are_by_number_and_two_steps_at_most() -> None:
    """Steps are places in the series' numeric order (a gap left by a deleted memory is no
    step)."""
    store = {f"t{n}": f"/c/turn_{n}.md" for n in (8, 9, 10, 11, 12, 13)}
    store["t2"] = "/c/turn_2.md"  # after a gap, still two places from turn_9
    context = in_context({"t10": 1.0}, {"t10": "/c/turn_10.md"}, store.items())
    one, two = NEIGHBOUR_WEIGHTS
    # turn_9 and turn_11 are one step from turn_10 (not "turn_1" and "turn_11" by spelling)
    assert context["t9"] == pytest.approx(one + FOLDER_WEIGHT)
    assert context["t11"] == pytest.approx(one + FOLDER_WEIGHT)
    assert context["t8"] == pytest.approx(two + FOLDER_WEIGHT)
    assert context["t12"] == pytest.approx(two + FOLDER_WEIGHT)
    assert "t13" not in context
    assert "t2" not in context  # three places from turn_10
    assert context["t10"] == pytest.approx(1.0 + FOLDER_WEIGHT)


def test_notes_outside_a_series_lend_each_other_nothing_but_their_folder() -> None:
    """Two equal matches: the one in the folder that holds the best match ranks first; notes
    that matched nothing are not returned, however good their folder."""
    store = {
        "best": "/garden/tomatoes.md",
        "same-folder": "/garden/soil.md",
        "elsewhere": "/work/soil.md",
        "unmatched": "/garden/budget.md",
    }
    store["unmatched-elsewhere"] = "/work/plan.md"  # a folder's unscored memory lends it nothing
    order = ranked({"best": 9.0, "same-folder": 3.0, "elsewhere": 3.0}, store)
    assert order == ["best", "same-folder", "elsewhere"]


def test_series_are_told_apart_by_the_rest_of_the_name() -> None:
    store = {"a1": "/x/a_1.md", "a2": "/x/a_2.md", "b2": "/x/b_2.md", "a2txt": "/x/a_2.txt"}
    context = in_context({"a1": 1.0}, {"a1": "/x/a_1.md"}, store.items())
    assert "a2" in context
    assert "b2" not in context and "a2txt" not in context


def test_only_the_best_memories_folders_are_read() -> None:
    scores = {f"m{n}": float(1000 - n) for n in range(CONTEXT_DEPTH + 1)}
    paths = {doc: f"/f{n}/note.md" for n, doc in enumerate(scores)}
    folders = context_folders(scores, paths)
    assert len(folders) == CONTEXT_DEPTH
    assert f"/f{CONTEXT_DEPTH}/" not in folders  # the weakest match's folder


def test_nothing_scored_is_nothing_answered() -> None:
    assert in_context({}, {}, [("a", "/c/turn_1.md")]) == {}
    assert in_context({"a": 0.0}, {"a": "/a.md"}, []) == {"a": 0.0}


def test_a_question_lends_its_reply_the_reply_weight() -> None:
    """The memory after one that asks gains ``REPLY_WEIGHT`` of it, where the memory before it
    (not a reply) and the neighbours of a statement gain ``NEIGHBOUR_WEIGHTS[0]``."""
    store = {f"q{n}": f"/q/turn_{n}.md" for n in (1, 2, 3)}
    store |= {f"s{n}": f"/s/turn_{n}.md" for n in (1, 2, 3)}
    scores = {"q2": 1.0, "s2": 1.0}
    paths = {doc: store[doc] for doc in scores}
    context = in_context(scores, paths, store.items(), questions={"q2"})
    assert context["q3"] == pytest.approx(REPLY_WEIGHT + FOLDER_WEIGHT)
    assert context["q1"] == pytest.approx(NEIGHBOUR_WEIGHTS[0] + FOLDER_WEIGHT)
    assert context["s3"] == pytest.approx(NEIGHBOUR_WEIGHTS[0] + FOLDER_WEIGHT)
    assert NEIGHBOUR_WEIGHTS[0] < REPLY_WEIGHT


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Where do you walk the dog?", True),
        ("Where?\n\n \t", True),
        ("Is it? No, it is not.", False),
        ("What is it?)", False),
        ("Is it?\u00a0", False),  # only the white space the servers' SQL trims
        ("", False),
    ],
)
def test_a_memory_asks_when_its_text_ends_with_a_question_mark(text: str, expected: bool) -> None:
    assert asks(text) is expected


def test_scores_are_relative_to_the_best_and_neighbours_add_to_a_memory_s_own() -> None:
    """Whatever the ranker's scale, the best match's own part is 1; a scored memory next to
    another keeps its own score and gains its neighbour's share; a scored memory missing from
    ``members`` is still read in its folder."""
    store = {"t1": "/c/turn_1.md", "t2": "/c/turn_2.md", "t3": "/c/turn_3.md"}
    paths = {"t1": store["t1"], "t2": store["t2"]}
    context = in_context({"t1": 8.0, "t2": 4.0}, paths, [("t3", store["t3"])])
    one, two = NEIGHBOUR_WEIGHTS
    assert context["t1"] == pytest.approx(1.0 + one * 0.5 + FOLDER_WEIGHT)
    assert context["t2"] == pytest.approx(0.5 + one * 1.0 + FOLDER_WEIGHT)
    assert context["t3"] == pytest.approx(one * 0.5 + two * 1.0 + FOLDER_WEIGHT)
