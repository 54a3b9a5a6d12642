"""The Databricks change stream (a memfs extension) on both backends and across replicas, read
by the mount's adapter (``DatabricksStore.change_stream``) over real sockets: replay from a
cursor a page at a time, live changes in commit order, the mount's actor and session only, the
store's deletion ending it; and replicas sharing one PostgreSQL database serve one another's
Databricks writes (read, search, stream)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import trio

from kit.databricks import ACTOR, API, Workspace
from kit.servers import ServerProcess
from memfs.api import RetryPolicy
from memfs.api.config import ClientConfig, Secret
from memfs.api.databricks.client import DatabricksClient
from memfs.api.databricks.store import DatabricksStore
from memfs.api.databricks.stream import EntryChangeStream, server_offers_entry_stream
from memfs.contract.errors import AuthenticationError, BadRequestError, NotFoundError
from memfs.contract.models import sha256_hex
from memfs.server.backends.postgres import PostgresStorage
from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.backends.storage import SqlStorage
from memfs.server.databricks.storage import SOURCE_AGENT, NewEntry

from .helpers import Collector


@asynccontextmanager
async def adapter(
    server: ServerProcess,
    store: str,
    session: str | None = None,
    token: str | None = None,
    retry: RetryPolicy | None = None,
) -> AsyncIterator[DatabricksStore]:
    """The mount's adapter of ``store`` (actor ``ACTOR``) on a client of its own."""
    config = ClientConfig(
        api_key=Secret(token or server.api_key), base_url=server.base_url, auth_scheme="bearer"
    )
    async with DatabricksClient(config, retry=retry) as client:
        yield DatabricksStore(client, store, ACTOR, session)


def delete_entry(space: Workspace, store: str, entry: dict[str, Any]) -> None:
    answer = space.http.delete(f"{API}/{store}/entries/{entry['name'].rsplit('/', 1)[1]}")
    assert answer.status_code == 200, answer.text


async def replay(mine: DatabricksStore, after: str, count: int) -> list[tuple[str, str | None]]:
    """(operation, path) of the first ``count`` changes a stream opened ``after`` delivers."""
    stream = EntryChangeStream(mine.client, mine.store_id, ACTOR, mine._version_of, after=after)
    got: list[tuple[str, str | None]] = []
    with trio.fail_after(20):
        async for event in stream:
            if event.version is not None:
                got.append((event.version.operation, event.version.path))
            if len(got) == count:
                return got
    raise AssertionError("the stream ended")


async def test_entry_changes_follow_and_replay_for_the_mounts_actor_and_session(
    backend_server: ServerProcess,
) -> None:
    space = Workspace(backend_server)
    store = space.create_store()
    space.put(store, "/before.md", "old")
    async with adapter(backend_server, store) as mine, trio.open_nursery() as nursery:
        assert await mine.offers_change_stream()
        async with mine.change_stream() as stream:
            assert isinstance(stream, EntryChangeStream)
            collector = await Collector.connected(stream, nursery)
            a = space.put(store, "/a.md", "one")
            space.put(store, "/theirs.md", "x", actor="someone-else")  # another actor
            space.put(store, "/s.md", "x", session="s1")  # another session
            space.patch(store, a, "two")
            delete_entry(space, store, a)
            await collector.wait_for(3)
            nursery.cancel_scope.cancel()
        versions = [e.version for e in collector.events if e.version is not None]
        assert [(v.operation, v.path) for v in versions] == [
            ("created", "/a.md"),
            ("modified", "/a.md"),
            ("deleted", "/a.md"),
        ]
        assert [v.content_sha256 for v in versions] == [sha256_hex("one"), sha256_hex("two"), None]
        assert [v.content_size_bytes for v in versions] == [3, 3, None]
        cursors = [int(e.cursor) for e in collector.events]
        assert cursors == sorted(cursors) and len(set(cursors)) == 3
        assert len({v.id for v in versions}) == 3 and collector.error is None

    # Replay from the start ("0"): the whole log, the session's change left out; from a
    # cursor: exactly the rest. A backlog of more than a page (100) comes in commit order.
    async with adapter(backend_server, store) as mine:
        assert await replay(mine, "0", 4) == [
            ("created", "/before.md"),
            ("created", "/a.md"),
            ("modified", "/a.md"),
            ("deleted", "/a.md"),
        ]
        assert await replay(mine, collector.events[0].cursor, 2) == [
            ("modified", "/a.md"),
            ("deleted", "/a.md"),
        ]
        async with adapter(backend_server, store, session="s1") as session:
            assert await replay(session, "0", 1) == [("created", "/s.md")]
        backlog = [f"/b{i:03}.md" for i in range(110)]
        for path in backlog:
            space.put(store, path, "")
        replayed = await replay(mine, collector.events[-1].cursor, len(backlog))
        assert replayed == [("created", path) for path in backlog]


async def test_a_reconnect_after_a_server_restart_misses_nothing(
    backend_server: ServerProcess,
) -> None:
    """The stream reconnects with the client's retry policy and resumes after its cursor: a
    change written while no server ran arrives, once, in order."""
    store = Workspace(backend_server).create_store()
    fast = RetryPolicy(base_delay=0.05, max_delay=0.2)
    async with (
        adapter(backend_server, store, retry=fast) as mine,
        trio.open_nursery() as nursery,
        mine.change_stream() as stream,
    ):
        collector = await Collector.connected(stream, nursery)
        Workspace(backend_server).put(store, "/before.md", "")
        await collector.wait_for(1)
        await trio.to_thread.run_sync(backend_server.stop)
        collector.ready = trio.Event()
        storage: SqlStorage
        if backend_server.db_url:  # written while no server runs, straight into the database
            storage = await PostgresStorage.open(backend_server.db_url, pool_size=2)
        else:
            storage = await SqliteStorage.open(backend_server.db)
        during = NewEntry(None, ACTOR, None, "/during.md", "", None, SOURCE_AGENT)
        await storage.databricks.create_entry(store, during)
        await storage.aclose()
        await trio.to_thread.run_sync(backend_server.start)
        with trio.fail_after(15):
            await collector.ready.wait()
        Workspace(backend_server).put(store, "/after.md", "")
        await collector.wait_for(3, timeout=15)
        nursery.cancel_scope.cancel()
    paths = [e.version.path for e in collector.events if e.version is not None]
    assert paths == ["/before.md", "/during.md", "/after.md"]
    assert isinstance(stream, EntryChangeStream) and stream.reconnects >= 1


async def test_errors_of_the_databricks_change_stream(backend_server: ServerProcess) -> None:
    space = Workspace(backend_server)
    store = space.create_store()
    async with adapter(backend_server, "no-such-store") as missing:
        with pytest.raises(NotFoundError):
            async with missing.change_stream() as stream:
                async for _ in stream:
                    pass
    async with adapter(backend_server, store) as mine:
        bad = EntryChangeStream(mine.client, store, ACTOR, mine._version_of, after="x1")
        with pytest.raises(BadRequestError, match="after"):
            async for _ in bad:
                pass
        # Deleting the store ends a live stream with NotFoundError, not an endless reconnect.
        with pytest.raises(NotFoundError, match="deleted"), trio.fail_after(10):
            async with mine.change_stream() as stream:
                async for event in stream:
                    if event.kind == "ready":
                        answer = space.http.delete(f"{API}/{store}")
                        assert answer.status_code == 200
    async with adapter(backend_server, store, token="dapi-wrong-" + "x" * 20) as wrong:
        assert not await wrong.offers_change_stream()
        with pytest.raises(AuthenticationError):
            async with wrong.change_stream() as stream:
                async for _ in stream:
                    pass


async def test_a_store_created_again_under_its_id_has_a_history_of_its_own(
    backend_server: ServerProcess,
) -> None:
    """Deleted, then created again with the same id: ``after=0`` replays the new store's
    changes (not the old store's deletion), while a cursor of the old store still meets it."""
    space = Workspace(backend_server)
    store = space.create_store()
    space.put(store, "/old.md", "before")
    async with adapter(backend_server, store) as mine:
        stream = EntryChangeStream(mine.client, store, ACTOR, mine._version_of, after="0")
        with trio.fail_after(20):
            async for event in stream:
                if event.version is not None:
                    old_cursor = event.cursor
                    break
    assert space.http.delete(f"{API}/{store}").status_code == 200
    again = space.http.post(API, params={"managed_memory_store_id": store}, json={})
    assert again.status_code == 200, again.text
    space.put(store, "/new.md", "after")
    async with adapter(backend_server, store) as mine:
        assert await replay(mine, "0", 1) == [("created", "/new.md")]
        old = EntryChangeStream(mine.client, store, ACTOR, mine._version_of, after=old_cursor)
        with pytest.raises(NotFoundError, match="deleted"), trio.fail_after(20):
            async for _ in old:
                pass


async def test_a_stores_event_ids_count_its_own_changes_only(
    backend_server: ServerProcess,
) -> None:
    """Event ids are numbered per store: writes in another store (or by another actor) between
    two of this store's changes leave no gap, so the ids tell nothing of other stores."""
    space = Workspace(backend_server)
    mine_id, other = space.create_store(), space.create_store()
    async with (
        adapter(backend_server, mine_id) as mine,
        trio.open_nursery() as nursery,
        mine.change_stream() as stream,
    ):
        collector = await Collector.connected(stream, nursery)
        space.put(mine_id, "/first.md", "one")
        await collector.wait_for(1)
        space.put(other, "/x.md", "x")
        space.put(other, "/y.md", "y")
        space.put(mine_id, "/second.md", "two")
        await collector.wait_for(2)
        nursery.cancel_scope.cancel()
    assert [e.cursor for e in collector.events] == ["1", "2"]
    async with adapter(backend_server, mine_id) as mine:  # a replay gives the same ids
        replayed = EntryChangeStream(mine.client, mine_id, ACTOR, mine._version_of, after="1")
        with trio.fail_after(20):
            async for event in replayed:
                if event.version is not None:
                    assert (event.cursor, event.version.path) == ("2", "/second.md")
                    break


async def test_a_workspace_without_the_extension_means_polling() -> None:
    """A Databricks workspace has no ``/v1/memfs/capabilities`` (404): the store says no (to
    the stream, and to searching the session-less entries alone: a mount without a session
    searches with its own index there)."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"error_code": "ENDPOINT_NOT_FOUND", "message": "no"})

    config = ClientConfig(
        api_key=Secret("dapi-" + "t" * 20), base_url="http://workspace.test", auth_scheme="bearer"
    )
    async with DatabricksClient(config, transport=httpx.MockTransport(handler)) as client:
        assert not await server_offers_entry_stream(client)
        assert not await DatabricksStore(client, "s", ACTOR).offers_search()
        assert await DatabricksStore(client, "s", ACTOR, "session-1").offers_search()


async def test_replicas_serve_one_anothers_databricks_writes(
    replicas: list[ServerProcess],
) -> None:
    """Written through replica A: streamed by B (PostgreSQL NOTIFY), read and found by C."""
    a, b, c = (Workspace(server) for server in replicas)
    store = a.create_store()
    async with (
        adapter(replicas[1], store) as on_b,
        trio.open_nursery() as nursery,
        on_b.change_stream() as stream,
    ):
        collector = await Collector.connected(stream, nursery)
        a.put(store, "/garden.md", "tomatoes need full sun", description="vegetables")
        await collector.wait_for(1)
        nursery.cancel_scope.cancel()
    assert [(e.version.operation, e.version.path) for e in collector.events if e.version] == [
        ("created", "/garden.md")
    ]
    assert c.content(store, "/garden.md") == "tomatoes need full sun"
    found = c.http.post(
        f"{API}/{store}/entries:search", json={"actor_id": ACTOR, "query": "tomato"}
    )
    assert found.status_code == 200, found.text
    assert [hit["managed_memory_entry"]["path"] for hit in found.json()["results"]] == [
        "/garden.md"
    ]
    for space in (a, b, c):
        space.http.close()
