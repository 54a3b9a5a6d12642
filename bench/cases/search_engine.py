"""Benchmark the server's search engine in-process on SQLite: BM25 and the semantic scan.

Indexes ``--docs`` Databricks-style documents of one actor (20,000 by default, the size up to
which the semantic ranking's brute-force cosine is meant to be fine) through
``memfs.server.search.SearchIndex`` in a throwaway SQLite database, then times ``--queries``
searches of the scope (best of ``--best-of``) in three modes:

- ``bm25``: full text only (FTS5);
- ``scan``: the semantic ranking's own cost: reading the scope's stored vectors and the numpy
  cosine, with random unit vectors standing in for embeddings (embedding 20,000 documents with
  the real model takes minutes), query embedding excluded;
- ``embed``: the bundled model's time to embed one query and one 500-character document.

Needs the semantic extra for ``scan``/``embed`` (skipped without it). Owns no product code.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import trio

from bench.harness import Case, Row
from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.search import SearchDocument, SearchIndex, SearchScope

WORDS = (  # noqa: SIM905 - a vocabulary reads better as one string
    "coffee tea project deadline meeting alice bob garden tomato river mountain budget "
    "invoice travel flight hotel recipe pasta sauce running marathon doctor appointment "
    "birthday gift music piano guitar lesson school homework kitchen paint window"
).split()


class RandomEmbedder:
    """Random unit vectors of the real model's size: the scan's cost without the model's."""

    name = "random-384"

    def __init__(self) -> None:
        import numpy as np

        self._rng = np.random.default_rng(0)

    def passages(self, texts: Sequence[str]) -> Any:
        vectors = self._rng.standard_normal((len(texts), 384)).astype("float32")
        return vectors / ((vectors**2).sum(axis=1, keepdims=True) ** 0.5)

    def query(self, text: str) -> Any:
        return self.passages([text])[0]


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def best_ms(fn: Callable[[], object], queries: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(queries):
            fn()
        best = min(best, (time.perf_counter() - start) / queries)
    return best * 1000


async def measure(args: argparse.Namespace) -> list[Row]:
    rows: list[Row] = []
    try:
        embedder: Any = RandomEmbedder()
    except ImportError:
        embedder = None
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        storage = await SqliteStorage.open(Path(tmp) / "bench.db", search=SearchIndex(embedder))
        index = storage.search

        def seed(tx: Any) -> None:
            for i in range(args.docs):
                doc = SearchDocument(
                    "databricks", "bench", f"e{i}", f"/notes/{i}.md", text(rng, 80), "", "alice"
                )
                index.index(tx, doc)

        await storage._write(seed)
        scope = SearchScope("databricks", "bench", actor_id="alice")
        conn = storage._writer
        assert conn is not None
        from memfs.server.backends.sqlite import SQLITE
        from memfs.server.db.transaction import Tx

        tx = Tx(conn, SQLITE)
        lexical = SearchIndex()
        rows.append(
            {
                "mode": "bm25",
                "docs": args.docs,
                "ms": best_ms(
                    lambda: lexical.search(tx, scope, "coffee meeting", 10),
                    args.queries,
                    args.best_of,
                ),
            }
        )
        if embedder is not None:
            rows.append(
                {
                    "mode": "scan",
                    "docs": args.docs,
                    "ms": best_ms(
                        lambda: index.search(tx, scope, "coffee meeting", 10),
                        args.queries,
                        args.best_of,
                    )
                    - float(rows[0]["ms"] or 0),
                }
            )
        await storage.aclose()
    try:
        from memfs.server.search.semantic import load_embedder

        model = load_embedder()
    except Exception:
        return rows
    doc = text(rng, 80)[:500]
    rows.append(
        {
            "mode": "embed query",
            "docs": 1,
            "ms": best_ms(lambda: model.query("coffee with alice"), args.queries, args.best_of),
        }
    )
    rows.append(
        {
            "mode": "embed document",
            "docs": 1,
            "ms": best_ms(lambda: model.passages([doc]), args.queries, args.best_of),
        }
    )
    return rows


class SearchEngineCase(Case[None]):
    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--docs", type=int, default=20_000)
        parser.add_argument("--queries", type=int, default=20)
        parser.add_argument("--best-of", type=int, default=3, help="each time: the best of these")

    def note(self, options: argparse.Namespace) -> str:
        return f"ms: per search, best of {options.best_of} times {options.queries} searches"

    def run(self, options: argparse.Namespace, fixture: None) -> list[Row]:
        return trio.run(measure, options)


CASE = SearchEngineCase()
