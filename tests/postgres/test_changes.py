"""The change stream on both backends, through the client reader, over real sockets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import trio

from kit.servers import ServerProcess
from memfs.api import RetryPolicy, StoreClient
from memfs.api.changes import ChangeStream, server_offers_change_stream
from memfs.api.config import ClientConfig, Secret
from memfs.contract.errors import BadRequestError, NotFoundError
from memfs.contract.models import Actor
from memfs.server.backends.postgres import PostgresStorage
from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.backends.storage import Storage

from .helpers import Collector, config_for, new_store


def aclient(server: ServerProcess) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=server.base_url,
        headers={"x-api-key": server.api_key, "anthropic-version": "2023-06-01"},
        timeout=30,
    )


async def create(c: httpx.AsyncClient, store_id: str, path: str, content: str = "") -> Any:
    r = await c.post(
        f"/v1/memory_stores/{store_id}/memories", json={"path": path, "content": content}
    )
    assert r.status_code == 200, r.text
    return r.json()


async def all_version_ids(c: httpx.AsyncClient, store_id: str) -> list[str]:
    """Every version of the store, oldest first, from the ordinary listing."""
    ids: list[str] = []
    page = None
    while True:
        params = {"limit": "100", **({"page": page} if page else {})}
        r = await c.get(f"/v1/memory_stores/{store_id}/memory_versions", params=params)
        body = r.json()
        ids.extend(v["id"] for v in body["data"])
        page = body["next_page"]
        if page is None:
            return ids[::-1]


@asynccontextmanager
async def change_stream(
    config: ClientConfig, store_id: str, **options: Any
) -> AsyncIterator[ChangeStream]:
    """A ChangeStream on a client of its own (closed afterwards)."""
    async with StoreClient(config) as client, ChangeStream(client, store_id, **options) as stream:
        yield stream


async def offers(config: ClientConfig, transport: httpx.AsyncBaseTransport | None = None) -> bool:
    async with StoreClient(config, transport=transport) as client:
        return await server_offers_change_stream(client)


async def replayed(
    config: ClientConfig, store_id: str, after: str, count: int, timeout: float = 10
) -> list[str]:
    """The ids of the first ``count`` versions a stream opened ``after`` a position delivers."""
    got: list[str] = []
    async with change_stream(config, store_id, after=after) as stream:
        with trio.fail_after(timeout):
            async for event in stream:
                if event.version is not None:
                    got.append(event.version.id)
                if len(got) == count:
                    break
    return got


async def test_capabilities_and_live_events_in_commit_order(backend_server: ServerProcess) -> None:
    config = config_for(backend_server)
    assert await offers(config)
    store_id = new_store(backend_server)
    async with change_stream(config, store_id) as stream, trio.open_nursery() as nursery:
        collector = await Collector.connected(stream, nursery)
        async with aclient(backend_server) as c:
            first = await create(c, store_id, "/a.md", "one")
            r = await c.patch(
                f"/v1/memory_stores/{store_id}/memories/{first['id']}", json={"content": "two"}
            )
            assert r.status_code == 200
            await create(c, store_id, "/b.md")
            r = await c.delete(f"/v1/memory_stores/{store_id}/memories/{first['id']}")
            assert r.status_code == 200
            await collector.wait_for(4)
            assert collector.version_ids == await all_version_ids(c, store_id)
        ops = [e.version.operation for e in collector.events if e.version]
        assert ops == ["created", "modified", "created", "deleted"]
        assert [e.version.path for e in collector.events if e.version][:2] == ["/a.md", "/a.md"]
        cursors = [int(e.cursor) for e in collector.events]
        assert cursors == sorted(cursors) and len(set(cursors)) == 4
        nursery.cancel_scope.cancel()
    assert collector.error is None


async def test_resume_after_a_cursor_or_version_id_replays_exactly_the_rest(
    backend_server: ServerProcess,
) -> None:
    config = config_for(backend_server)
    store_id = new_store(backend_server)
    async with aclient(backend_server) as c:
        made = [await create(c, store_id, f"/m{i}") for i in range(5)]
        ids = await all_version_ids(c, store_id)
    # From the beginning ("0"), then from the 2nd version's id: the rest, in order.
    for after, expected in (("0", ids), (made[1]["memory_version_id"], ids[2:])):
        assert await replayed(config, store_id, after, len(expected)) == expected


async def test_a_backlog_of_several_pages_replays_in_order(backend_server: ServerProcess) -> None:
    """The replay is read a page (100) at a time, oldest first, never all at once."""
    config = config_for(backend_server)
    store_id = new_store(backend_server)
    async with aclient(backend_server) as c:
        for i in range(230):
            await create(c, store_id, f"/b{i:03}")
        ids = await all_version_ids(c, store_id)
    assert await replayed(config, store_id, "0", len(ids), timeout=20) == ids


async def test_reconnect_after_a_server_restart_misses_nothing(
    backend_server: ServerProcess,
) -> None:
    config = config_for(backend_server)
    store_id = new_store(backend_server)
    fast = RetryPolicy(base_delay=0.05, max_delay=0.2)
    async with (
        change_stream(config, store_id, retry=fast) as stream,
        trio.open_nursery() as nursery,
    ):
        collector = await Collector.connected(stream, nursery)
        async with aclient(backend_server) as c:
            await create(c, store_id, "/before")
            await collector.wait_for(1)
        await trio.to_thread.run_sync(backend_server.stop)
        collector.ready = trio.Event()
        # Written while no server runs, straight into the database.
        storage: Storage
        if backend_server.db_url:
            storage = await PostgresStorage.open(backend_server.db_url)
        else:
            storage = await SqliteStorage.open(backend_server.db)
        await storage.create_memory(
            store_id, path="/during", content="", actor=Actor("api_actor", "apikey_t")
        )
        await storage.aclose()
        assert not collector.ready.is_set()
        await trio.to_thread.run_sync(backend_server.start)
        async with aclient(backend_server) as c:
            with trio.fail_after(15):
                await collector.ready.wait()
            await create(c, store_id, "/after")
            await collector.wait_for(3, timeout=15)
            assert collector.version_ids == await all_version_ids(c, store_id)
        nursery.cancel_scope.cancel()
    assert stream.reconnects >= 1
    assert len(set(collector.version_ids)) == 3


async def test_fatal_errors_end_the_stream(backend_server: ServerProcess) -> None:
    config = config_for(backend_server)
    async with change_stream(config, "memstore_nope") as stream:
        with pytest.raises(NotFoundError):
            async for _ in stream:
                pass
    store_id = new_store(backend_server)
    async with change_stream(config, store_id, after="not-a-cursor") as stream:
        with pytest.raises(BadRequestError, match="after"):
            async for _ in stream:
                pass
    # Deleting the store ends a live stream with NotFoundError, not an endless reconnect.
    async with change_stream(config, store_id) as stream:
        with pytest.raises(NotFoundError), trio.fail_after(10):
            async for event in stream:
                if event.kind == "ready":
                    async with aclient(backend_server) as c:
                        r = await c.delete(f"/v1/memory_stores/{store_id}")
                        assert r.status_code == 200
    bad = ClientConfig(api_key=Secret("sk-wrong-" + "x" * 20), base_url=backend_server.base_url)
    assert not await offers(bad)
    r = httpx.get(backend_server.base_url + f"/v1/memory_stores/{store_id}/memfs/changes")
    assert r.status_code == 401


async def test_no_change_stream_means_polling(tmp_path: Any) -> None:
    """A server without the extension (like the hosted API) answers 404: the client says no."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"type": "error", "error": {"type": "not_found_error"}})

    config = ClientConfig(api_key=Secret("sk-x" * 8), base_url="http://hosted.test")
    assert not await offers(config, httpx.MockTransport(handler))
