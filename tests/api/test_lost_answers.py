"""Retried writes whose first answer was lost: the real server applies the request, then a
transport in front of the client drops the answer (a fault the server cannot produce alone).

The client must end in the state one successful call would have produced: no duplicate memory,
no spurious conflict, a delete counted as done, exactly one version per change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from memfs.api import StoreClient
from memfs.contract.errors import ApiConnectionError, PathConflictError
from memfs.contract.models import MemoryStore

from .helpers import make_client, unique

Match = Callable[[httpx.Request], bool]


class LosingTransport(httpx.AsyncBaseTransport):
    """Sends every request to the real server; drops the answer of the first ``times`` matches."""

    def __init__(self, match: Match, times: int = 1) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self._match = match
        self.left = times
        self.dropped: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        if self.left > 0 and self._match(request):
            self.left -= 1
            await response.aread()
            await response.aclose()
            self.dropped.append(f"{request.method} {request.url.path} -> {response.status_code}")
            raise httpx.ReadError("connection lost before the answer arrived (injected)")
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def is_call(method: str, suffix: str) -> Match:
    return lambda request: request.method == method and request.url.path.endswith(suffix)


async def test_lost_create_answer_makes_no_duplicate(
    server: Any, client: StoreClient, store: MemoryStore
) -> None:
    transport = LosingTransport(is_call("POST", "/memories"))
    async with make_client(server, transport=transport) as lossy:
        memory = await lossy.create_memory(store.id, "/once.md", "exactly once")
        assert lossy.stats.retries == 1
    assert transport.dropped and transport.dropped[0].endswith("-> 200")
    assert memory.path == "/once.md" and memory.content == "exactly once"
    listed = [m async for m in client.list_memories(store.id)]
    assert [m.path for m in listed] == ["/once.md"]
    assert listed[0].id == memory.id
    versions = [v async for v in client.list_versions(store.id)]
    assert [v.operation for v in versions] == ["created"]


async def test_lost_create_answer_keeps_a_real_conflict(
    server: Any, client: StoreClient, store: MemoryStore
) -> None:
    other = await client.create_memory(store.id, "/busy.md", "someone else's")
    transport = LosingTransport(is_call("POST", "/memories"))
    async with make_client(server, transport=transport) as lossy:
        with pytest.raises(PathConflictError) as info:
            await lossy.create_memory(store.id, "/busy.md", "mine")
    assert info.value.conflicting_memory_id == other.id
    assert (await client.get_memory(store.id, other.id)).content == "someone else's"


async def test_lost_delete_answer_counts_as_done(
    server: Any, client: StoreClient, store: MemoryStore
) -> None:
    memory = await client.create_memory(store.id, "/gone.md", "bye")
    transport = LosingTransport(is_call("DELETE", memory.id))
    async with make_client(server, transport=transport) as lossy:
        await lossy.delete_memory(store.id, memory.id, expected_sha256=memory.content_sha256)
    assert transport.dropped
    assert [m async for m in client.list_memories(store.id)] == []


async def test_lost_update_answer_with_precondition_succeeds_once(
    server: Any, client: StoreClient, store: MemoryStore
) -> None:
    memory = await client.create_memory(store.id, "/edit.md", "v1")
    transport = LosingTransport(is_call("POST", memory.id))
    async with make_client(server, transport=transport) as lossy:
        updated = await lossy.update_memory(
            store.id, memory.id, content="v2", expected_sha256=memory.content_sha256
        )
    assert transport.dropped
    assert updated.content == "v2"
    versions = [v.operation async for v in client.list_versions(store.id, memory_id=memory.id)]
    assert versions == ["modified", "created"]


async def test_lost_store_delete_answer_counts_as_done(server: Any, client: StoreClient) -> None:
    store = await client.create_store(unique())
    transport = LosingTransport(is_call("DELETE", store.id))
    async with make_client(server, transport=transport) as lossy:
        await lossy.delete_store(store.id)
    assert transport.dropped


async def test_lost_store_create_answer_is_not_retried(server: Any, client: StoreClient) -> None:
    name = unique()
    transport = LosingTransport(is_call("POST", "/v1/memory_stores"))
    async with make_client(server, transport=transport) as lossy:
        with pytest.raises(ApiConnectionError):
            await lossy.create_store(name)
    same_name = [s async for s in client.list_stores(limit=100) if s.name == name]
    assert len(same_name) == 1  # applied once, never duplicated by a blind retry


async def test_lost_redact_answer_returns_the_redacted_version(
    server: Any, client: StoreClient, store: MemoryStore
) -> None:
    memory = await client.create_memory(store.id, "/r.md", "secret")
    await client.update_memory(store.id, memory.id, content="public")
    transport = LosingTransport(is_call("POST", "/redact"))
    async with make_client(server, transport=transport) as lossy:
        version = await lossy.redact_version(store.id, memory.memory_version_id)
    assert transport.dropped
    assert version.redacted and version.content is None
