"""Benchmark retrieval on LoCoMo: does a search find the turn (or session) that holds the answer?

LoCoMo (snap-research/locomo, ``locomo10``): long conversations of two speakers over many dated
sessions, with questions and the turns (``dia_id``) that hold each answer. The development half
is read from ``--data`` (default ``$MEMFS_LOCOMO_DIR``, else ``shared/locomo-dev`` beside the
repository's checkout); it is never copied into the project.

Each conversation becomes one store of a ``memfs server`` (a subprocess on a throwaway SQLite
database, or with ``--postgres URL`` also on that database), loaded over real HTTP with
``--in-flight`` creates at a time:

- per turn: ``/session_NN/turn_KKK.md`` holding ``DATE — SPEAKER: text`` (and the shared
  photo's caption, ``(photo: …)``);
- per session: ``/session_NN.md`` holding the session's date, then its turns, one a line.

Every question of categories 1–4 (multi-hop, temporal, open-domain, single-hop; 5,
adversarial, has no answer in the conversation) with an evidence turn in its conversation is
then asked, one at a time, as a search of its own conversation's store (top 10). A question is
found at rank R when the R-th memory returned holds one of its evidence turns: recall@5 and
recall@10 count the questions found within 5 and 10, MRR@10 is the mean of 1/R (0 if not
found). Reported per API (``--api``: the Memory Stores route ``POST
/v1/memory_stores/{store}/memfs/search``, the Databricks route ``POST
/api/2.0/agents/memory-stores/{store}/entries:search``), ranking (``--modes``: bm25 is the
default ranking, hybrid is ``memfs server --semantic``) and granularity, overall and by
category; with the search latency (client side, p50/p99) and the creates' (client side under
``--in-flight`` concurrency, and the server's own time from its access log).

On Databricks a store holds actors' entries; each conversation's entries belong to one actor
(``locomo``), each in the Databricks session of its LoCoMo session (``session_NN``), and the
search names only the actor (so it covers every session). An entry also has a one-line
description (weighted twice in BM25): without an LLM to summarise, the honest one is who
spoke when (``SPEAKER, DATE``; per session ``session N, DATE``); the path and content are the
Memory Stores memory's.

``--json`` adds one row per question and configuration (conversation, question index in its
``qa`` list, category, rank or null), so that two runs can be compared question by question.
This case owns no product code.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import secrets
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import trio

from bench.cases.search import MODES, server_times
from bench.fixtures import bench_key, server_on
from bench.harness import Case, Row, percentile
from kit.search_eval import MemoryStoreClient
from kit.servers import ServerProcess
from memfs.api.client import StoreClient
from memfs.api.config import ClientConfig, Secret
from memfs.api.databricks.client import DatabricksClient

log = logging.getLogger(__name__)

DATA_ENV = "MEMFS_LOCOMO_DIR"
DEFAULT_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "locomo-dev"
APIS = ("memory-stores", "databricks")
GRANULARITIES = ("turn", "session")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
# the end of each API's create route (its template, as the access log names it)
CREATE_ROUTE = {"memory-stores": "/memories", "databricks": "/entries"}
K = 10  # the top 10 of each search: recall@10 and MRR@10
ACTOR = "locomo"  # the one actor of a conversation's Databricks store
_DIA_ID = re.compile(r"D:?(\d+):(\d+)")  # "D3:7"; the data also writes "D:11:26" once


# --- The data ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    dia_id: str  # "D3:7": session 3, turn 7
    session: int
    number: int
    date: str  # the session's date and time, as the data writes it
    speaker: str
    text: str  # with the shared photo's caption, if any

    @property
    def line(self) -> str:
        return f"{self.speaker}: {self.text}"


@dataclass(frozen=True)
class Question:
    conversation: str
    index: int  # in the conversation's qa list (category 5 included): stable across runs
    category: int
    text: str
    evidence: frozenset[str]  # dia_ids of turns of the conversation


@dataclass(frozen=True)
class Conversation:
    name: str  # the file's stem ("26")
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]  # categories 1-4 with evidence in the conversation
    left_out: int  # questions of categories 1-4 without: none of their evidence is a turn here


@dataclass(frozen=True)
class Doc:
    """One memory (Memory Stores) or entry (Databricks) of a conversation's store."""

    path: str
    description: str  # Databricks only: the Memory Stores API has none
    session: str  # the Databricks session
    content: str
    dia_ids: frozenset[str]  # the turns it holds


def evidence_ids(raw: Iterable[str]) -> set[str]:
    """The dia_ids named by a question's evidence, whose strings sometimes hold several
    (``"D8:6; D9:17"``, ``"D9:1 D4:4"``) or a stray colon (``"D:11:26"``)."""
    return {f"D{m[1]}:{m[2]}" for item in raw for m in _DIA_ID.finditer(item)}


def load_conversation(path: Path) -> Conversation:
    raw = json.loads(path.read_text(encoding="utf-8"))
    turns = []
    for key, value in raw.items():
        match = re.fullmatch(r"session_(\d+)", key)
        if not match:
            continue  # the dates, and the summaries and observations LoCoMo also ships
        session = int(match[1])
        date = str(raw.get(f"{key}_date_time", ""))
        for turn in value:
            ids = _DIA_ID.fullmatch(turn["dia_id"])
            if ids is None:
                raise ValueError(f"{path}: a turn's dia_id {turn['dia_id']!r} is not D<s>:<t>")
            text = turn["text"]
            if turn.get("blip_caption"):
                text += f" (photo: {turn['blip_caption']})"
            turns.append(Turn(turn["dia_id"], session, int(ids[2]), date, turn["speaker"], text))
    turns.sort(key=lambda t: (t.session, t.number))
    known = {t.dia_id for t in turns}
    questions, left_out = [], 0
    for index, qa in enumerate(raw["qa"]):
        if qa["category"] not in CATEGORIES:
            continue
        evidence = evidence_ids(qa.get("evidence", [])) & known
        if not evidence:
            left_out += 1
            continue
        questions.append(
            Question(path.stem, index, qa["category"], qa["question"], frozenset(evidence))
        )
    return Conversation(path.stem, tuple(turns), tuple(questions), left_out)


def load_locomo(data: Path, names: Sequence[str] | None = None) -> list[Conversation]:
    files = sorted(data.glob("*.json"))
    if names:
        files = [f for f in files if f.stem in names]
    return [load_conversation(f) for f in files]


def docs(conversation: Conversation, granularity: str) -> list[Doc]:
    """The memories a conversation is stored as, one per turn or one per session."""
    if granularity == "turn":
        return [
            Doc(
                f"/session_{t.session:02d}/turn_{t.number:03d}.md",
                f"{t.speaker}, {t.date}",
                f"session_{t.session:02d}",
                f"{t.date} — {t.line}\n",
                frozenset([t.dia_id]),
            )
            for t in conversation.turns
        ]
    sessions: dict[int, list[Turn]] = {}
    for t in conversation.turns:
        sessions.setdefault(t.session, []).append(t)
    return [
        Doc(
            f"/session_{n:02d}.md",
            f"session {n}, {turns[0].date}",
            f"session_{n:02d}",
            f"{turns[0].date}\n\n" + "".join(t.line + "\n" for t in turns),
            frozenset(t.dia_id for t in turns),
        )
        for n, turns in sessions.items()
    ]


# --- Scores --------------------------------------------------------------------------------


def hit_rank(ranked: Sequence[str], holds: dict[str, frozenset[str]], question: Question) -> int:
    """The rank (1-based) of the first of ``ranked`` (paths) that holds an evidence turn of
    ``question`` within the top ``K``; 0 when none does."""
    for rank, path in enumerate(ranked[:K], start=1):
        if holds.get(path, frozenset()) & question.evidence:
            return rank
    return 0


@dataclass
class QualityRow:
    api: str
    backend: str
    mode: str
    granularity: str
    category: str  # "1-4", or one of them
    questions: int
    recall_at_5: float
    recall_at_10: float
    mrr_at_10: float


def quality(config: dict[str, str], ranks: Sequence[tuple[Question, int]]) -> list[QualityRow]:
    """The scores over categories 1-4, then over each category."""
    groups = [("1-4", list(ranks))] + [
        (f"{c} {name}", [(q, r) for q, r in ranks if q.category == c])
        for c, name in CATEGORIES.items()
    ]
    rows = []
    for label, members in groups:
        n = len(members)
        found = [r for _, r in members if r]

        def mean(total: float, n: int = n) -> float:
            return round(total / n, 3) if n else 0.0

        rows.append(
            QualityRow(
                **config,
                category=label,
                questions=n,
                recall_at_5=mean(sum(r <= 5 for r in found)),
                recall_at_10=mean(len(found)),
                mrr_at_10=mean(sum(1 / r for r in found)),
            )
        )
    return rows


@dataclass
class CostRow:
    api: str
    backend: str
    mode: str
    granularity: str
    memories: int
    load_s: float  # every create, --in-flight at a time
    create_p50_ms: float  # client side, under that concurrency
    create_p99_ms: float
    server_create_p50_ms: float  # the server's own time, from its access log
    searches: int
    search_p50_ms: float  # client side, one search at a time
    search_p99_ms: float


def ms(values: Sequence[float], pct: float) -> float:
    return round(percentile(values, pct) * 1000, 2)


# --- The two APIs ----------------------------------------------------------------------------


class Target(ABC):
    """Where a configuration stores and searches: one API of one server."""

    @abstractmethod
    async def new_store(self, name: str) -> str: ...

    @abstractmethod
    async def create(self, store: str, doc: Doc) -> None: ...

    @abstractmethod
    async def search(self, store: str, query: str) -> list[str]:
        """The paths of the top ``K``, best first."""


class MemoryStoresTarget(Target):
    def __init__(self, client: StoreClient) -> None:
        self.client = client

    async def new_store(self, name: str) -> str:
        return (await self.client.create_store(name)).id

    async def create(self, store: str, doc: Doc) -> None:
        await self.client.create_memory(store, doc.path, doc.content)

    async def search(self, store: str, query: str) -> list[str]:
        return [m.path for m, _ in await self.client.search_memories(store, query, limit=K)]


class DatabricksTarget(Target):
    def __init__(self, client: DatabricksClient, server: ServerProcess) -> None:
        self.client, self.server = client, server

    async def new_store(self, name: str) -> str:
        def create() -> None:  # the product's client creates no stores: the kit's does
            with MemoryStoreClient(self.server.base_url, self.server.api_key) as kit:
                kit.create_store(name)

        await trio.to_thread.run_sync(create)
        return name

    async def create(self, store: str, doc: Doc) -> None:
        await self.client.create_entry(
            store, ACTOR, doc.session, doc.path, doc.content, doc.description
        )

    async def search(self, store: str, query: str) -> list[str]:
        hits = await self.client.search_entries(store, ACTOR, query, page_size=K)
        return [entry.path for entry, _ in hits]


# --- One configuration -------------------------------------------------------------------------


@dataclass
class Measured:
    ranks: list[tuple[Question, int]]
    memories: int
    load_seconds: float
    creates: list[float]
    searches: list[float]


async def load_and_ask(
    target: Target, conversations: Sequence[Conversation], granularity: str, in_flight: int
) -> Measured:
    """Store every conversation (one store each, ``in_flight`` creates at a time), then ask
    each question of its own store, one at a time."""
    run = secrets.token_hex(3)
    stores = {c.name: await target.new_store(f"locomo-{c.name}-{run}") for c in conversations}
    work = [(stores[c.name], d) for c in conversations for d in docs(c, granularity)]
    creates: list[float] = []
    limit = trio.CapacityLimiter(in_flight)

    async def create(store: str, doc: Doc) -> None:
        async with limit:
            started = time.perf_counter()
            await target.create(store, doc)
            creates.append(time.perf_counter() - started)

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for store, doc in work:
            nursery.start_soon(create, store, doc)
    load_seconds = time.perf_counter() - started
    log.info("%d memories stored in %.1f s", len(work), load_seconds)

    ranks: list[tuple[Question, int]] = []
    searches: list[float] = []
    for c in conversations:
        holds = {d.path: d.dia_ids for d in docs(c, granularity)}
        for q in c.questions:
            started = time.perf_counter()
            ranked = await target.search(stores[c.name], q.text)
            searches.append(time.perf_counter() - started)
            ranks.append((q, hit_rank(ranked, holds, q)))
    return Measured(ranks, len(work), load_seconds, creates, searches)


async def measure(
    server: ServerProcess,
    api: str,
    conversations: Sequence[Conversation],
    granularity: str,
    in_flight: int,
) -> Measured:
    auth: Literal["x-api-key", "bearer"] = "x-api-key" if api == "memory-stores" else "bearer"
    config = ClientConfig(
        api_key=Secret(server.api_key), base_url=server.base_url, auth_scheme=auth,
        timeout=120.0, max_connections=max(20, in_flight),
    )  # fmt: skip
    if api == "memory-stores":
        async with StoreClient(config) as client:
            target: Target = MemoryStoresTarget(client)
            return await load_and_ask(target, conversations, granularity, in_flight)
    async with DatabricksClient(config) as dbx:
        target = DatabricksTarget(dbx, server)
        return await load_and_ask(target, conversations, granularity, in_flight)


def configuration(
    options: argparse.Namespace,
    conversations: Sequence[Conversation],
    backend: str,
    api: str,
    mode: str,
    granularity: str,
    tmp: Path,
) -> tuple[list[Row], Row, list[Row]]:
    """One fresh server (its own database on SQLite, new stores on PostgreSQL), one API, one
    ranking, one granularity: its quality rows, its cost row and a row per question."""
    label = {"api": api, "backend": backend, "mode": mode, "granularity": granularity}
    name = "-".join(label.values())
    access_log = tmp / f"{name}.access.log"
    db = options.postgres if backend == "postgresql" else tmp / f"{name}.db"
    extra = [*MODES[mode], "--access-log", str(access_log)]
    with server_on(db, bench_key(), extra_args=extra, log_path=tmp / f"{name}.out") as server:
        got = trio.run(measure, server, api, conversations, granularity, options.in_flight)
    server_creates = server_times(access_log, CREATE_ROUTE[api])
    log.info("%s: %d questions asked", name, len(got.ranks))
    cost = CostRow(
        **label, memories=got.memories, load_s=round(got.load_seconds, 2),
        create_p50_ms=ms(got.creates, 50), create_p99_ms=ms(got.creates, 99),
        server_create_p50_ms=ms(server_creates, 50), searches=len(got.searches),
        search_p50_ms=ms(got.searches, 50), search_p99_ms=ms(got.searches, 99),
    )  # fmt: skip
    questions: list[Row] = [
        {**label, "conversation": q.conversation, "question": q.index, "category": q.category,
         "rank": rank or None}
        for q, rank in got.ranks
    ]  # fmt: skip
    return [asdict(r) for r in quality(label, got.ranks)], asdict(cost), questions


# --- The case ------------------------------------------------------------------------------------


def data_dir(options: argparse.Namespace) -> Path:
    """``--data``, else ``$MEMFS_LOCOMO_DIR``, else ``shared/locomo-dev`` beside the checkout."""
    return Path(options.data or os.environ.get(DATA_ENV) or DEFAULT_DATA)


class LocomoCase(Case[None]):
    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--data", metavar="DIR",
            help=f"the LoCoMo JSON files (default ${DATA_ENV}, else {DEFAULT_DATA})",
        )  # fmt: skip
        parser.add_argument(
            "--modes", nargs="+", choices=list(MODES), default=list(MODES), metavar="MODE",
            help="bm25 (the default ranking), hybrid (--semantic); default both",
        )  # fmt: skip
        parser.add_argument(
            "--granularity", nargs="+", choices=GRANULARITIES, default=list(GRANULARITIES),
            metavar="G", help="turn, session: one memory per turn or per session (default both)",
        )  # fmt: skip
        parser.add_argument(
            "--api", nargs="+", choices=APIS, default=[APIS[0]], metavar="API",
            help="memory-stores (default), databricks: whose routes store and search",
        )  # fmt: skip
        parser.add_argument(
            "--postgres", metavar="URL",
            help="also measure on this PostgreSQL database (new stores each run)",
        )  # fmt: skip
        parser.add_argument(
            "--conversations", nargs="+", metavar="NAME",
            help="only these conversations (the files' names without .json; default all)",
        )  # fmt: skip
        parser.add_argument(
            "--in-flight", type=int, default=4, metavar="N",
            help="creates sent at a time while loading (default 4)",
        )  # fmt: skip

    def check(self, parser: argparse.ArgumentParser, options: argparse.Namespace) -> None:
        if options.in_flight < 1:
            parser.error("--in-flight must be positive")
        data = data_dir(options)
        if not sorted(data.glob("*.json")):
            parser.exit(
                2,
                f"python -m bench locomo: no LoCoMo data (*.json) in {data}: pass --data DIR or "
                f"set {DATA_ENV}=DIR (make bench-search passes it on)\n",
            )
        missing = set(options.conversations or ()) - {f.stem for f in data.glob("*.json")}
        if missing:
            parser.exit(2, f"python -m bench locomo: no conversation {sorted(missing)} in {data}\n")

    def note(self, options: argparse.Namespace) -> str:
        conversations = load_locomo(data_dir(options), options.conversations)
        asked = sum(len(c.questions) for c in conversations)
        left = sum(c.left_out for c in conversations)
        return (
            f"LoCoMo from {data_dir(options)}: {len(conversations)} conversations, "
            f"{sum(len(c.turns) for c in conversations)} turns, {asked} questions of "
            f"categories 1-4 asked ({left} left out: no evidence turn in the conversation); "
            f"{options.in_flight} creates in flight"
        )

    def run(self, options: argparse.Namespace, fixture: None) -> list[Row]:
        conversations = load_locomo(data_dir(options), options.conversations)
        backends = ["sqlite"] + (["postgresql"] if options.postgres else [])
        scores: list[Row] = []
        costs: list[Row] = []
        questions: list[Row] = []
        with tempfile.TemporaryDirectory(prefix="memfs-bench-locomo-") as tmp:
            for backend in backends:
                for api in options.api:
                    for mode in options.modes:
                        for granularity in options.granularity:
                            got = configuration(
                                options, conversations, backend, api, mode, granularity, Path(tmp)
                            )
                            scores += got[0]
                            costs.append(got[1])
                            questions += got[2]
        # the question rows (too many for a table) only in the JSON, to compare runs with
        return scores + costs + (questions if options.json else [])


CASE = LocomoCase()
