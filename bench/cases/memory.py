"""Measure a mount's memory in steady state: a mixed workload on a store of 1,500 memories.

Starts ``memfs server --faults none`` on a throwaway database, seeds one store with
``--memories`` memories (1,500) of realistic sizes (300 B to 50 kB, log-uniform, in 30
directories two levels deep), mounts it with the default content cache (64 MiB, or
``--cache-size``) and ``--search local`` (the hosted API has no search: the mount indexes the
store itself; ``--search auto`` to let the reference server rank), then runs a mixed workload
for ``--minutes`` (2; the goal's figure is 10) or ``--steps`` (the same work at any load, for
two runs side by side): ``cat`` of a memory, ``grep -r`` of a directory and now and then of
the whole mount, ``ls -R``, edits (an appended line), new files, renames,
deletes, reads of ``.versions/`` (the log, a point-in-time view, a memory's history) and of
``.search/`` — one after the other, drawn at random with a fixed seed, so two runs do the same
work.

Every ``--every`` seconds (5) it samples the daemon's RSS and PSS (``/proc/PID/smaps_rollup``)
and what holds memory as the daemon counts it (``memfs status --json``: its ``memory``
section: the content cache's bytes, the version cache's, the listings', the inodes, the
version index, the search index). Reports RSS and PSS at start (after the first ``ls``), at the
end and at their peak, the breakdown at the end, the goal (cache budget + 40 MB), the RSS by
minute and the operations done.

``--trace``: run the daemon under ``tracemalloc`` (``PYTHONTRACEMALLOC``) and print its top
allocation sites at the end, on stderr (the daemon writes them when ``MEMFS_DEBUG_MEMORY_FILE``
names a file); tracing costs memory itself, so its RSS is not the figure to record. Owns no
product code.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import random
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from bench import proc
from bench.fixtures import bench_key
from bench.harness import Case, Row
from bench.mounted import Mount, seed, server
from memfs.api.config import ClientConfig, Secret

log = logging.getLogger(__name__)
MB = 1_000_000
GOAL_SLACK_MB = 40  # the goal: RSS within the cache budget plus this much

WORDS = [
    "tomato", "sauce", "basil", "garlic", "onion", "pepper", "deploy", "rollback", "incident",
    "latency", "budget", "cache", "kernel", "inode", "socket", "thread", "mutex", "queue",
    "journal", "replica", "shard", "index", "search", "vector", "token", "prompt", "agent",
    "memory", "session", "store", "review", "design", "meeting", "action", "owner", "deadline",
]  # fmt: skip


def make_tree(count: int, rng: random.Random) -> dict[str, str]:
    """``count`` memories of 300 B to 50 kB (log-uniform), in 30 directories two deep."""
    tree = {}
    for n in range(count):
        size = int(math.exp(rng.uniform(math.log(300), math.log(50_000))))
        directory = f"/area-{n % 6}/topic-{n % 5}"
        tree[f"{directory}/note-{n:05}.md"] = text(rng, size, title=f"note {n}")
    return tree


def text(rng: random.Random, size: int, *, title: str) -> str:
    lines = [f"# {title}"]
    length = len(lines[0])
    while length < size:
        line = " ".join(rng.choices(WORDS, k=12))
        lines.append(line)
        length += len(line) + 1
    return "\n".join(lines)[:size] + "\n"


def smaps(pid: int) -> tuple[float, float]:
    """(RSS, PSS) of ``pid`` in MB."""
    rss, pss = proc.smaps_kib(pid)
    return rss * 1024 / MB, pss * 1024 / MB


class Sampler:
    """Samples the daemon's RSS/PSS every ``every`` seconds in a thread."""

    def __init__(self, pid: int, every: float) -> None:
        self.pid, self.every = pid, every
        self.samples: list[tuple[float, float, float]] = []  # (seconds, rss, pss)
        self._stop = threading.Event()
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.every)

    def sample(self) -> tuple[float, float]:
        rss, pss = smaps(self.pid)
        self.samples.append((time.monotonic() - self._started, rss, pss))
        return rss, pss

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class Workload:
    """The mixed workload on a mount (module docstring); counts what it did."""

    def __init__(self, root: Path, tree: dict[str, str], rng: random.Random) -> None:
        self.root, self.rng = root, rng
        self.live = sorted(tree)
        self.directories = sorted({p.rsplit("/", 1)[0] for p in tree})
        self.next_new = 0
        self.counts: dict[str, int] = {}
        self.steps: list[tuple[str, int, Callable[[], None]]] = [
            ("cat", 30, self.cat),
            ("grep -r directory", 5, self.grep_directory),
            ("grep -r mount", 1, self.grep_mount),
            ("ls -R", 2, self.ls_recursive),
            ("edit", 15, self.edit),
            ("new file", 8, self.new_file),
            ("rename", 5, self.rename),
            ("delete", 6, self.delete),
            ("versions", 8, self.versions),
            ("search", 5, self.search),
        ]

    def step(self) -> None:
        name, _, action = self.rng.choices(self.steps, weights=[w for _, w, _ in self.steps])[0]
        try:
            action()
        except OSError as exc:  # a race with our own earlier step (a file renamed away...)
            name += f" failed ({exc.strerror})"
        self.counts[name] = self.counts.get(name, 0) + 1

    def path(self, store_path: str) -> Path:
        return self.root / store_path.lstrip("/")

    def cat(self) -> None:
        self.path(self.rng.choice(self.live)).read_bytes()

    def grep_directory(self) -> None:
        directory = self.path(self.rng.choice(self.directories))
        run(["grep", "-rlc", self.rng.choice(WORDS), str(directory)])

    def grep_mount(self) -> None:
        run(["grep", "-rlc", self.rng.choice(WORDS), str(self.root)])

    def ls_recursive(self) -> None:
        run(["ls", "-lR", str(self.root)])

    def edit(self) -> None:
        with open(self.path(self.rng.choice(self.live)), "a") as file:
            file.write(" ".join(self.rng.choices(WORDS, k=10)) + "\n")

    def new_file(self) -> None:
        size = int(math.exp(self.rng.uniform(math.log(300), math.log(50_000))))
        store_path = f"{self.rng.choice(self.directories)}/new-{self.next_new:05}.md"
        self.next_new += 1
        self.path(store_path).write_text(text(self.rng, size, title=store_path))
        self.live.append(store_path)

    def rename(self) -> None:
        old = self.live.pop(self.rng.randrange(len(self.live)))
        new = f"{self.rng.choice(self.directories)}/moved-{self.next_new:05}.md"
        self.next_new += 1
        self.live.append(new)
        os.rename(self.path(old), self.path(new))

    def delete(self) -> None:
        self.path(self.live.pop(self.rng.randrange(len(self.live)))).unlink()

    def versions(self) -> None:
        versions = self.root / ".versions"
        choice = self.rng.randrange(3)
        if choice == 0:
            (versions / "log.txt").read_bytes()
        elif choice == 1:  # a memory's history, every version of it
            history = versions / "history" / self.rng.choice(self.live).lstrip("/")
            for entry in os.listdir(history):
                (history / entry).read_bytes()
        else:  # a point-in-time view of one directory
            instants = [n for n in os.listdir(versions) if n[:1].isdigit()]
            if instants:
                view = versions / self.rng.choice(instants) / self.rng.choice(self.directories)
                for entry in os.listdir(view)[:20]:
                    (view / entry).read_bytes()

    def search(self) -> None:
        query = " ".join(self.rng.sample(WORDS, 2))
        (self.root / ".search" / query).read_bytes()


def run(argv: list[str]) -> None:
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    rng = random.Random(args.seed)
    tree = make_tree(args.memories, rng)
    key = bench_key()
    with server(key, work) as url:
        config = ClientConfig(api_key=Secret(key), base_url=url)
        store_id = trio.run(seed, config, tree)
        env = dict(os.environ, ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY=key)
        env.pop("MEMFS_API_KEYS", None)
        debug_file = work / "memory-debug.txt"
        if args.trace:
            env.update(PYTHONTRACEMALLOC="1", MEMFS_DEBUG_MEMORY_FILE=str(debug_file))
        mount = Mount(store_id, work / "mnt", env, work / "cache")
        extra = ["--search", args.search]
        if args.cache_size is not None:
            extra += ["--cache-size", str(args.cache_size)]
        mount.mount(*extra)
        try:
            os.listdir(mount.point)
            status = mount.status()
            pid = status["pid"]
            budget_mb = status["cache"]["content_limit_bytes"] / MB
            sampler = Sampler(pid, args.every)
            start_rss, start_pss = sampler.sample()
            sampler.start()
            workload = Workload(mount.point, tree, rng)
            deadline = time.monotonic() + args.minutes * 60
            steps = 0
            while time.monotonic() < deadline and steps != args.steps:
                workload.step()
                steps += 1
            minutes = (time.monotonic() - deadline) / 60 + args.minutes
            mount.settle()
            sampler.stop()
            end_rss, end_pss = sampler.sample()
            breakdown = mount.status().get("memory", {})
            trace = debug_file.read_text() if debug_file.exists() else ""
        finally:
            mount.umount()
    samples = sampler.samples
    return {
        "memories": args.memories,
        "store_mb": round(sum(len(v) for v in tree.values()) / MB, 1),
        "minutes": round(minutes, 1),
        "steps": steps,
        "cache_budget_mb": round(budget_mb, 1),
        "goal_mb": round(budget_mb + GOAL_SLACK_MB, 1),
        "rss_start_mb": round(start_rss, 1),
        "pss_start_mb": round(start_pss, 1),
        "rss_end_mb": round(end_rss, 1),
        "pss_end_mb": round(end_pss, 1),
        "rss_peak_mb": round(max(s[1] for s in samples), 1),
        "pss_peak_mb": round(max(s[2] for s in samples), 1),
        "rss_by_minute": rss_by_minute(samples),
        "operations": dict(sorted(workload.counts.items())),
        "breakdown": breakdown,
        "trace": trace,
    }


def rss_by_minute(samples: list[tuple[float, float, float]]) -> list[float]:
    """The RSS (MB) of the last sample of each minute."""
    by_minute: dict[int, float] = {}
    for seconds, rss, _ in samples:
        by_minute[int(seconds // 60)] = round(rss, 1)
    return [by_minute[m] for m in sorted(by_minute)]


def rows_of(result: dict[str, Any]) -> list[Row]:
    """The result as rows: the workload, RSS and PSS, the goal, by minute, operations, holders."""
    goal = result["goal_mb"]
    rows: list[Row] = [
        {"memories": result["memories"], "store_mb": result["store_mb"],
         "minutes": result["minutes"], "steps": result["steps"]},
        {"moment": "start (after the first `ls`)", "rss_mb": result["rss_start_mb"],
         "pss_mb": result["pss_start_mb"]},
        {"moment": "end of the workload", "rss_mb": result["rss_end_mb"],
         "pss_mb": result["pss_end_mb"]},
        {"moment": "peak", "rss_mb": result["rss_peak_mb"], "pss_mb": result["pss_peak_mb"]},
        {"goal": f"cache budget + {GOAL_SLACK_MB} MB", "cache_budget_mb": result["cache_budget_mb"],
         "goal_mb": goal,
         "within": result["rss_end_mb"] <= goal and result["rss_peak_mb"] <= goal},
    ]  # fmt: skip
    rows += [{"minute": n, "rss_mb": mb} for n, mb in enumerate(result["rss_by_minute"])]
    rows += [{"operation": name, "count": n} for name, n in result["operations"].items()]
    for name, part in result["breakdown"].items():
        if isinstance(part, dict):
            rows.append({"held by": name, "mb": part.get("bytes", 0) / MB,
                         "entries": part.get("entries")})  # fmt: skip
    return rows


class MemoryCase(Case[None]):
    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--memories", type=int, default=1500)
        parser.add_argument("--minutes", type=float, default=2.0)
        parser.add_argument(
            "--steps", type=int, default=None,
            help="stop after this many steps (--minutes at most): runs compare at any load",
        )  # fmt: skip
        parser.add_argument("--every", type=float, default=5.0, help="seconds between samples")
        parser.add_argument("--cache-size", type=float, default=None, metavar="MB")
        parser.add_argument("--search", default="local", choices=["local", "auto"])
        parser.add_argument("--seed", type=int, default=21)
        parser.add_argument("--trace", action="store_true", help="tracemalloc in the daemon")

    def run(self, options: argparse.Namespace, fixture: None) -> list[Row]:
        with tempfile.TemporaryDirectory(prefix="memfs-bench-memory-") as work:
            result = measure(options, Path(work))
        if result["trace"]:
            log.info("tracemalloc, top allocation sites:\n%s", result["trace"])
        return rows_of(result)


CASE = MemoryCase()
