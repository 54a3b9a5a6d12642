"""Change-stream fan-out (``memfs.server.http.fanout``) on a real server, over real sockets, on both
backends: hundreds of streams of both APIs on one store cost one storage read per change (the
server's ``memfs_server_change_stream_reads_total``), every stream gets every change in commit
order, and a follower that joins late or lags catches up from storage on its own; with two
replicas on one PostgreSQL database, each reads once per change for all of its streams."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from hypercorn.config import Config
from hypercorn.trio import serve as hypercorn_serve

from kit.databricks import ACTOR, API, Workspace
from kit.servers import ServerProcess, free_port
from kit.sse import RawStream
from kit.waiting import wait_until
from memfs.contract.errors import ServiceUnavailableError
from memfs.contract.models import sha256_hex
from memfs.server.app import create_app
from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.db.notify import ChangeHub
from memfs.server.http.metrics import Metrics

from .helpers import KEY

STREAMS = 300  # per API
BUFFER = 8  # the server's --stream-buffer: what a follower may lag before it reads on its own
REPLICA_STREAMS = 50  # per API, on each of two replicas


@pytest.fixture(params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerProcess]:
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    extra = ["--max-streams-per-key", str(2 * STREAMS + 8), "--stream-buffer", str(BUFFER)]
    with ServerProcess(
        db=tmp_path / "memfs.db", port=free_port(), db_url=url, extra_args=extra
    ) as proc:
        yield proc


def reads(server: ServerProcess) -> dict[tuple[str, str], int]:
    """The server's change-stream storage reads by (stream, reader)."""
    text = httpx.get(server.base_url + "/metrics").text
    found = re.findall(
        r'memfs_server_change_stream_reads_total\{stream="(\w+)",reader="(\w+)"\} (\d+)', text
    )
    return {(stream, reader): int(count) for stream, reader, count in found}


def memory_headers(server: ServerProcess) -> dict[str, str]:
    return {"x-api-key": server.api_key, "anthropic-version": "2023-06-01"}


async def open_streams(nursery: trio.Nursery, streams: list[RawStream]) -> None:
    """Start every stream at once; return when each one is ready."""
    async with trio.open_nursery() as opening:
        for stream in streams:
            opening.start_soon(nursery.start, stream.run)


class MemoryStore:
    """A Memory Stores store with one memory, written through the API."""

    def __init__(self, client: httpx.AsyncClient, store_id: str, memory_id: str) -> None:
        self.client = client
        self.store_id = store_id
        self.memory_id = memory_id

    @classmethod
    async def create(cls, client: httpx.AsyncClient) -> MemoryStore:
        store = (await client.post("/v1/memory_stores", json={"name": "fanout"})).json()["id"]
        made = await client.post(
            f"/v1/memory_stores/{store}/memories", json={"path": "/m.md", "content": "0"}
        )
        return cls(client, store, made.json()["id"])

    @property
    def changes(self) -> str:
        return f"/v1/memory_stores/{self.store_id}/memfs/changes"

    async def write(self, content: str) -> str:
        """The id of the version the write made."""
        answer = await self.client.post(
            f"/v1/memory_stores/{self.store_id}/memories/{self.memory_id}",
            json={"content": content},
        )
        assert answer.status_code == 200, answer.text
        return str(answer.json()["memory_version_id"])


def version_ids(stream: RawStream) -> list[str]:
    return [data["id"] for _, data in stream.named("memory_version")]


def entry_digests(stream: RawStream) -> list[str]:
    return [data["content_sha256"] for _, data in stream.named("entry_change")]


async def streams_cost_one_read_per_change(servers: list[ServerProcess], per_server: int) -> None:
    """``per_server`` streams of each API on one store on each of ``servers`` (replicas of one
    database when several), changes written through the first: every stream gets every change,
    and each server reads storage once per change per store (fewer when changes come faster
    than reads), never once per stream."""
    writer = servers[0]
    space = Workspace(writer)
    dbx_store = space.create_store()
    entry = space.put(dbx_store, "/e.md", "0")
    bearer = {"authorization": f"Bearer {writer.api_key}"}
    async with (
        httpx.AsyncClient(base_url=writer.base_url, headers=memory_headers(writer)) as client,
        trio.open_nursery() as nursery,
    ):
        store = await MemoryStore.create(client)
        dbx_path = f"{API}/{dbx_store}/memfs/changes?actor_id={ACTOR}"
        memory_streams = [
            RawStream(server.port, store.changes, memory_headers(server))
            for server in servers
            for _ in range(per_server)
        ]
        dbx_streams = [
            RawStream(server.port, dbx_path, bearer)
            for server in servers
            for _ in range(per_server)
        ]
        await open_streams(nursery, memory_streams + dbx_streams)
        # A first change each, delivered everywhere: every stream now follows the live position.
        written = [await store.write("first")]
        await trio.to_thread.run_sync(space.patch, dbx_store, entry, "first")
        with trio.fail_after(60):
            for stream in memory_streams:
                await stream.wait_for("memory_version", 1)
            for stream in dbx_streams:
                await stream.wait_for("entry_change", 1)
        before = [await trio.to_thread.run_sync(reads, server) for server in servers]

        changes = 5
        contents = [f"change {i}" for i in range(changes)]
        for content in contents:
            written.append(await store.write(content))
            await trio.to_thread.run_sync(space.patch, dbx_store, entry, content)
        with trio.fail_after(60):
            for stream in memory_streams:
                await stream.wait_for("memory_version", changes + 1)
            for stream in dbx_streams:
                await stream.wait_for("entry_change", changes + 1)
        after = [await trio.to_thread.run_sync(reads, server) for server in servers]
        nursery.cancel_scope.cancel()
    space.http.close()

    digests = [sha256_hex(text) for text in ["first", *contents]]
    for stream in memory_streams:
        assert version_ids(stream) == written
    for stream in dbx_streams:
        assert entry_digests(stream) == digests
    for was, now in zip(before, after, strict=True):
        spent = {key: now.get(key, 0) - was.get(key, 0) for key in now}
        for api in ("memory_stores", "databricks"):
            assert 1 <= spent[(api, "shared")] <= changes, spent
            assert spent[(api, "own")] == 0, spent


async def test_hundreds_of_streams_cost_one_storage_read_per_change(
    server: ServerProcess,
) -> None:
    await streams_cost_one_read_per_change([server], STREAMS)


async def test_each_replica_reads_once_per_change_for_all_its_streams(
    pg_url: str, tmp_path: Path
) -> None:
    """Two ``memfs server`` processes on one PostgreSQL database (the writes' NOTIFY reaches
    both): streams on both, writes through one."""
    extra = ["--max-streams-per-key", str(2 * REPLICA_STREAMS + 8), "--stream-buffer", str(BUFFER)]
    replicas = [
        ServerProcess(db=tmp_path / f"{i}.db", port=free_port(), db_url=pg_url, extra_args=extra)
        for i in range(2)
    ]
    try:
        async with trio.open_nursery() as starting:
            for replica in replicas:
                starting.start_soon(trio.to_thread.run_sync, replica.start)
        await streams_cost_one_read_per_change(replicas, REPLICA_STREAMS)
    finally:
        for replica in replicas:
            replica.stop()


async def test_late_and_lagging_followers_catch_up_on_their_own(server: ServerProcess) -> None:
    """A stream opened after a cursor older than what the server keeps for followers, and one
    that stops reading while the others go on (its socket full, the server's buffer of recent
    changes past it), get every change in order, from storage on their own; the prompt follower
    got them all while the slow one read nothing."""
    headers = memory_headers(server)
    big = "x" * 90_000  # full views: a few of these fill the paused stream's socket
    async with (
        httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=30) as client,
        trio.open_nursery() as nursery,
    ):
        store = await MemoryStore.create(client)
        first = await store.write("first")
        full = store.changes + "?view=full"
        prompt = RawStream(server.port, full, headers)
        slow = RawStream(server.port, full, headers, recv_buffer=4096)
        await open_streams(nursery, [prompt, slow])
        slow.pause()
        count = 3 * BUFFER
        written = [await store.write(f"{i} {big}") for i in range(count)]
        with trio.fail_after(60):
            await prompt.wait_for("memory_version", count)
        assert slow.count("memory_version") < count  # paused: it lags
        late = RawStream(server.port, store.changes, {**headers, "last-event-id": first})
        own_before = (await trio.to_thread.run_sync(reads, server))[("memory_stores", "own")]
        await nursery.start(late.run)
        slow.resume()
        with trio.fail_after(60):
            await slow.wait_for("memory_version", count)
            await late.wait_for("memory_version", count)
        # Both are live again: the next change reaches all three.
        written.append(await store.write("last"))
        with trio.fail_after(30):
            for stream in (prompt, slow, late):
                await stream.wait_for("memory_version", count + 1)
        own_after = (await trio.to_thread.run_sync(reads, server))[("memory_stores", "own")]
        nursery.cancel_scope.cancel()
    for stream in (prompt, slow, late):
        assert version_ids(stream) == written
    assert [data["content"][:3] for _, data in slow.named("memory_version")][:2] == ["0 x", "1 x"]
    assert own_after - own_before >= 2  # the late one's catch-up, and the slow one's


class AwayStorage(SqliteStorage):
    """Storage whose version reads fail as a database that cannot be reached, on demand (the
    fault the change streams meet when their database goes away)."""

    away = False

    async def list_versions(self, *args: Any, **kwargs: Any) -> Any:
        if self.away:
            raise ServiceUnavailableError("the database is unavailable; retry later")
        return await super().list_versions(*args, **kwargs)


async def test_streams_waiting_for_a_read_that_fails_end_with_it(tmp_path: Path) -> None:
    """The database goes away: the one read every stream of the store waited for fails, and
    every stream ends with it (its client reconnects), none trying again behind it."""
    hub = ChangeHub()
    storage = await AwayStorage.open(tmp_path / "away.db", hub=hub)
    metrics = Metrics()
    config = Config()
    config.bind = [f"127.0.0.1:{free_port()}"]
    config.accesslog = None
    headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
    try:
        async with trio.open_nursery() as nursery:
            app = create_app(storage, [KEY], metrics=metrics, change_hub=hub)
            await nursery.start(partial(hypercorn_serve, app, config))
            port = int(config.bind[0].rsplit(":", 1)[1])
            async with httpx.AsyncClient(
                base_url="http://" + config.bind[0], headers=headers
            ) as client:
                store = await MemoryStore.create(client)
                streams = [RawStream(port, store.changes, headers) for _ in range(20)]
                await open_streams(nursery, streams)
                await store.write("joined")
                with trio.fail_after(30):
                    for stream in streams:
                        await stream.wait_for("memory_version", 1)
                shared = metrics.stream_reads("memory_stores", "shared")
                storage.away = True
                await store.write("unread")
                # Every stream ended: its subscription released, the store's feed dropped.
                await wait_until(lambda: hub.subscriber_count == 0, timeout=10)
            assert metrics.stream_reads("memory_stores", "shared") - shared == 1
            assert all(stream.count("memory_version") == 1 for stream in streams)
            nursery.cancel_scope.cancel()
    finally:
        await storage.aclose()
