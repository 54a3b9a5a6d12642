"""What the mount cases share: ``make_tree``'s tree of realistic memories (0.2-20 kB, log-uniform,
in directories; every 7th holds NEEDLE), a ``memfs server --faults none`` whose latency is set at
run time (``set_latency``, through the fault admin endpoint), a store seeded with the tree and the
same tree on local disk (``seeded_server``), ``Mount`` (``memfs mount`` of a store, its requests
and memory from ``memfs status``), ``floorfs`` (the floor: ``bench.floorfs`` mounted), the SDK's
sync worker's start, and the loops timed on a mount and on a local directory alike.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import secrets
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from bench import proc
from bench.fixtures import bench_key, server_on
from kit.mounts import fsync_dir, memfs
from memfs.api import StoreClient
from memfs.api.config import ClientConfig, Secret

FEED_ROUTES = ("memory_versions", "/memfs/changes")


# Fault control (the injected latency) takes the server's admin key, never an API key.
ROOT = Path(__file__).resolve().parents[1]  # floorfs runs from here: ``python -m bench.floorfs``
ADMIN_KEY = "sk-memfs-bench-admin-" + secrets.token_hex(12)


def set_latency(url: str, seconds: float) -> None:
    spec = f"latency={seconds}" if seconds else "none"
    request = urllib.request.Request(
        url + "/v1/memfs/faults",
        data=json.dumps({"spec": spec}).encode(),
        headers={"x-api-key": ADMIN_KEY, "content-type": "application/json"},
        method="PUT",
    )
    urllib.request.urlopen(request, timeout=5).close()


def make_tree(count: int, dirs: int, seed: int) -> dict[str, str]:
    rng = random.Random(seed)
    words = ["memory", "agent", "note", "result", "todo", "fixed", "error", "plan", "user"]
    tree = {}
    for n in range(count):
        size = int(math.exp(rng.uniform(math.log(200), math.log(20_000))))
        text: list[str] = []
        while sum(len(w) + 1 for w in text) < size:
            text.append(rng.choice(words))
        body = " ".join(text)[:size]
        tree[f"/topic-{n % dirs:02}/note-{n:04}.md"] = body + ("\nNEEDLE\n" if n % 7 == 0 else "\n")
    return tree


def client_env(url: str, key: str, work: Path) -> dict[str, str]:
    """The environment of the memfs commands a benchmark runs against its server."""
    env = dict(os.environ, ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY=key)
    env.pop("MEMFS_API_KEYS", None)
    # memfs runs from compiled bytecode, as an installed package does, even where the
    # environment says not to write it (PYTHONDONTWRITEBYTECODE would compile every module
    # of memfs at every start: ~0.1 s of CPU per process): cached outside the tree
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    return env


def write_tree(tree: dict[str, str], directory: Path) -> Path:
    """The same tree as plain files under ``directory`` (the local side of a comparison)."""
    for path, content in tree.items():
        target = directory / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    return directory


async def seed(config: ClientConfig, tree: dict[str, str]) -> str:
    async with StoreClient(config) as client:
        store = await client.create_store(f"bench-{secrets.token_hex(4)}")
        items = list(tree.items())

        async def worker(start: int) -> None:
            for path, content in items[start::8]:
                await client.create_memory(store.id, path, content)

        async with trio.open_nursery() as nursery:
            for start in range(8):
                nursery.start_soon(worker, start)
        return store.id


@dataclass
class SeededServer:
    """A benchmark's server, its store seeded with ``tree``, and the same tree on local disk."""

    tree: dict[str, str]
    work: Path
    local: Path
    url: str
    key: str
    config: ClientConfig
    store_id: str
    env: dict[str, str]  # for the memfs commands run against the server (client_env)


@contextmanager
def server(key: str, workdir: Path) -> Iterator[str]:
    """``memfs server --faults none`` on ``workdir/bench.db`` (latency injected at run time by
    ``set_latency``); yields its base URL."""
    extra = ["--faults", "none"]
    with server_on(workdir / "bench.db", key, extra_args=extra, admin_key=ADMIN_KEY) as running:
        yield running.base_url


@contextmanager
def seeded_server(memories: int, dirs: int, prefix: str) -> Iterator[SeededServer]:
    """A throwaway work directory and server, one store seeded with ``make_tree``'s tree."""
    key = bench_key()
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        work = Path(tmp)
        tree = make_tree(memories, dirs, seed=1)
        local = write_tree(tree, work / "local")
        with server(key, work) as url:
            config = ClientConfig(api_key=Secret(key), base_url=url)
            store_id = trio.run(seed, config, tree)
            yield SeededServer(
                tree, work, local, url, key, config, store_id, client_env(url, key, work)
            )


def sdk_worker_start(url: str, key: str, store_id: str, target: Path) -> tuple[float, int]:
    """The SDK's sync worker starting on ``store_id``: ``SessionMemoryStores.download`` (the
    ``anthropic`` package's environments worker runs it before a session) into ``target``, then
    the first ``ls``. Returns (seconds, requests)."""
    from types import SimpleNamespace

    import anyio
    import httpx2
    from anthropic import AsyncAnthropic
    from anthropic.lib.tools._memories import SessionMemoryStores

    requests = 0

    async def count(request: httpx2.Request) -> None:
        nonlocal requests
        requests += 1

    async def start() -> float:
        http = httpx2.AsyncClient(event_hooks={"request": [count]})
        client = AsyncAnthropic(api_key=key, base_url=url, max_retries=0, http_client=http)
        resource = SimpleNamespace(
            type="memory_store", memory_store_id=store_id, mount_path=str(target), name=None,
            access="read_write",
        )  # fmt: skip
        stores = SessionMemoryStores(client, workdir=target.parent)
        started = time.perf_counter()
        await stores.download(SimpleNamespace(resources=[resource]))  # type: ignore[arg-type]
        os.listdir(target)
        seconds = time.perf_counter() - started
        await client.close()
        return seconds

    return anyio.run(start), requests


class Mount:
    def __init__(self, store_id: str, point: Path, env: dict[str, str], cache: Path) -> None:
        self.store_id, self.point, self.env, self.cache = store_id, point, env, cache
        point.mkdir(parents=True, exist_ok=True)

    def memfs(self, *args: str) -> subprocess.CompletedProcess[str]:
        return memfs(*args, env=self.env, timeout=600)

    def mount(self, *extra: str) -> None:
        result = self.memfs(
            "mount", self.store_id, str(self.point), "--cache-dir", str(self.cache), *extra
        )
        if result.returncode:
            raise RuntimeError(result.stderr)

    def umount(self) -> None:
        self.memfs("umount", str(self.point))

    def stop(self) -> None:
        """Unmount, and detach the mount if the daemon did not let it go."""
        self.umount()
        if mounted(self.point):
            subprocess.run(["fusermount3", "-u", "-z", str(self.point)], capture_output=True)

    def settle(self) -> None:
        """Until the daemon has uploaded everything pending (an fsync of the mount's root)."""
        fsync_dir(self.point)

    def status(self) -> dict[str, Any]:
        time.sleep(1.1)  # the daemon publishes its status every second
        doc: dict[str, Any] = json.loads(self.memfs("status", str(self.point), "--json").stdout)
        return doc

    def requests(self) -> int:
        routes = self.status()["requests"]["by_route"]
        return sum(n for r, n in routes.items() if not any(f in r for f in FEED_ROUTES))

    def rss_mb(self) -> float:
        return proc.rss_kib(self.status()["pid"]) / 1024


def mounted(point: Path) -> bool:
    """True if ``point`` is in the mount table (asks /proc, never the file system itself)."""
    with open("/proc/self/mounts") as mounts:
        return any(line.split()[1] == str(point) for line in mounts)


@contextmanager
def floorfs(source: Path, point: Path, *extra: str) -> Iterator[subprocess.Popen[bytes]]:
    """``bench.floorfs`` serving ``source`` on ``point`` (made here), with ``extra`` options;
    unmounted on the way out (it then exits by itself; else it is killed, the mount detached)."""
    point.mkdir()
    log = point.with_suffix(".log")
    command = [sys.executable, "-m", "bench.floorfs", *extra, str(source), str(point)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while not mounted(point):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"floorfs did not mount {point}: {log.read_text()[-2000:]}")
            time.sleep(0.02)
        yield proc
    finally:
        if mounted(point):
            subprocess.run(["fusermount3", "-u", str(point)], capture_output=True)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        if mounted(point):
            subprocess.run(["fusermount3", "-u", "-z", str(point)], capture_output=True)


def files_of(root: Path, tree: dict[str, str]) -> list[str]:
    return [str(root) + path for path in tree]


def read_all(files: list[str]) -> int:
    total = 0
    for name in files:
        with open(name, "rb") as handle:
            total += len(handle.read())
    return total


def stat_all(files: list[str]) -> None:
    for name in files:
        os.stat(name)


def walk_stat(root: Path) -> int:
    """``ls -lR``: every directory listed, every entry stat'ed."""
    count = 0
    for directory, _, files in os.walk(root):
        for name in files:
            os.stat(os.path.join(directory, name))
            count += 1
    return count


def grep(root: Path) -> None:
    subprocess.run(["grep", "-r", "-l", "NEEDLE", str(root)], capture_output=True, check=True)


def write_small_files(directory: Path, prefix: str, count: int, *, sync: bool) -> None:
    """``count`` new small files ``PREFIXwNNN.md`` in ``directory``, each written and closed
    (``sync``: ``fdatasync`` before the close, the fair local comparison for memfs, whose close
    is durable)."""
    for n in range(count):
        with open(directory / f"{prefix}w{n:03}.md", "w") as handle:
            handle.write(f"small file {n}\n")
            if sync:
                handle.flush()
                os.fdatasync(handle.fileno())


def write_many(root: Path, label: str, count: int = 200, *, sync: bool = False) -> None:
    """``count`` new small files in a fresh directory ``written-LABEL`` of ``root``."""
    target = root / f"written-{label.replace(' ', '')}"
    target.mkdir(exist_ok=True)
    write_small_files(target, "", count, sync=sync)


def add_tree_options(parser: argparse.ArgumentParser) -> None:
    """The options of a benchmark of ``make_tree``'s tree at server latencies."""
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--dirs", type=int, default=40)
    parser.add_argument("--latencies", default="0,0.05", help="comma-separated seconds")


def tree_note(memories: int, dirs: int) -> str:
    """The tree measured, under the machine line."""
    size = sum(len(c) for c in make_tree(memories, dirs, seed=1).values())
    return f"{memories} memories, {size / 1e6:.1f} MB in {dirs} directories"
