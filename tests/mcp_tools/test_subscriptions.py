"""Resource subscriptions from the store's change feed: a memory changed through the REST API
reaches an MCP client that follows it as a notification, in process (both protocol eras, both
APIs) and over stdio (``memfs mcp`` as a subprocess). Every wait has a timeout; that something
was not told is shown by the next notice, which came after it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import Client
from mcp_types.version import LATEST_MODERN_VERSION

from kit.databricks import Workspace
from kit.servers import ServerProcess
from memfs.api import StoreClient
from memfs.mcp.app import build_server
from memfs.mcp.resources import uri_of
from memfs.mcp.store_backend import StoreBackend
from memfs.mcp.subscriptions import Subscriptions

from .test_stdio import memfs_mcp

UPDATED = "notifications/resources/updated"
LIST_CHANGED = "notifications/resources/list_changed"
WAIT = 10  # seconds a notice may take on a loaded machine (it takes milliseconds)

pytestmark = pytest.mark.filterwarnings(
    # resources/subscribe is the 2025 era's (what Claude Desktop, Code and Cursor speak)
    "ignore::mcp.shared.exceptions.MCPDeprecationWarning"
)


class Notices:
    """The notifications a client received, as (method, uri) pairs, in order."""

    def __init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[tuple[str, str | None]](1_000)

    async def handler(self, message: Any) -> None:
        method = getattr(message, "method", None)
        if method in (UPDATED, LIST_CHANGED):
            self._send.send_nowait((method, getattr(message.params, "uri", None)))

    async def next(self) -> tuple[str, str | None]:
        with trio.fail_after(WAIT):
            return await self._receive.receive()


@asynccontextmanager
async def following(backend: StoreBackend, notices: Notices, mode: str) -> AsyncIterator[Client]:
    """A client of ``backend``'s server in process, its subscriptions fed by the store's
    change stream (as ``memfs mcp`` serves them: opened by the first subscription)."""
    async with trio.open_nursery() as nursery:
        server = build_server(backend, Subscriptions(backend, backend, nursery))
        async with Client(server, mode=mode, message_handler=notices.handler) as client:  # type: ignore[arg-type]
            yield client
        nursery.cancel_scope.cancel()


async def test_a_followed_memory_is_notified(
    client: StoreClient, ms_store: str, open_ms: Any
) -> None:
    a = await client.create_memory(ms_store, "/notes/a.md", "one\n")
    a_uri = uri_of("/notes/a.md")
    notices = Notices()
    async with open_ms() as backend, following(backend, notices, "legacy") as mcp:
        assert mcp.server_capabilities.resources is not None
        assert mcp.server_capabilities.resources.subscribe
        await mcp.subscribe_resource(a_uri)
        await client.update_memory(ms_store, a.id, content="two\n")
        assert await notices.next() == (UPDATED, a_uri)
        # a new memory changes the list; its own update is not followed, so not told
        b = await client.create_memory(ms_store, "/notes/b.md", "b\n")
        assert await notices.next() == (LIST_CHANGED, None)
        # a rename: the followed URI names nothing now, and the list changed
        await client.update_memory(ms_store, a.id, path="/notes/renamed.md")
        assert await notices.next() == (UPDATED, a_uri)
        assert await notices.next() == (LIST_CHANGED, None)
        # no longer followed: its change is not told before the deletion's list change
        await mcp.unsubscribe_resource(a_uri)
        await client.update_memory(ms_store, a.id, path="/notes/a.md")
        assert await notices.next() == (LIST_CHANGED, None)  # the rename back
        await client.update_memory(ms_store, a.id, content="three\n")
        await client.delete_memory(ms_store, b.id)
        assert await notices.next() == (LIST_CHANGED, None)


async def test_a_databricks_entry_is_notified_and_others_sessions_are_not(
    workspace: Workspace, dbx_store: str, open_dbx: Any
) -> None:
    fact = workspace.put(dbx_store, "/fact.md", "water boils at 100 C")
    uri = uri_of("/fact.md")
    notices = Notices()
    async with open_dbx() as backend, following(backend, notices, "legacy") as mcp:
        await mcp.subscribe_resource(uri)
        # another session's entries are not this server's: no list change is told
        workspace.put(dbx_store, "/fact.md", "another session's", session="s2")
        workspace.patch(dbx_store, fact, "water boils at 100 C at sea level")
        assert await notices.next() == (UPDATED, uri)
        workspace.put(dbx_store, "/new.md", "new")
        assert await notices.next() == (LIST_CHANGED, None)


async def test_a_2026_client_listens(client: StoreClient, ms_store: str, open_ms: Any) -> None:
    """A 2026-07-28 client has no resources/subscribe: it opens a subscriptions/listen stream
    with the URIs it follows."""
    a = await client.create_memory(ms_store, "/a.md", "one\n")
    async with (
        open_ms() as backend,
        following(backend, Notices(), LATEST_MODERN_VERSION) as mcp,
        mcp.listen(resources_list_changed=True, resource_subscriptions=[uri_of("/a.md")]) as sub,
    ):
        await client.create_memory(ms_store, "/b.md", "b\n")  # not followed: list only
        await client.update_memory(ms_store, a.id, content="two\n")
        events: list[Any] = []
        with trio.fail_after(WAIT):
            async for event in sub:
                events.append(event)
                if len(events) == 2:
                    break
        assert [type(e).__name__ for e in events] == ["ResourcesListChanged", "ResourceUpdated"]
        assert events[1].uri == "memfs://memories/a.md"


async def test_memfs_mcp_over_stdio_notifies(
    server: ServerProcess, client: StoreClient, tmp_path: Path
) -> None:
    store = await client.create_store("stdio subscriptions")
    memory = await client.create_memory(store.id, "/todo.md", "- [ ] one\n")
    notices = Notices()
    errors = tmp_path / "stderr"
    async with memfs_mcp(
        server.client_env(), store.id, errlog=errors, message_handler=notices.handler
    ) as mcp:
        resources = mcp.server_capabilities.resources
        assert resources is not None and resources.subscribe and resources.list_changed
        listed = await mcp.list_resources()
        assert [r.uri for r in listed.resources] == ["memfs://memories/todo.md"]
        # the feed was opened by the listing, before its answer: every change after is told
        await mcp.subscribe_resource("memfs://memories/todo.md")
        await client.update_memory(store.id, memory.id, content="- [x] one\n")
        assert await notices.next() == (UPDATED, "memfs://memories/todo.md")
    assert errors.read_text() == ""


class FirstConnectHangs:
    """The store's change feed, but its first connection hangs (until cancelled)."""

    def __init__(self, feed: StoreBackend) -> None:
        self.feed = feed
        self.connecting = trio.Event()  # set by the first connection

    @asynccontextmanager
    async def changes(self) -> AsyncIterator[Any]:
        if not self.connecting.is_set():
            self.connecting.set()
            await trio.sleep_forever()
        async with self.feed.changes() as changes:
            yield changes


async def test_a_feed_whose_first_connection_was_cancelled_is_opened_again(
    client: StoreClient, ms_store: str, open_ms: Any
) -> None:
    """The client cancels the request that opened the feed while it connects: the next
    request that needs it opens it again, and what follows is told."""
    a = await client.create_memory(ms_store, "/a.md", "one\n")
    notices = Notices()
    async with open_ms() as backend, trio.open_nursery() as nursery:
        feed = FirstConnectHangs(backend)
        server = build_server(backend, Subscriptions(backend, feed, nursery))
        async with Client(server, mode="legacy", message_handler=notices.handler) as mcp:
            with trio.CancelScope() as listing:

                async def cancel_once_connecting() -> None:
                    await feed.connecting.wait()
                    listing.cancel()

                nursery.start_soon(cancel_once_connecting)
                await mcp.list_resources()
            assert listing.cancelled_caught
            with trio.fail_after(WAIT):
                await mcp.subscribe_resource(uri_of("/a.md"))
            await client.update_memory(ms_store, a.id, content="two\n")
            assert await notices.next() == (UPDATED, uri_of("/a.md"))
        nursery.cancel_scope.cancel()
