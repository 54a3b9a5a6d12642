#!/usr/bin/env python3
"""Benchmark search over the Databricks Agent Memory routes: quality, latency, write cost.

For each mode, BM25 (``memfs server``) and hybrid (``memfs server --semantic``: BM25 and
embeddings fused by reciprocal rank), starts a server on a throwaway SQLite database (a
subprocess, as the tests do) with an access log, and talks to it over real HTTP:

- quality: loads the labelled set (``tests/data/search_eval.json``: 210 memories of 5 actors)
  with ``POST /api/2.0/agents/memory-stores/{s}/entries``, runs its 50 queries through
  ``POST …/entries:search`` (page_size 10) and prints MRR@10 and recall@10 on all queries, the
  keyword half and the paraphrase half;
- latency: fills one actor of another store with generated memories (lines of the set
  recombined) up to each of ``--sizes`` (2,000 and 20,000), and at each size runs
  ``--searches`` searches (the set's queries in turn) and reports p50/p99;
- write cost: the latency of every entry create of that fill (client side, and server side
  from the access log), and the time of the index update itself, measured in-process (see
  ``index_cost``).

Requests are counted client side: one per create, one per search (an answer never carries a
``next_page_token``). Prints markdown tables, or JSON with ``--json``. This script owns no
product code.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import random
import re
import secrets
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The labelled set and its scoring live with the tests that check it.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from bench_server import percentile, server_on
from support.search_eval import (
    ENTRIES_API,
    EvalSet,
    MemoryStoreClient,
    Query,
    load_eval_set,
    score,
)

from memfs.server.app import create_app
from memfs.server.search import SearchDocument, SearchIndex
from memfs.server.search.document import Tx
from memfs.server.search.semantic import Embedder, load_embedder
from memfs.server.sqlite import SqliteStorage

log = logging.getLogger("bench_search")

MODES = {"bm25": [], "hybrid": ["--semantic"]}
LATENCY_ACTOR = "bench-actor"


@dataclass
class QualityRow:
    mode: str
    queries: str  # "all", "keyword", "paraphrase"
    count: int
    mrr: float
    recall: float


@dataclass
class LatencyRow:
    mode: str
    entries: int
    searches: int
    p50_ms: float
    p99_ms: float


@dataclass
class WriteRow:
    mode: str
    creates: int
    p50_ms: float  # client side, over HTTP
    p99_ms: float
    server_p50_ms: float  # from the access log: the server's own time for the request
    server_p99_ms: float
    seconds: float  # the whole fill


@dataclass
class IndexCostRow:
    mode: str
    creates: int
    request_p50_ms: float  # the create request in-process (no network, no client JSON work)
    request_p99_ms: float
    index_p50_ms: float  # SearchIndex.index inside that request's transaction
    index_p99_ms: float
    index_share: float  # total index time / total request time


@dataclass
class ModeResult:
    mode: str
    startup_s: float
    quality: list[QualityRow]
    quality_search_requests: int
    latency: list[LatencyRow]
    write: WriteRow | None
    index_cost: IndexCostRow | None
    requests: int


def ms(values: Sequence[float], pct: float) -> float:
    return round(percentile(sorted(values), pct) * 1000, 2)


def synthetic_entries(eval_set: EvalSet, start: int, stop: int) -> Iterator[tuple[str, str, str]]:
    """(path, description, content) of generated memories ``start``..``stop``: three lines of
    the set's memories and a description of one, so the vocabulary and lengths stay realistic."""
    lines = [line for e in eval_set.entries for line in e.content.splitlines()]
    for i in range(start, stop):
        rng = random.Random(i)
        source = rng.choice(eval_set.entries)
        topic = source.path.strip("/").split("/")[0]
        content = "\n".join(rng.sample(lines, 3)) + "\n"
        yield f"/{topic}/note-{i:05d}.md", f"{source.description} ({i})", content


def server_times(access_log: Path, suffix: str) -> list[float]:
    """Server-side durations (seconds) of the POSTs whose route template ends with ``suffix``."""
    pattern = re.compile(r" POST (\S+) 200 ([0-9.]+)ms ")
    times = []
    for line in access_log.read_text().splitlines():
        match = pattern.search(line)
        if match and match.group(1).endswith(suffix):
            times.append(float(match.group(2)) / 1000)
    return times


def measure_quality(client: MemoryStoreClient, eval_set: EvalSet) -> tuple[list[QualityRow], int]:
    store = "search-quality"
    client.create_store(store)
    client.load(store, eval_set.entries)
    before = client.requests
    rankings = client.rankings(store, eval_set.queries)
    searches = client.requests - before
    rows = []
    for name, kind in [("all", None), ("keyword", "keyword"), ("paraphrase", "paraphrase")]:
        scores = score([(q, r) for q, r in rankings if kind is None or q.kind == kind])
        rows.append(
            QualityRow("", name, scores.queries, round(scores.mrr, 3), round(scores.recall, 3))
        )
    return rows, searches


def measure_latency(
    client: MemoryStoreClient,
    eval_set: EvalSet,
    mode: str,
    sizes: Sequence[int],
    searches: int,
    access_log: Path,
) -> tuple[list[LatencyRow], WriteRow]:
    store = "search-latency"
    client.create_store(store)
    create_times: list[float] = []
    rows: list[LatencyRow] = []
    queries = [Query(LATENCY_ACTOR, q.kind, q.query, q.relevant) for q in eval_set.queries]
    filled = 0
    fill_started = time.perf_counter()
    for size in sorted(sizes):
        for path, description, content in synthetic_entries(eval_set, filled, size):
            started = time.perf_counter()
            client.create_entry(store, LATENCY_ACTOR, path, description, content)
            create_times.append(time.perf_counter() - started)
            if len(create_times) % 1000 == 0:
                log.info("%s: %d entries", mode, len(create_times))
        filled = size
        search_times = []
        for i in range(searches + 5):
            query = queries[i % len(queries)]
            started = time.perf_counter()
            client.search(store, query.actor_id, query.query)
            if i >= 5:  # the first few warm the caches
                search_times.append(time.perf_counter() - started)
        rows.append(LatencyRow(mode, size, searches, ms(search_times, 50), ms(search_times, 99)))
        log.info("%s: %d entries: search p50 %.1f ms", mode, size, rows[-1].p50_ms)
    fill_seconds = time.perf_counter() - fill_started
    server = server_times(access_log, "/entries")
    write = WriteRow(
        mode,
        len(create_times),
        ms(create_times, 50),
        ms(create_times, 99),
        ms(server, 50),
        ms(server, 99),
        round(fill_seconds, 1),
    )
    return rows, write


class TimedIndex(SearchIndex):
    """The server's search index, timing each ``index`` call (the update a write makes)."""

    def __init__(self, embedder: Embedder | None) -> None:
        super().__init__(embedder)
        self.seconds: list[float] = []

    def index(self, tx: Tx, doc: SearchDocument) -> None:
        started = time.perf_counter()
        super().index(tx, doc)
        self.seconds.append(time.perf_counter() - started)


async def index_cost(mode: str, eval_set: EvalSet, creates: int, tmp: Path) -> IndexCostRow:
    """The index's share of an entry create, measured in-process where both can be timed.

    Over HTTP the index update cannot be told apart from the rest of the write, and a server
    without the index no longer exists to compare with. So this runs the server's own app and
    SQLite storage in this process, with the search index wrapped in ``TimedIndex``, and sends
    the same creates as the latency fill through ``httpx.ASGITransport``: the time of each
    whole request (routing, validation, the transaction, the JSON answer; no sockets) and of
    the index update inside its transaction, on the same writes.
    """
    key = "sk-bench-" + secrets.token_hex(16)
    index = TimedIndex(load_embedder() if mode == "hybrid" else None)
    storage = await SqliteStorage.open(tmp / f"index-cost-{mode}.db", search=index)
    request_times: list[float] = []
    try:
        app = create_app(storage, [key])
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://bench", headers=headers
        ) as http:
            store = "index-cost"
            answer = await http.post(f"{ENTRIES_API}?managed_memory_store_id={store}", json={})
            answer.raise_for_status()
            for path, description, content in synthetic_entries(eval_set, 0, creates):
                body = {"actor_id": LATENCY_ACTOR, "path": path, "description": description}
                body["content"] = content
                started = time.perf_counter()
                answer = await http.post(f"{ENTRIES_API}/{store}/entries", json=body)
                request_times.append(time.perf_counter() - started)
                answer.raise_for_status()
    finally:
        await storage.aclose()
    share = sum(index.seconds) / sum(request_times)
    return IndexCostRow(
        mode,
        len(request_times),
        ms(request_times, 50),
        ms(request_times, 99),
        ms(index.seconds, 50),
        ms(index.seconds, 99),
        round(share, 3),
    )


def run_mode(args: argparse.Namespace, mode: str, eval_set: EvalSet) -> ModeResult:
    key = "sk-bench-" + secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="memfs-bench-search-") as tmp:
        access_log = Path(tmp) / "access.log"
        extra = [*MODES[mode], "--access-log", str(access_log)]
        started = time.perf_counter()
        with server_on(Path(tmp) / "search.db", key, extra_args=extra) as base_url:
            startup = time.perf_counter() - started
            with MemoryStoreClient(base_url, key) as client:
                quality, searches = measure_quality(client, eval_set)
                log.info("%s: quality measured (%d requests)", mode, client.requests)
                latency: list[LatencyRow] = []
                write = None
                if args.sizes:
                    latency, write = measure_latency(
                        client, eval_set, mode, args.sizes, args.searches, access_log
                    )
                requests = client.requests
        cost = None
        if args.index_cost:
            cost = trio.run(index_cost, mode, eval_set, args.index_cost, Path(tmp))
    for row in quality:
        row.mode = mode
    return ModeResult(mode, round(startup, 2), quality, searches, latency, write, cost, requests)


def markdown(results: list[ModeResult]) -> str:
    out = ["| mode | queries | n | MRR@10 | recall@10 |", "|---|---|---:|---:|---:|"]
    out += [
        f"| {q.mode} | {q.queries} | {q.count} | {q.mrr:.3f} | {q.recall:.3f} |"
        for r in results
        for q in r.quality
    ]
    out += ["", "| mode | entries (one actor) | searches | p50 (ms) | p99 (ms) |"]
    out += ["|---|---:|---:|---:|---:|"]
    out += [
        f"| {x.mode} | {x.entries} | {x.searches} | {x.p50_ms} | {x.p99_ms} |"
        for r in results
        for x in r.latency
    ]
    out += ["", "| mode | creates | p50 (ms) | p99 (ms) | server p50 (ms) | server p99 (ms) |"]
    out += ["|---|---:|---:|---:|---:|---:|"]
    out += [
        f"| {w.mode} | {w.creates} | {w.p50_ms} | {w.p99_ms} | {w.server_p50_ms} "
        f"| {w.server_p99_ms} |"
        for r in results
        if (w := r.write) is not None
    ]
    out += ["", "| mode | creates | request p50 (ms) | p99 (ms) | index p50 (ms) | p99 (ms) "]
    out[-1] += "| index share |"
    out += ["|---|---:|---:|---:|---:|---:|---:|"]
    out += [
        f"| {c.mode} | {c.creates} | {c.request_p50_ms} | {c.request_p99_ms} | {c.index_p50_ms} "
        f"| {c.index_p99_ms} | {c.index_share:.0%} |"
        for r in results
        if (c := r.index_cost) is not None
    ]
    out += ["", "| mode | server start-up (s) | HTTP requests |", "|---|---:|---:|"]
    out += [f"| {r.mode} | {r.startup_s} | {r.requests} |" for r in results]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--modes", nargs="+", choices=list(MODES), default=list(MODES), metavar="MODE",
        help="bm25, hybrid (default both)",
    )  # fmt: skip
    parser.add_argument(
        "--sizes", nargs="*", type=int, default=[2000, 20000], metavar="N",
        help="entries of one actor at which search latency is measured (default 2000 20000; "
        "none: quality only)",
    )  # fmt: skip
    parser.add_argument("--searches", type=int, default=200, help="searches per size (200)")
    parser.add_argument(
        "--index-cost", type=int, default=1000, metavar="N",
        help="entry creates timed in-process for the index's share of a write (default 1000; "
        "0: skip)",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = parser.parse_args(argv)
    if args.searches < 1 or args.index_cost < 0 or any(n < 1 for n in args.sizes):
        parser.error("--searches and --sizes must be positive, --index-cost not negative")
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("httpx").setLevel(logging.WARNING)

    started = datetime.now(UTC)
    eval_set = load_eval_set()
    results = [run_mode(args, mode, eval_set) for mode in args.modes]
    meta = {
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}",
        "python": platform.python_version(),
        "entries": len(eval_set.entries),
        "queries": len(eval_set.queries),
        "command": "python scripts/bench_search.py " + " ".join(argv or sys.argv[1:]),
    }
    if args.json:
        rows = [asdict(r) for r in results]
        print(json.dumps({"meta": meta, "results": rows}, indent=2))
    else:
        print(
            f"Search benchmark, {meta['date']}, {meta['machine']}, Python {meta['python']}; "
            f"{meta['entries']} labelled memories, {meta['queries']} queries; latency at "
            f"{', '.join(str(n) for n in args.sizes) or 'no'} entries of one actor.\n"
        )
        print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
