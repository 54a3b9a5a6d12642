"""The Databricks client's dialect, on faults the reference server does not produce: its error
envelope mapped to ``memfs.contract.errors`` (and so to errnos), 429 and 503 retried by the one
retry policy with ``Retry-After``, the Bearer token sent and never shown. The endpoints themselves
are exercised against the real server by ``tests/mount/test_databricks.py``."""

from __future__ import annotations

import errno
import json

import httpx
import pytest

from memfs.api.config import ClientConfig, Secret
from memfs.api.databricks.client import DatabricksClient
from memfs.contract.errors import (
    PathConflictError,
    StoreFullError,
    errno_for,
)

from .helpers import FAST_RETRY

TOKEN = "dapi-test-token-1234"


def client(handler: httpx.MockTransport) -> DatabricksClient:
    config = ClientConfig(
        api_key=Secret(TOKEN), base_url="http://workspace.test", auth_scheme="bearer"
    )
    return DatabricksClient(config, transport=handler, retry=FAST_RETRY)


def answering(
    *answers: tuple[int, dict[str, object]], seen: list[httpx.Request]
) -> httpx.MockTransport:
    queue = list(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        status, body = queue.pop(0)
        headers = {"retry-after": "0"} if status in (429, 503) else {}
        return httpx.Response(status, json=body, headers=headers)

    return httpx.MockTransport(handle)


ENTRY = {
    "name": "memory-stores/s/entries/e1",
    "actor_id": "a",
    "path": "/x.md",
    "content": "x",
    "create_time": "2026-12-01T10:00:00Z",
    "update_time": "2026-12-01T10:00:01.5Z",
}


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        (404, "NOT_FOUND", errno.ENOENT),
        (404, "RESOURCE_DOES_NOT_EXIST", errno.ENOENT),
        (409, "ALREADY_EXISTS", errno.EEXIST),
        (400, "INVALID_PARAMETER_VALUE", errno.EINVAL),
        (400, "RESOURCE_EXHAUSTED", errno.ENOSPC),  # a full store: the create waits for room
        (401, "UNAUTHENTICATED", errno.EACCES),
        (403, "PERMISSION_DENIED", errno.EACCES),
        (418, "SOMETHING_NEW", errno.EIO),
    ],
)
async def test_error_codes_become_memfs_errors(status: int, code: str, expected: int) -> None:
    seen: list[httpx.Request] = []
    body = {"error_code": code, "message": "the server's words"}
    async with client(answering((status, body), seen=seen)) as api:
        with pytest.raises(Exception) as raised:
            await api.create_entry("s", "a", None, "/x.md", "x")
    assert errno_for(raised.value) == expected
    message = raised.value.message  # type: ignore[attr-defined]
    if status in (401, 403):  # where the key came from and who refused it (ClientConfig.refusal)
        assert message.startswith("the API key ") and api.config.shown_base_url in message
    else:
        assert message == "the server's words"
    assert len(seen) == 1  # not retried
    if code == "ALREADY_EXISTS":
        assert isinstance(raised.value, PathConflictError)
    if code == "RESOURCE_EXHAUSTED":
        assert isinstance(raised.value, StoreFullError)


async def test_throttling_and_unavailability_are_retried() -> None:
    seen: list[httpx.Request] = []
    answers = (
        (429, {"error_code": "RESOURCE_EXHAUSTED", "message": "slow down"}),
        (503, {"error_code": "TEMPORARILY_UNAVAILABLE", "message": "later"}),
        (200, ENTRY),
    )
    async with client(answering(*answers, seen=seen)) as api:
        entry = await api.get_entry("s", "e1")
    assert (entry.id, entry.path, entry.content) == ("e1", "/x.md", "x")
    assert len(seen) == 3
    request = seen[0]
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert "anthropic-version" not in request.headers
    assert request.url.path == "/api/2.0/agents/memory-stores/s/entries/e1"
    assert TOKEN not in repr(api)


async def test_an_update_sends_only_the_masked_fields() -> None:
    seen: list[httpx.Request] = []
    async with client(answering((200, ENTRY), seen=seen)) as api:
        await api.update_entry("s", "e1", description="why")
    [request] = seen
    assert request.method == "PATCH"
    assert request.url.params["update_mask"] == "description"
    assert json.loads(request.content) == {"description": "why"}
