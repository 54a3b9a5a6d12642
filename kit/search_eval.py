"""The labelled search set (``tests/data/search_eval.json``) and how it is scored.

Shared by the quality test (``tests/server/test_search_quality.py``), the checks on the set
itself (``tests/server/test_search_eval_set.py``) and ``python -m bench search``: loading the
set, the word overlap rule that keeps the paraphrase queries honest, MRR@k and recall@k, and a
small client of the Databricks Agent Memory routes that loads the set into a server and runs
its queries over real HTTP (the wire contract: ``docs/databricks-agent-memory.md``, "Endpoints"
and "Rules").
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

EVAL_SET = Path(__file__).resolve().parent.parent / "tests" / "data" / "search_eval.json"
ENTRIES_API = "/api/2.0/agents/memory-stores"
K = 10  # MRR@10 and recall@10: the contract's default page size


@dataclass(frozen=True)
class Entry:
    actor_id: str
    path: str
    description: str
    content: str


@dataclass(frozen=True)
class Query:
    actor_id: str
    kind: str  # "keyword" (uses its answers' words) or "paraphrase" (avoids them)
    query: str
    relevant: tuple[str, ...]  # paths of the actor's entries that answer it


@dataclass(frozen=True)
class EvalSet:
    entries: tuple[Entry, ...]
    queries: tuple[Query, ...]

    def entries_of(self, actor_id: str) -> list[Entry]:
        return [e for e in self.entries if e.actor_id == actor_id]

    def queries_of(self, kind: str | None = None) -> list[Query]:
        return [q for q in self.queries if kind is None or q.kind == kind]


def load_eval_set(path: Path = EVAL_SET) -> EvalSet:
    raw = json.loads(path.read_text(encoding="utf-8"))
    return EvalSet(
        entries=tuple(Entry(**e) for e in raw["entries"]),
        queries=tuple(
            Query(q["actor_id"], q["kind"], q["query"], tuple(q["relevant"]))
            for q in raw["queries"]
        ),
    )


# --- The overlap rule ----------------------------------------------------------------------
# A paraphrase query may share at most one non-stopword with its answers (path, description
# and content of every relevant entry). "Shared" is decided generously, so that a stemming
# tokenizer (FTS5 porter, PostgreSQL's english config) cannot see more overlap than this
# check does: two words are shared if their crude stems are equal or begin with the same
# five letters ("logs"/"logging", "estimates"/"estimated", "approve"/"approval").

_STOPWORD_TEXT = """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can cannot could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    s t don can't won't isn't aren't doesn't didn't get got let lets us one someone something
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_SUFFIXES = ("ations", "ation", "ings", "ing", "edly", "ed", "ers", "er", "ies", "es", "s", "ly")
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def content_words(text: str) -> set[str]:
    """The lowercase words of ``text`` that are not stopwords (possessive 's dropped)."""
    words = {w.removesuffix("'s") for w in _WORD.findall(text.lower())}
    return {w for w in words if w not in STOPWORDS and len(w) > 1}


def stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiou":
        word = word[:-1]  # "logg" -> "log", "stopp" -> "stop"
    return word


def same_word(a: str, b: str) -> bool:
    sa, sb = stem(a), stem(b)
    return sa == sb or (len(sa) >= 5 and len(sb) >= 5 and sa[:5] == sb[:5])


def shared_words(query: str, texts: Iterable[str]) -> set[str]:
    """The query's non-stopwords that also occur (by ``same_word``) in any of ``texts``."""
    answer_words: set[str] = set()
    for text in texts:
        answer_words |= content_words(text)
    return {q for q in content_words(query) if any(same_word(q, a) for a in answer_words)}


def answer_texts(eval_set: EvalSet, query: Query) -> list[str]:
    by_path = {e.path: e for e in eval_set.entries_of(query.actor_id)}
    return [
        f"{by_path[p].path}\n{by_path[p].description}\n{by_path[p].content}" for p in query.relevant
    ]


# --- Scores ----------------------------------------------------------------------------------


def reciprocal_rank(ranked: Sequence[str], relevant: Iterable[str], k: int = K) -> float:
    """1/rank of the first relevant path in the top ``k``, else 0."""
    wanted = set(relevant)
    for rank, path in enumerate(ranked[:k], start=1):
        if path in wanted:
            return 1.0 / rank
    return 0.0


def recall(ranked: Sequence[str], relevant: Iterable[str], k: int = K) -> float:
    """The share of the relevant paths found in the top ``k``."""
    wanted = set(relevant)
    return len(wanted & set(ranked[:k])) / len(wanted)


@dataclass(frozen=True)
class Scores:
    queries: int
    mrr: float
    recall: float


def score(rankings: Sequence[tuple[Query, Sequence[str]]], k: int = K) -> Scores:
    """Mean reciprocal rank and mean recall at ``k`` over (query, ranked paths) pairs."""
    if not rankings:
        return Scores(0, 0.0, 0.0)
    n = len(rankings)
    return Scores(
        queries=n,
        mrr=sum(reciprocal_rank(r, q.relevant, k) for q, r in rankings) / n,
        recall=sum(recall(r, q.relevant, k) for q, r in rankings) / n,
    )


# --- The Databricks routes over HTTP ---------------------------------------------------------


class MemoryStoreClient:
    """A thin synchronous client of the Databricks entry routes of one ``memfs server``.

    Counts the HTTP requests it sends (``requests``), so callers can report them.
    """

    def __init__(self, base_url: str, token: str, timeout: float = 60.0) -> None:
        self._http = httpx.Client(
            base_url=base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
        )
        self.requests = 0

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MemoryStoreClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _post(self, route: str, body: dict[str, Any], **params: str) -> dict[str, Any]:
        """POST to ``ENTRIES_API + route``; the answer's JSON, or RuntimeError unless 200."""
        url = ENTRIES_API + route
        self.requests += 1
        answer = self._http.post(url, json=body, params=params)
        if answer.status_code != 200:
            raise RuntimeError(f"POST {url}: HTTP {answer.status_code}: {answer.text[:300]}")
        result: dict[str, Any] = answer.json()
        return result

    def create_store(self, store_id: str) -> None:
        self._post("", {"display_name": store_id}, managed_memory_store_id=store_id)

    def create_entry(
        self, store_id: str, actor_id: str, path: str, description: str, content: str
    ) -> dict[str, Any]:
        """One session-less entry, as a live agent would write it."""
        body = {
            "actor_id": actor_id,
            "path": path,
            "description": description,
            "content": content,
            "source_type": "MANAGED_MEMORY_ENTRY_SOURCE_TYPE_AGENT",
        }
        return self._post(f"/{store_id}/entries", body)

    def load(self, store_id: str, entries: Iterable[Entry]) -> int:
        """Create every entry in ``store_id``; returns how many."""
        count = 0
        for e in entries:
            self.create_entry(store_id, e.actor_id, e.path, e.description, e.content)
            count += 1
        return count

    def search(
        self, store_id: str, actor_id: str, query: str, page_size: int = K
    ) -> list[tuple[str, float]]:
        """(path, score) of the results of ``entries:search``, best first."""
        answer = self._post(
            f"/{store_id}/entries:search",
            {"actor_id": actor_id, "query": query, "page_size": page_size},
        )
        # The contract: top-N in one answer, never a page token (the SDK would loop on it).
        if "next_page_token" in answer:
            raise RuntimeError(f"entries:search answered a next_page_token: {answer!r:.300}")
        return [
            (r["managed_memory_entry"]["path"], float(r["score"]))
            for r in answer.get("results", [])
        ]

    def rankings(
        self, store_id: str, queries: Iterable[Query], k: int = K
    ) -> list[tuple[Query, list[str]]]:
        """Each query with the ranked paths the server answers it with."""
        return [
            (q, [path for path, _ in self.search(store_id, q.actor_id, q.query, k)])
            for q in queries
        ]
