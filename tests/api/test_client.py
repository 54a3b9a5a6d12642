"""StoreClient against the real reference server over HTTP: every endpoint, pages, errors."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import trio

from kit.hosted_like import hosted_like_client
from memfs.api import AmbiguousStoreError, StoreClient
from memfs.api.changes import CHANGES, ChangeStream, server_offers_change_stream
from memfs.api.client import CAPABILITIES
from memfs.api.config import ClientConfig
from memfs.api.store import MEMORY_STORES, capabilities_with, memory_stores_capabilities
from memfs.contract.errors import (
    AuthenticationError,
    BadRequestError,
    NotFoundError,
    PathConflictError,
    PreconditionFailedError,
    StoreArchivedError,
)
from memfs.contract.models import Memory, MemoryPrefix, MemoryStore, sha256_hex

from .helpers import make_client, unique

MEMORY_ROUTE = "/v1/memory_stores/{store}/memories/{memory}"


# ---------------------------------------------------------------------------------------------
# Stores


async def test_store_lifecycle(client: StoreClient) -> None:
    name = unique()
    metadata = {"team": "a", "x": "1"}
    store = await client.create_store(name, description="notes", metadata=metadata)
    assert store.id.startswith("memstore_")
    assert (store.name, store.description, store.metadata) == (name, "notes", metadata)
    assert not store.archived

    fetched = await client.get_store(store.id)
    assert fetched == store

    updated = await client.update_store(
        store.id, name=name + "-2", description="", metadata={"x": None, "y": "2"}
    )
    assert updated.name == name + "-2"
    assert updated.description == ""
    assert updated.metadata == {"team": "a", "y": "2"}
    assert updated.updated_at >= store.updated_at

    archived = await client.archive_store(store.id)
    assert archived.archived and archived.archived_at is not None
    again = await client.archive_store(store.id)  # archiving twice returns it unchanged
    assert again.archived_at == archived.archived_at

    await client.delete_store(store.id)
    with pytest.raises(NotFoundError) as info:
        await client.get_store(store.id)
    assert info.value.status == 404
    assert info.value.request_id


async def test_list_stores_follows_pages_and_hides_archived(client: StoreClient) -> None:
    tag = unique("page")
    created = [await client.create_store(f"{tag}-{i}") for i in range(5)]
    await client.archive_store(created[0].id)

    page = await client.list_stores_page(limit=2)
    assert len(page.data) == 2
    assert page.next_page is not None

    live = [s.id async for s in client.list_stores(limit=2) if s.name.startswith(tag)]
    assert sorted(live) == sorted(s.id for s in created[1:])
    every = [
        s.id async for s in client.list_stores(include_archived=True, limit=2)
        if s.name.startswith(tag)
    ]  # fmt: skip
    assert sorted(every) == sorted(s.id for s in created)
    assert len(every) == len(set(every))  # no store twice across pages


async def test_resolve_store_by_id_name_and_errors(client: StoreClient) -> None:
    name = unique()
    store = await client.create_store(name)
    assert (await client.resolve_store(store.id)).id == store.id
    assert (await client.resolve_store(name)).id == store.id

    with pytest.raises(NotFoundError):
        await client.resolve_store(unique("missing"))
    with pytest.raises(NotFoundError):
        await client.resolve_store("memstore_doesnotexist")

    twin = await client.create_store(name)
    with pytest.raises(AmbiguousStoreError) as info:
        await client.resolve_store(name)
    assert isinstance(info.value, BadRequestError)
    assert store.id in str(info.value) and twin.id in str(info.value)


async def test_invalid_store_input_is_a_bad_request(client: StoreClient) -> None:
    with pytest.raises(BadRequestError) as info:
        await client.create_store("")
    assert info.value.status == 400
    assert info.value.error_type == "invalid_request_error"
    assert info.value.request_id


async def test_wrong_key_is_an_authentication_error(server: Any) -> None:
    async with make_client(server, key="sk-wrong-" + "w" * 30) as bad:
        with pytest.raises(AuthenticationError) as info:
            await bad.list_stores_page()
    assert info.value.status == 401
    assert "sk-wrong" not in str(info.value)


# ---------------------------------------------------------------------------------------------
# Memories


async def test_memory_crud(client: StoreClient, store: MemoryStore) -> None:
    memory = await client.create_memory(store.id, "/notes/todo.md", "- [ ] one\n")
    assert memory.id.startswith("mem_")
    assert memory.path == "/notes/todo.md"
    assert memory.content == "- [ ] one\n"
    assert memory.content_sha256 == sha256_hex("- [ ] one\n")
    assert memory.content_size_bytes == len(b"- [ ] one\n")

    full = await client.get_memory(store.id, memory.id)
    assert full.content == "- [ ] one\n"
    basic = await client.get_memory(store.id, memory.id, view="basic")
    assert basic.content is None
    assert basic.content_sha256 == memory.content_sha256

    updated = await client.update_memory(store.id, memory.id, content="- [x] one\n")
    assert updated.content == "- [x] one\n"
    assert updated.memory_version_id != memory.memory_version_id

    moved = await client.update_memory(store.id, memory.id, path="/done/todo.md")
    assert (moved.id, moved.path) == (memory.id, "/done/todo.md")
    assert moved.content_sha256 == updated.content_sha256

    await client.delete_memory(store.id, memory.id)
    with pytest.raises(NotFoundError) as info:
        await client.get_memory(store.id, memory.id)
    assert info.value.request_id


async def test_empty_and_unicode_content(client: StoreClient, store: MemoryStore) -> None:
    empty = await client.create_memory(store.id, "/empty", "")
    assert empty.content_size_bytes == 0
    assert (await client.get_memory(store.id, empty.id)).content == ""
    text = "héllo — 日本語 🙂\n"
    memory = await client.create_memory(store.id, "/ünï/cödé.md", text)
    assert memory.content_size_bytes == len(text.encode("utf-8"))
    assert (await client.get_memory(store.id, memory.id)).content == text


async def test_noop_update_writes_no_version(client: StoreClient, store: MemoryStore) -> None:
    memory = await client.create_memory(store.id, "/same", "same")
    again = await client.update_memory(store.id, memory.id, content="same")
    assert again.memory_version_id == memory.memory_version_id
    versions = [v async for v in client.list_versions(store.id, memory_id=memory.id)]
    assert len(versions) == 1


async def test_preconditions(client: StoreClient, store: MemoryStore) -> None:
    memory = await client.create_memory(store.id, "/p", "v1")
    with pytest.raises(PreconditionFailedError) as info:
        await client.update_memory(
            store.id, memory.id, content="v2", expected_sha256=sha256_hex("other")
        )
    assert info.value.status == 409
    assert info.value.error_type == "memory_precondition_failed_error"
    assert info.value.request_id

    ok = await client.update_memory(
        store.id, memory.id, content="v2", expected_sha256=memory.content_sha256
    )
    assert ok.content_sha256 == sha256_hex("v2")
    # Already as requested: 200 although the precondition no longer matches.
    same = await client.update_memory(
        store.id, memory.id, content="v2", expected_sha256=memory.content_sha256
    )
    assert same.memory_version_id == ok.memory_version_id

    with pytest.raises(PreconditionFailedError):
        await client.delete_memory(store.id, memory.id, expected_sha256=memory.content_sha256)
    await client.delete_memory(store.id, memory.id, expected_sha256=ok.content_sha256)
    with pytest.raises(NotFoundError):
        await client.get_memory(store.id, memory.id)


async def test_path_conflicts(client: StoreClient, store: MemoryStore) -> None:
    first = await client.create_memory(store.id, "/taken", "a")
    with pytest.raises(PathConflictError) as info:
        await client.create_memory(store.id, "/taken", "b")
    assert info.value.conflicting_memory_id == first.id
    assert info.value.conflicting_path == "/taken"
    assert info.value.request_id

    other = await client.create_memory(store.id, "/other", "c")
    with pytest.raises(PathConflictError):
        await client.update_memory(store.id, other.id, path="/taken")


async def test_invalid_paths_are_bad_requests(client: StoreClient, store: MemoryStore) -> None:
    for path in ("no-slash", "/a//b", "/a/../b", "/tab\there"):
        with pytest.raises(BadRequestError) as info:
            await client.create_memory(store.id, path, "x")
        assert info.value.status == 400, path
    with pytest.raises(BadRequestError):
        await client.list_memories_page(store.id, path_prefix="/no-trailing-slash")
    with pytest.raises(BadRequestError):
        await client.list_memories_page(store.id, depth=2)


async def test_archived_store_is_read_only(client: StoreClient, store: MemoryStore) -> None:
    memory = await client.create_memory(store.id, "/kept", "kept")
    await client.archive_store(store.id)
    with pytest.raises(StoreArchivedError):
        await client.create_memory(store.id, "/new", "x")
    with pytest.raises(StoreArchivedError):
        await client.update_memory(store.id, memory.id, content="changed")
    assert (await client.get_memory(store.id, memory.id)).content == "kept"


async def test_list_memories_pages_depth_and_prefix(
    client: StoreClient, store: MemoryStore
) -> None:
    paths = ["/a.md", "/b/1.md", "/b/2.md", "/b/c/3.md", "/bb.md", "/d/4.md", "/e.md"]
    for path in paths:
        await client.create_memory(store.id, path, path)

    page = await client.list_memories_page(store.id, limit=3)
    assert [m.path for m in page.data] == paths[:3]
    assert page.next_page

    everything = [m async for m in client.list_memories(store.id, limit=2)]
    assert [m.path for m in everything] == paths
    assert all(isinstance(m, Memory) and m.content is None for m in everything)

    full = [m async for m in client.list_memories(store.id, limit=2, view="full")]
    assert [m.content for m in full if isinstance(m, Memory)] == paths

    top = [m async for m in client.list_memories(store.id, depth=1, limit=2)]
    assert [(type(m).__name__, m.path) for m in top] == [
        ("Memory", "/a.md"),
        ("MemoryPrefix", "/b/"),
        ("Memory", "/bb.md"),
        ("MemoryPrefix", "/d/"),
        ("Memory", "/e.md"),
    ]
    below_b = [m.path async for m in client.list_memories(store.id, path_prefix="/b/")]
    assert below_b == ["/b/1.md", "/b/2.md", "/b/c/3.md"]
    children = [m async for m in client.list_memories(store.id, path_prefix="/b/", depth=1)]
    assert [m.path for m in children] == ["/b/1.md", "/b/2.md", "/b/c/"]
    assert isinstance(children[-1], MemoryPrefix)


async def test_find_memory(client: StoreClient, store: MemoryStore) -> None:
    memory = await client.create_memory(store.id, "/x/y/z.md", "z")
    await client.create_memory(store.id, "/x/y/zz.md", "zz")
    found = await client.find_memory(store.id, "/x/y/z.md")
    assert found is not None and found.id == memory.id
    assert await client.find_memory(store.id, "/x/y") is None  # a directory, not a memory
    assert await client.find_memory(store.id, "/nothing.md") is None
    top = await client.create_memory(store.id, "/top.md", "t")
    found_top = await client.find_memory(store.id, "/top.md")
    assert found_top is not None
    assert (found_top.id, found_top.content) == (top.id, None)


# ---------------------------------------------------------------------------------------------
# Versions


async def test_versions_newest_first_with_filters(client: StoreClient, store: MemoryStore) -> None:
    before = datetime.now(UTC) - timedelta(seconds=5)
    memory = await client.create_memory(store.id, "/v.md", "one")
    await client.update_memory(store.id, memory.id, content="two")
    await client.update_memory(store.id, memory.id, content="three")
    other = await client.create_memory(store.id, "/w.md", "w")
    await client.delete_memory(store.id, memory.id)

    versions = [v async for v in client.list_versions(store.id, limit=2)]
    assert [v.operation for v in versions] == [
        "deleted", "created", "modified", "modified", "created",
    ]  # fmt: skip
    assert [v.created_at for v in versions] == sorted(
        (v.created_at for v in versions), reverse=True
    )
    assert all(v.content is None for v in versions)  # basic view by default on lists

    mine = [v async for v in client.list_versions(store.id, memory_id=memory.id)]
    assert len(mine) == 4 and all(v.memory_id == memory.id for v in mine)
    created = [v.memory_id async for v in client.list_versions(store.id, operation="created")]
    assert created == [other.id, memory.id]
    recent = [
        v async for v in client.list_versions(
            store.id, created_gte=before, created_lte=datetime.now(UTC) + timedelta(seconds=5)
        )
    ]  # fmt: skip
    assert len(recent) == 5
    assert [v async for v in client.list_versions(store.id, created_lte=before)] == []

    full = (await client.list_versions_page(store.id, memory_id=memory.id, view="full")).data
    assert [v.content for v in full] == [None, "three", "two", "one"]

    first = await client.get_version(store.id, mine[-1].id)
    assert (first.operation, first.content, first.path) == ("created", "one", "/v.md")
    assert first.created_by is not None and first.created_by.type == "api_actor"

    with pytest.raises(NotFoundError):
        await client.get_version(store.id, "memver_doesnotexist")


async def test_redaction(client: StoreClient, store: MemoryStore) -> None:
    memory = await client.create_memory(store.id, "/secret.md", "password=hunter2")
    head = await client.update_memory(store.id, memory.id, content="password=<removed>")

    with pytest.raises(BadRequestError):
        await client.redact_version(store.id, head.memory_version_id)

    redacted = await client.redact_version(store.id, memory.memory_version_id)
    assert redacted.redacted and redacted.redacted_by is not None
    assert (redacted.content, redacted.path, redacted.content_sha256) == (None, None, None)
    assert redacted.created_by is not None  # the author is kept
    again = await client.get_version(store.id, memory.memory_version_id)
    assert again.redacted and again.content is None


async def test_session_header_attributes_writes_to_the_session(
    server: Any, store: MemoryStore
) -> None:
    async with make_client(server, session_id="sesn_memfs_test") as session_client:
        memory = await session_client.create_memory(store.id, "/by-session.md", "hi")
        version = await session_client.get_version(store.id, memory.memory_version_id)
        assert version.created_by is not None
        assert (version.created_by.type, version.created_by.id) == (
            "session_actor", "sesn_memfs_test",
        )  # fmt: skip
        mine = [
            v.id async for v in session_client.list_versions(store.id, session_id="sesn_memfs_test")
        ]
        assert mine == [memory.memory_version_id]


# ---------------------------------------------------------------------------------------------
# Stats and options


async def test_stats_count_requests_by_route(client: StoreClient, store: MemoryStore) -> None:
    memory = await client.create_memory(store.id, "/s.md", "s")
    client.stats.reset()
    for _ in range(3):
        await client.get_memory(store.id, memory.id)
    with pytest.raises(NotFoundError):
        await client.get_memory(store.id, "mem_nope")
    assert client.stats.total == 4
    assert client.stats.count("GET", MEMORY_ROUTE) == 4
    assert client.stats.by_outcome == {"ok": 3, "client_error": 1}
    snap = client.stats.snapshot()
    assert snap["total"] == 4
    assert snap["by_route"] == {f"GET {MEMORY_ROUTE}": 4}
    assert snap["by_status"] == {"200": 3, "404": 1}


async def test_with_options_shares_pool_and_stats(client: StoreClient, store: MemoryStore) -> None:
    client.stats.reset()
    quick = client.with_options(timeout=2.0, max_retries=0)
    await quick.get_store(store.id)
    await quick.aclose()
    await client.get_store(store.id)  # the pool is still open
    assert client.stats.total == 2


async def test_key_not_in_debug_logs_of_a_real_exchange(
    server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # includes httpx and httpcore
    async with make_client(server) as debug_client:
        store = await debug_client.create_store(unique())
        await debug_client.create_memory(store.id, "/private/notes.md", "x")
        await debug_client.get_store(store.id)
    assert "POST /v1/memory_stores/{store}/memories -> 200" in caplog.text
    assert server.api_key not in caplog.text


async def test_bearer_token_from_the_environment(server: Any) -> None:
    """A session-scoped token (ANTHROPIC_AUTH_TOKEN) travels as `Authorization: Bearer`."""
    env = {"ANTHROPIC_AUTH_TOKEN": server.api_key, "ANTHROPIC_BASE_URL": server.base_url}
    config = ClientConfig.from_env(env=env)
    assert config.auth_scheme == "bearer"
    assert config.auth_headers() == {"authorization": f"Bearer {server.api_key}"}
    async with StoreClient(config) as bearer_client:
        created = await bearer_client.create_store(unique("bearer"))
        assert (await bearer_client.get_store(created.id)).name == created.name
        await bearer_client.delete_store(created.id)
    wrong = ClientConfig.from_env(env={**env, "ANTHROPIC_AUTH_TOKEN": "not-a-key"})
    async with StoreClient(wrong) as refused:
        with pytest.raises(AuthenticationError):
            await refused.get_store(created.id)


class Recording(httpx.AsyncBaseTransport):
    """The real network, with a record of every request sent (to read its headers)."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.requests: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_change_stream_uses_the_clients_bearer_auth_pool_and_stats(server: Any) -> None:
    """The change stream is one more request of the client: a session token travels as
    `Authorization: Bearer` (never as x-api-key), through the client's pool, and is counted."""
    env = {"ANTHROPIC_AUTH_TOKEN": server.api_key, "ANTHROPIC_BASE_URL": server.base_url}
    wire = Recording()
    async with StoreClient(ClientConfig.from_env(env=env), transport=wire) as bearer_client:
        store = await bearer_client.create_store(unique("stream"))
        assert await server_offers_change_stream(bearer_client)
        async with ChangeStream(bearer_client, store.id) as stream:
            with trio.fail_after(10):
                async for event in stream:
                    if event.kind == "ready":
                        await bearer_client.create_memory(store.id, "/seen.md", "x")
                    elif event.version is not None:
                        assert event.version.path == "/seen.md"
                        break
        stats = bearer_client.stats
        assert stats.count("GET", CHANGES) == 1
        assert stats.count("GET", CAPABILITIES) == 1
        assert stats.by_status[200] == stats.total
    assert [r.url.path for r in wire.requests].count(f"/v1/memory_stores/{store.id}/memfs/changes")
    for request in wire.requests:  # the stream's request as every other
        assert request.headers["authorization"] == f"Bearer {server.api_key}"
        assert "x-api-key" not in request.headers


async def test_memory_stores_capabilities_refuse_nul_only_where_the_server_says_so(
    client: StoreClient, server: Any
) -> None:
    """A server that announces ``refuses_nul`` (memfs server before its schema step 10) has a
    mount refuse a content's NUL at its save; memfs server now stores NUL and announces
    nothing of it, and a server that announces nothing at all (the hosted API: 404) keeps the
    hosted limits alone."""
    assert capabilities_with(frozenset({"refuses_nul"})).refused_characters == "\x00"
    assert await memory_stores_capabilities(client) == MEMORY_STORES
    async with hosted_like_client(server) as (hosted, transport):
        assert await memory_stores_capabilities(hosted) == MEMORY_STORES
    assert transport.capability_checks == 1
