"""Three ``memfs server`` replicas on one PostgreSQL database, hammered by concurrent clients.

What must hold across replicas: no lost update (precondition read-modify-write), no duplicate
path, the 2,000-memory limit, store-wide version order, migrations once, and every committed
change reaching a change-stream subscriber on every replica.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import trio

from kit.servers import ServerProcess, free_port
from memfs.api import StoreClient
from memfs.api.changes import ChangeStream
from memfs.contract.models import sha256_hex
from memfs.server.db import schema

from .helpers import config_for, http_for, new_store


def test_replicas_starting_together_migrate_once(pg_url: str, tmp_path: Path) -> None:
    procs = [
        ServerProcess(db=tmp_path / f"r{i}.db", port=free_port(), db_url=pg_url) for i in range(3)
    ]
    with ThreadPoolExecutor(3) as pool:
        try:
            list(pool.map(ServerProcess.start, procs))
        finally:
            list(pool.map(ServerProcess.stop, procs))
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
    assert rows == [(n,) for n, _ in schema.PG_MIGRATIONS]  # each step once, up to PG_LATEST
    assert [n for n, _ in schema.PG_MIGRATIONS] == [n for n, _ in schema.MIGRATIONS]


def test_precondition_races_across_replicas_lose_no_update(replicas: list[ServerProcess]) -> None:
    store_id = new_store(replicas[0])
    with http_for(replicas[0]) as c:
        memory = c.post(
            f"/v1/memory_stores/{store_id}/memories", json={"path": "/counter", "content": "0"}
        ).json()
    url = f"/v1/memory_stores/{store_id}/memories/{memory['id']}"
    workers, increments = 6, 8
    conflicts = Counter[int]()

    def worker(i: int) -> None:
        with http_for(replicas[i % len(replicas)]) as c:
            done = 0
            while done < increments:
                current = c.get(url).json()
                value = int(current["content"].split(":")[0]) + 1
                r = c.patch(
                    url,
                    json={
                        # Unique content: an identical write would succeed as a no-op (API rule).
                        "content": f"{value}:{i}:{done}",
                        "precondition": {
                            "type": "content_sha256",
                            "content_sha256": current["content_sha256"],
                        },
                    },
                )
                if r.status_code == 200:
                    done += 1
                else:
                    assert r.status_code == 409, r.text
                    assert r.json()["error"]["type"] == "memory_precondition_failed_error"
                    conflicts[i] += 1

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(worker, range(workers)))
    with http_for(replicas[2]) as c:
        final = c.get(url).json()
        versions = c.get(
            f"/v1/memory_stores/{store_id}/memory_versions",
            params={"memory_id": memory["id"], "limit": "100"},
        ).json()["data"]
    # Every successful increment is there: a lost update would leave the counter short.
    assert final["content"].split(":")[0] == str(workers * increments)
    assert final["content_sha256"] == sha256_hex(final["content"])
    assert len(versions) == workers * increments + 1
    times = [v["created_at"] for v in versions]
    assert times == sorted(times, reverse=True) and len(set(times)) == len(times)
    assert sum(conflicts.values()) > 0  # the replicas really did race


def test_creates_across_replicas_no_duplicate_path_and_the_limit_holds(
    replicas: list[ServerProcess],
) -> None:
    store_id = new_store(replicas[0], "limit")
    url = f"/v1/memory_stores/{store_id}/memories"
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()

    clients = [http_for(r) for r in replicas]

    def create(i: int) -> None:
        # Paths 0..2049, each tried by two replicas at once: at most one may win it.
        path = f"/m/{i // 2:04d}"
        r = clients[i % 3].post(url, json={"path": path, "content": str(i)})
        kind = r.json().get("error", {}).get("type", "ok") if r.status_code != 200 else "ok"
        if r.status_code == 400:
            assert r.json()["error"]["message"].startswith("Memory store is full")
            kind = "full"
        with lock:
            outcomes[kind] += 1

    try:
        with ThreadPoolExecutor(12) as pool:
            list(pool.map(create, range(2 * 2050)))
    finally:
        for client in clients:
            client.close()
    assert outcomes["ok"] == 2000
    assert outcomes["memory_path_conflict_error"] + outcomes["full"] == 2 * 2050 - 2000
    seen: list[str] = []
    with http_for(replicas[1]) as c:
        page = None
        while True:
            params = {"limit": "100", "path_prefix": "/m/", **({"page": page} if page else {})}
            body = c.get(url, params=params).json()
            seen.extend(m["path"] for m in body["data"])
            page = body["next_page"]
            if page is None:
                break
        r = c.post(url, json={"path": "/one-more", "content": ""})
        assert r.status_code == 400 and "full" in r.json()["error"]["message"]
    assert len(seen) == 2000 and len(set(seen)) == 2000 and seen == sorted(seen)


async def test_every_change_reaches_a_subscriber_on_every_replica(
    replicas: list[ServerProcess],
) -> None:
    store_id = new_store(replicas[0], "fanout")
    clients = [StoreClient(config_for(r)) for r in replicas]
    streams = [ChangeStream(client, store_id) for client in clients]
    received: list[list[str]] = [[] for _ in replicas]
    ready = [trio.Event() for _ in replicas]
    total = 3 * 20

    async def read(i: int) -> None:
        async for event in streams[i]:
            if event.kind == "ready":
                ready[i].set()
            elif event.version is not None:
                received[i].append(event.version.id)
                if len(received[i]) == total:
                    return

    def write(i: int) -> None:
        with http_for(replicas[i]) as c:
            for n in range(20):
                r = c.post(
                    f"/v1/memory_stores/{store_id}/memories",
                    json={"path": f"/r{i}/{n}", "content": "x"},
                )
                assert r.status_code == 200, r.text

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for i in range(len(replicas)):
                nursery.start_soon(read, i)
            for event in ready:
                await event.wait()
            async with trio.open_nursery() as writers:
                for i in range(len(replicas)):
                    writers.start_soon(trio.to_thread.run_sync, write, i)
    for client in clients:
        await client.aclose()
    with http_for(replicas[0]) as c:
        body = c.get(
            f"/v1/memory_stores/{store_id}/memory_versions", params={"limit": "100"}
        ).json()
    expected = [v["id"] for v in body["data"]][::-1]
    assert len(expected) == total
    for got in received:
        assert got == expected  # all of them, in the one commit order, on every replica


def test_server_refuses_a_postgres_url_it_cannot_reach(tmp_path: Path) -> None:
    env = {"MEMFS_API_KEYS": "sk-test-" + "z" * 20, "PATH": "/usr/bin:/bin"}
    bad = f"postgresql://memfs:s3cret-pw@/nowhere?host={tmp_path}&connect_timeout=2"
    result = subprocess.run(
        [sys.executable, "-m", "memfs", "server", "--db", bad, "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1, result.stderr[-2000:]
    assert "PostgreSQL" in result.stderr and "Traceback" not in result.stderr
    assert "s3cret-pw" not in result.stderr
