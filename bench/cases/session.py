"""Benchmark a ``memfs session`` of 1, 4 and 8 stores against one ``memfs mount`` of one store.

Starts one ``memfs server --faults none`` on a throwaway database and seeds, through both of
its APIs, stores of ``--memories`` memories each (the tree of the mount case: 0.2-20 kB,
log-uniform). A session of N stores mixes them as a sandbox would: every fourth store is a
Databricks Agent Memory store (one actor's entries), the third of every four is attached
read-only, the rest are read-write Memory Stores stores. For each size, and for one
``memfs mount`` of one Memory Stores store, ``--runs`` times (mount and sessions alternating):

- processes: the session's supervisor and every daemon it serves its stores with, counted from
  the process tree (every process whose command line names the root or a mount point under it,
  and their descendants), never assumed;
- memory: PSS from ``/proc/PID/smaps_rollup`` summed over those processes (RSS beside it), a
  second after every store answered ``ls``;
- start-up: from the command's start until every store's directory answered its first ``ls``
  (``memfs session --detach`` returns once every store is mounted; the ``ls`` follow).

Each figure is the median of the runs, with its ratio to the mount's.

Then memory in steady state: a mount of one store of ``--workload-memories`` memories with a
64 MiB content cache (``--cache-size 64``), and a session of ``--workload-stores`` stores holding
the same memories between them (the session is given ``--cache-size 64`` if it takes one; before
that, each of its daemons has its own 64 MiB default), each runs the same mixed workload for
``--workload-seconds`` (reads of whole files, overwrites and new files, ``ls``, ``grep -r`` of a
directory; seeded, so the same sequence), then RSS and PSS of each process and their sum.

Everything it starts is stopped and unmounted, even on failure. memfs runs from compiled
bytecode, as when installed. Owns no product code. The issue's figures: ``--runs 3
--workload-memories 1500 --workload-seconds 600``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench import proc
from bench.fixtures import bench_key
from bench.harness import Case, Row, median
from bench.mounted import make_tree, mounted, server

HEADERS = {"anthropic-version": "2023-06-01", "anthropic-beta": "agent-memory-2026-07-22"}
DATABRICKS = "/api/2.0/agents/memory-stores"
ACTOR = "bench-agent"
CACHE_MB = 64


# --- the stores, seeded through each API as any client would --------------------------------


@dataclass
class Store:
    """One store of the server and how a session attaches it."""

    id: str
    slug: str  # its directory in a session: the name's slug, a Databricks store's id
    databricks: bool = False
    read_only: bool = False

    def resource(self) -> dict[str, Any]:
        access = "read_only" if self.read_only else "read_write"
        entry: dict[str, Any] = {
            "type": "memory_store",
            "memory_store_id": self.id,
            "access": access,
        }
        if self.databricks:
            entry.update(api="databricks", actor_id=ACTOR)
        return entry


class Seeder:
    """Creates stores and their memories on the server (8 requests in flight)."""

    def __init__(self, url: str, key: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=30)
        self.key = key

    def close(self) -> None:
        self.http.close()

    def _call(self, method: str, path: str, *, databricks: bool, **kwargs: Any) -> Any:
        headers = (
            {"authorization": f"Bearer {self.key}"}
            if databricks
            else {**HEADERS, "x-api-key": self.key}
        )
        answer = self.http.request(method, path, headers=headers, **kwargs)
        if answer.status_code >= 400:
            raise RuntimeError(f"{method} {path}: {answer.status_code} {answer.text[:200]}")
        return answer.json()

    def store(self, tree: dict[str, str], *, databricks: bool, read_only: bool = False) -> Store:
        name = f"bench-{secrets.token_hex(4)}"
        if databricks:
            self._call(
                "POST",
                DATABRICKS,
                databricks=True,
                params={"managed_memory_store_id": name},
                json={},
            )
            store = Store(name, name, databricks=True, read_only=read_only)

            def put(item: tuple[str, str]) -> None:
                body = {"actor_id": ACTOR, "path": item[0], "content": item[1]}
                self._call("POST", f"{DATABRICKS}/{name}/entries", databricks=True, json=body)
        else:
            created = self._call("POST", "/v1/memory_stores", databricks=False, json={"name": name})
            store = Store(created["id"], name, read_only=read_only)

            def put(item: tuple[str, str]) -> None:
                body = {"path": item[0], "content": item[1]}
                self._call(
                    "POST", f"/v1/memory_stores/{store.id}/memories", databricks=False, json=body
                )

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(put, tree.items()))
        return store


def mixed(index: int) -> dict[str, bool]:
    """The ``index``-th store of a session: every fourth Databricks, the third read-only."""
    return {"databricks": index % 4 == 3, "read_only": index % 4 == 2}


# --- processes and their memory ---------------------------------------------------------------


def processes_of(paths: list[Path]) -> set[int]:
    """Every process whose command line names one of ``paths`` (or a path under one), and all
    their descendants: a session's supervisor and daemons, however many it runs."""
    prefixes = [str(p) for p in paths]
    parents: dict[int, int] = {}
    named: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        pid = int(entry)
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            stat = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:  # exited meanwhile
            continue
        if stat[0] == "Z":
            continue
        parents[pid] = int(stat[1])
        if any(arg == p or arg.startswith(p + "/") for arg in argv for p in prefixes):
            named.add(pid)
    found = set(named)
    grew = True
    while grew:
        children = {pid for pid, parent in parents.items() if parent in found} - found
        found |= children
        grew = bool(children)
    return found


@dataclass
class Footprint:
    processes: int
    pss_mb: float
    rss_mb: float
    per_process_mb: list[tuple[str, float, float]] = field(default_factory=list)


def footprint(paths: list[Path]) -> Footprint:
    pids = processes_of(paths)
    rows = []
    for pid in sorted(pids):
        rss, pss = proc.smaps_kib(pid)
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:  # exited meanwhile
            continue
        role = " ".join(a.decode(errors="replace") for a in argv[1:5])
        rows.append((f"{pid} {role}", pss / 1024, rss / 1024))
    return Footprint(
        len(pids), sum(r[1] for r in rows), sum(r[2] for r in rows), per_process_mb=rows
    )


# --- mounts and sessions ----------------------------------------------------------------------


def memfs(
    env: dict[str, str], *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memfs", *args],
        env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def mounts_under(root: Path) -> list[str]:
    with open("/proc/self/mounts") as table:
        points = [line.split()[1].replace("\\040", " ") for line in table]
    return [p for p in points if p == str(root) or p.startswith(str(root) + "/")]


def session_takes_cache_size(env: dict[str, str]) -> bool:
    return "--cache-size" in memfs(env, "session", "--help").stdout


class Target:
    """One ``memfs mount`` or one ``memfs session``: started, its stores' directories, stopped.
    ``stop`` unmounts whatever is left under its directory, whatever happened before."""

    def __init__(self, work: Path, name: str, env: dict[str, str]) -> None:
        self.root = work / name
        self.env = env
        self.stores: list[Path] = []

    def start(self) -> float:
        """Seconds from the command's start until every store answered its first ``ls``."""
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def _detach_leftovers(self) -> None:
        """After a stop: detach any mount left under the root and end any process of ours
        still naming it (a stop that failed half-way)."""
        for point in sorted(mounts_under(self.root), reverse=True):
            subprocess.run(["fusermount3", "-u", "-z", point], capture_output=True, check=False)
        for pid in processes_of([self.root]):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    def footprint(self) -> Footprint:
        return footprint([self.root])


class OneMount(Target):
    def __init__(self, work: Path, name: str, env: dict[str, str], store: Store) -> None:
        super().__init__(work, name, env)
        self.store = store
        self.stores = [self.root]

    def start(self) -> float:
        self.root.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        done = memfs(
            self.env, "mount", self.store.id, str(self.root), "--cache-size", str(CACHE_MB)
        )
        if done.returncode:
            raise RuntimeError(f"memfs mount: {done.stderr.strip()}")
        os.listdir(self.root)
        return time.perf_counter() - started

    def stop(self) -> None:
        if mounted(self.root):
            memfs(self.env, "umount", str(self.root))
        self._detach_leftovers()


class Session(Target):
    def __init__(
        self, work: Path, name: str, env: dict[str, str], stores: list[Store], cache_size: bool
    ) -> None:
        super().__init__(work, name, env)
        self.config = work / f"{name}.json"
        self.config.write_text(json.dumps({"resources": [s.resource() for s in stores]}))
        self.cache_size = cache_size
        self.started = False
        self.stores = [self.root / s.slug for s in stores]
        self.writable = [not s.read_only for s in stores]

    def start(self) -> float:
        extra = ["--cache-size", str(CACHE_MB)] if self.cache_size else []
        started = time.perf_counter()
        self.started = True
        done = memfs(
            self.env, "session", "--config", str(self.config), "--root", str(self.root),
            "--detach", "--prompt-file", str(self.root.parent / f"{self.root.name}.md"), *extra,
        )  # fmt: skip
        if done.returncode:
            raise RuntimeError(f"memfs session: {done.stderr.strip()}")
        for store in self.stores:
            os.listdir(store)
        return time.perf_counter() - started

    def stop(self) -> None:
        if self.started:
            memfs(self.env, "session", "stop", "--root", str(self.root), timeout=120)
            self.started = False
        self._detach_leftovers()


@contextlib.contextmanager
def running(target: Target) -> Iterator[float]:
    try:
        yield target.start()
    finally:
        target.stop()


# --- the steady-state workload ----------------------------------------------------------------


def workload(targets: list[tuple[Path, bool]], seconds: float, seed: int) -> dict[str, int]:
    """Reads, writes, ``ls`` and ``grep -r`` on ``targets`` ((directory, writable)) for
    ``seconds``: the same sequence for the same seed. Files it creates are removed again, so the
    stores keep their size. Returns how many of each operation ran."""
    rng = random.Random(seed)
    files = {root: sorted(str(p) for p in root.rglob("*.md")) for root, _ in targets}
    dirs = {root: sorted(str(p) for p in root.iterdir() if p.is_dir()) for root, _ in targets}
    created: list[str] = []
    counts = dict.fromkeys(("read", "write", "create", "remove", "ls", "grep"), 0)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        root, writable = rng.choice(targets)
        roll = rng.random()
        if roll < 0.55 or not files[root]:
            with open(rng.choice(files[root]), "rb") as handle:
                handle.read()
            counts["read"] += 1
        elif roll < 0.70:
            os.listdir(rng.choice(dirs[root]) if dirs[root] else root)
            counts["ls"] += 1
        elif roll < 0.74:
            target = rng.choice(dirs[root]) if dirs[root] else str(root)
            subprocess.run(["grep", "-r", "-l", "NEEDLE", target], capture_output=True, check=False)
            counts["grep"] += 1
        elif not writable:
            os.stat(rng.choice(files[root]))
            counts["read"] += 1
        elif roll < 0.88:
            path = rng.choice(files[root])
            with open(path, "w") as handle:
                handle.write(f"rewritten {secrets.token_hex(8)}\n" * rng.randint(1, 400))
            counts["write"] += 1
        elif roll < 0.95 or not created:
            path = f"{rng.choice(dirs[root]) if dirs[root] else root}/new-{secrets.token_hex(6)}.md"
            with open(path, "w") as handle:
                handle.write(f"new {secrets.token_hex(8)}\n" * rng.randint(1, 200))
            created.append(path)
            counts["create"] += 1
        else:
            os.unlink(created.pop(rng.randrange(len(created))))
            counts["remove"] += 1
    for path in created:
        os.unlink(path)
    return counts


# --- the run ----------------------------------------------------------------------------------


def startup_rows(
    work: Path, env: dict[str, str], seeder: Seeder, sizes: list[int], memories: int, runs: int,
    cache_size: bool,
) -> list[Row]:  # fmt: skip
    tree = make_tree(memories, max(1, memories // 50), seed=1)
    stores = [seeder.store(tree, **mixed(i)) for i in range(max(sizes))]
    mount_store = seeder.store(tree, databricks=False)
    warm = OneMount(work, "warm-up", env, mount_store)
    with running(warm):  # untimed: writes the bytecode cache, as an install would have
        pass
    samples: dict[str, list[tuple[float, Footprint]]] = {}
    for n in range(runs):
        targets: list[tuple[str, Target]] = [("mount", OneMount(work, f"m{n}", env, mount_store))]
        targets += [
            (f"session {size}", Session(work, f"s{size}-{n}", env, stores[:size], cache_size))
            for size in sizes
        ]
        for label, target in targets[n % len(targets) :] + targets[: n % len(targets)]:
            with running(target) as seconds:
                time.sleep(1)
                samples.setdefault(label, []).append((seconds, target.footprint()))
    base = samples["mount"]
    base_pss = median([f.pss_mb for _, f in base])
    base_time = median([s for s, _ in base])
    rows: list[Row] = []
    for label, values in samples.items():
        pss = median([f.pss_mb for _, f in values])
        seconds = median([s for s, _ in values])
        size = 1 if label == "mount" else int(label.split()[1])
        kinds = [mixed(i) for i in range(size)] if label != "mount" else []
        rows.append({
            "target": label if label == "mount" else
            f"session of {size} ({sum(k['databricks'] for k in kinds)} Databricks, "
            f"{sum(k['read_only'] for k in kinds)} read-only)",
            "stores": size,
            "processes": "/".join(str(n) for n in sorted({f.processes for _, f in values})),
            "pss_mb": pss, "rss_mb": median([f.rss_mb for _, f in values]),
            "pss_ratio": pss / base_pss, "seconds": seconds, "seconds_ratio": seconds / base_time,
        })  # fmt: skip
    return rows


def steady_rows(
    work: Path, env: dict[str, str], seeder: Seeder, memories: int, stores: int, seconds: float,
    cache_size: bool,
) -> list[Row]:  # fmt: skip
    dirs = max(1, memories // 50)
    tree = make_tree(memories, dirs, seed=2)
    whole = seeder.store(tree, databricks=False)
    parts = [dict(list(tree.items())[i::stores]) for i in range(stores)]
    shared = [seeder.store(part, **mixed(i)) for i, part in enumerate(parts)]
    rows: list[Row] = []
    processes: list[Row] = []
    targets: list[tuple[str, Target]] = [
        ("mount, --cache-size 64", OneMount(work, "steady-mount", env, whole)),
        (f"session of {stores}" + (", --cache-size 64" if cache_size else ", 64 MB a store"),
         Session(work, "steady-session", env, shared, cache_size)),
    ]  # fmt: skip
    for label, target in targets:
        with running(target):
            at_start = target.footprint()
            writable = target.writable if isinstance(target, Session) else [True]
            counts = workload(list(zip(target.stores, writable, strict=True)), seconds, seed=3)
            after = target.footprint()
        rows.append({
            "target": label, "processes": after.processes,
            "start_pss_mb": at_start.pss_mb, "start_rss_mb": at_start.rss_mb,
            "pss_mb": after.pss_mb, "rss_mb": after.rss_mb,
            "operations": ", ".join(f"{n} {kind}" for kind, n in counts.items()),
        })  # fmt: skip
        processes += [
            {"target": label, "process": who, "pss_mb_after": p, "rss_mb_after": r}
            for who, p, r in after.per_process_mb
        ]
    return rows + processes


class SessionCase(Case[None]):
    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--sizes", default="1,4,8", help="sessions of these many stores")
        parser.add_argument("--memories", type=int, default=50, help="memories in each store")
        parser.add_argument("--runs", type=int, default=1, help="start-up runs (medians)")
        parser.add_argument("--workload-memories", type=int, default=400)
        parser.add_argument("--workload-stores", type=int, default=8)
        parser.add_argument("--workload-seconds", type=float, default=60)

    def note(self, options: argparse.Namespace) -> str:
        return (
            f"{options.memories} memories a store, start-up: median of {options.runs} run(s); "
            f"steady state: {options.workload_seconds:g} s of mixed work on "
            f"{options.workload_memories} memories"
        )

    def run(self, options: argparse.Namespace, fixture: None) -> list[Row]:
        sizes = [int(s) for s in options.sizes.split(",")]
        key = bench_key()
        with (
            tempfile.TemporaryDirectory(prefix="memfs-bench-session-") as tmp,
            server(key, Path(tmp)) as url,
        ):
            work = Path(tmp)
            env = dict(
                os.environ, ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY=key, DATABRICKS_HOST=url,
                DATABRICKS_TOKEN=key, HOME=str(work / "home"),
                MEMFS_STATE_DIR=str(work / "state"), XDG_CACHE_HOME=str(work / "xdg"),
            )  # fmt: skip
            env.pop("MEMFS_API_KEYS", None)
            env.pop("PYTHONDONTWRITEBYTECODE", None)  # compiled bytecode, as the mount case says
            env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
            seeder = Seeder(url, key)
            try:
                cache_size = session_takes_cache_size(env)
                start = startup_rows(
                    work, env, seeder, sizes, options.memories, options.runs, cache_size
                )
                steady = steady_rows(
                    work, env, seeder, options.workload_memories, options.workload_stores,
                    options.workload_seconds, cache_size,
                )  # fmt: skip
            finally:
                seeder.close()
                for point in mounts_under(work):
                    subprocess.run(["fusermount3", "-u", "-z", point], capture_output=True)
        return start + steady


CASE = SessionCase()
