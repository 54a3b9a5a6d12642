"""The labelled search set (``tests/data/search_eval.json``) is what it claims to be.

The quality floors (``test_search_quality.py``) and ``python -m bench search`` mean something
only if the set holds: enough entries, actors and queries, every answer present, and the
paraphrase half genuinely avoiding its answers' words (checked mechanically here, not by eye).
"""

from __future__ import annotations

from collections import Counter

import pytest

from kit.search_eval import (
    EvalSet,
    answer_texts,
    content_words,
    load_eval_set,
    recall,
    reciprocal_rank,
    same_word,
    shared_words,
)
from memfs.contract.paths import validate_path


@pytest.fixture(scope="module")
def eval_set() -> EvalSet:
    return load_eval_set()


def test_sizes(eval_set: EvalSet) -> None:
    actors = Counter(e.actor_id for e in eval_set.entries)
    assert len(eval_set.entries) >= 200
    assert len(actors) >= 5 and min(actors.values()) >= 30, actors
    assert len(eval_set.queries) >= 40
    kinds = Counter(q.kind for q in eval_set.queries)
    assert set(kinds) == {"keyword", "paraphrase"}
    assert kinds["paraphrase"] >= len(eval_set.queries) / 2, kinds
    assert all(q.actor_id in actors for q in eval_set.queries)
    assert {q.actor_id for q in eval_set.queries} == set(actors)  # every actor is queried


def test_entries_are_valid_and_unique(eval_set: EvalSet) -> None:
    keys = Counter((e.actor_id, e.path) for e in eval_set.entries)
    assert [k for k, n in keys.items() if n > 1] == []
    for entry in eval_set.entries:
        validate_path(entry.path)
        assert entry.description.strip() and len(entry.description) <= 80, entry
        lines = entry.content.strip().splitlines()
        assert 1 <= len(lines) <= 6 and entry.content.endswith("\n"), entry


def test_every_answer_exists(eval_set: EvalSet) -> None:
    for query in eval_set.queries:
        paths = {e.path for e in eval_set.entries_of(query.actor_id)}
        assert query.relevant and set(query.relevant) <= paths, query
        assert len(set(query.relevant)) == len(query.relevant), query
    assert len({q.query.lower() for q in eval_set.queries}) == len(eval_set.queries)


def test_paraphrases_share_at_most_one_word_with_their_answers(eval_set: EvalSet) -> None:
    offenders = {
        q.query: sorted(shared)
        for q in eval_set.queries_of("paraphrase")
        if len(shared := shared_words(q.query, answer_texts(eval_set, q))) > 1
    }
    assert offenders == {}
    # Most share none at all: the half measures meaning, not a lucky rare word.
    unshared = [
        q
        for q in eval_set.queries_of("paraphrase")
        if not shared_words(q.query, answer_texts(eval_set, q))
    ]
    assert len(unshared) >= 0.6 * len(eval_set.queries_of("paraphrase"))


def test_keyword_queries_use_their_answers_words(eval_set: EvalSet) -> None:
    for query in eval_set.queries_of("keyword"):
        words = content_words(query.query)
        shared = shared_words(query.query, answer_texts(eval_set, query))
        assert len(shared) >= 2 and len(shared) >= len(words) - 1, (query.query, shared)


def test_the_word_rule_sees_through_inflections() -> None:
    # What a stemming tokenizer would match must count as shared.
    inflected = [
        ("logs", "logging"),
        ("estimates", "estimated"),
        ("approve", "approval"),
        ("renewal", "renew"),
        ("contacted", "contact"),
        ("passports", "passport"),
    ]
    for a, b in inflected:
        assert same_word(a, b), (a, b)
    assert not same_word("boss", "manager")
    assert content_words("Who is Sam's boss?") == {"sam", "boss"}
    assert shared_words("when is the CFO's okay needed", ["Tom Becker, CFO\nApproves"]) == {"cfo"}


def test_scores() -> None:
    assert reciprocal_rank(["/a", "/b", "/c"], ["/c", "/x"]) == pytest.approx(1 / 3)
    assert reciprocal_rank(["/a"] * 10 + ["/c"], ["/c"]) == 0.0  # beyond the top 10
    assert recall(["/a", "/b", "/c"], ["/c", "/x"]) == 0.5
    assert recall([f"/{i}" for i in range(11)], ["/10"]) == 0.0
