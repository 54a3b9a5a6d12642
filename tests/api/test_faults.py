"""StoreClient under faults the real server cannot produce, through httpx.MockTransport.

Rate limits with ``retry-after``, 529, dropped connections, timeouts and malformed answers.
Tests that wait use trio's ``autojump_clock``, so backoff costs no wall time and the waits can
be measured in virtual seconds.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import trio

from memfs.api import RetryPolicy, StoreClient
from memfs.api.changes import ChangeStream
from memfs.api.config import API_VERSION, MEMORY_BETA, ClientConfig, Secret
from memfs.contract.errors import (
    ApiConnectionError,
    ApiError,
    ApiTimeoutError,
    AuthenticationError,
    InternalServerError,
    NotFoundError,
    OverloadedError,
    RateLimitError,
    StoreArchivedError,
    StoreFullError,
)
from memfs.contract.models import SESSION_HEADER
from memfs.contract.retry import retry_after_seconds

KEY = "sk-fault-test-" + "z" * 30
STORE_JSON = {
    "id": "memstore_1",
    "type": "memory_store",
    "name": "n",
    "description": "",
    "metadata": {},
    "created_at": "2026-11-30T08:00:00Z",
    "updated_at": "2026-11-30T08:00:00Z",
    "archived_at": None,
}

Handler = Callable[[httpx.Request], Any]


def make_client(handler: Handler, **config: Any) -> StoreClient:
    cfg = ClientConfig(api_key=Secret(KEY), base_url="http://api.test", **config)
    policy = RetryPolicy(base_delay=0.5, max_delay=4.0, max_retry_after=30.0)
    policy.rng = random.Random(7)
    return StoreClient(cfg, transport=httpx.MockTransport(handler), retry=policy)


def error(status: int, kind: str, message: str, **headers: str) -> httpx.Response:
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_9"}
    return httpx.Response(status, json=body, headers=headers)


class Script:
    """Answers requests from a list, one per request; records what was asked."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []
        self.times: list[float] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        self.times.append(trio.current_time())
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_headers_carry_key_version_beta_and_session() -> None:
    script = Script(httpx.Response(200, json=STORE_JSON))
    async with make_client(script, session_id="sesn_42") as client:
        await client.get_store("memstore_1")
    sent = script.requests[0].headers
    assert sent["x-api-key"] == KEY
    assert "authorization" not in sent  # one form of the key only
    assert sent["anthropic-version"] == API_VERSION
    assert sent["anthropic-beta"] == MEMORY_BETA
    assert sent["user-agent"].startswith("memfs/")
    assert sent[SESSION_HEADER] == "sesn_42"
    assert script.requests[0].url.path == "/v1/memory_stores/memstore_1"


async def test_no_session_header_without_session_id() -> None:
    script = Script(httpx.Response(200, json=STORE_JSON))
    async with make_client(script) as client:
        await client.get_store("memstore_1")
    assert SESSION_HEADER not in script.requests[0].headers


async def test_429_honours_retry_after(autojump_clock: trio.testing.MockClock) -> None:
    script = Script(
        error(429, "rate_limit_error", "slow down", **{"retry-after": "3"}),
        httpx.Response(200, json=STORE_JSON),
    )
    async with make_client(script) as client:
        store = await client.get_store("memstore_1")
        assert store.id == "memstore_1"
        assert client.stats.retries == 1
        assert client.stats.by_status[429] == 1
    assert script.times[1] - script.times[0] == pytest.approx(3.0)


async def test_retry_after_is_capped(autojump_clock: trio.testing.MockClock) -> None:
    script = Script(
        error(429, "rate_limit_error", "slow down", **{"retry-after": "3600"}),
        httpx.Response(200, json=STORE_JSON),
    )
    async with make_client(script) as client:
        await client.get_store("memstore_1")
    assert script.times[1] - script.times[0] == pytest.approx(30.0)


async def test_429_gives_up_after_max_retries(autojump_clock: trio.testing.MockClock) -> None:
    script = Script(*[error(429, "rate_limit_error", "slow down", **{"retry-after": "1"})] * 3)
    async with make_client(script, max_retries=2) as client:
        with pytest.raises(RateLimitError) as info:
            await client.get_store("memstore_1")
    assert info.value.request_id == "req_9"
    assert info.value.status == 429
    assert len(script.requests) == 3


async def test_529_and_500_are_retried_with_jittered_backoff(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = Script(
        error(529, "overloaded_error", "busy"),
        error(500, "api_error", "oops"),
        httpx.Response(200, json=STORE_JSON),
    )
    async with make_client(script) as client:
        await client.get_store("memstore_1")
        assert client.stats.retries == 2
    gaps = [b - a for a, b in zip(script.times, script.times[1:], strict=False)]
    assert 0 <= gaps[0] <= 0.5  # full jitter below base * 2**0
    assert 0 <= gaps[1] <= 1.0  # and below base * 2**1


async def test_overloaded_error_class_when_retries_run_out() -> None:
    script = Script(error(529, "overloaded_error", "busy"))
    async with make_client(script, max_retries=0) as client:
        with pytest.raises(OverloadedError) as info:
            await client.get_store("memstore_1")
    assert info.value.status == 529
    assert info.value.error_type == "overloaded_error"


async def test_4xx_are_not_retried() -> None:
    script = Script(error(404, "not_found_error", "no such store"))
    async with make_client(script) as client:
        with pytest.raises(NotFoundError) as info:
            await client.get_store("memstore_1")
    assert len(script.requests) == 1
    assert info.value.request_id == "req_9"
    assert info.value.message == "no such store"
    assert info.value.body["error"]["type"] == "not_found_error"


async def test_store_full_and_archived_400s_get_their_classes() -> None:
    script = Script(
        error(400, "invalid_request_error", "Memory store is full (2000 memories)"),
        error(400, "invalid_request_error", "Memory store is archived"),
    )
    async with make_client(script) as client:
        with pytest.raises(StoreFullError):
            await client.create_memory("memstore_1", "/a", "x")
        with pytest.raises(StoreArchivedError):
            await client.create_memory("memstore_1", "/a", "x")


async def test_dropped_connection_on_read_is_retried(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = Script(
        httpx.RemoteProtocolError("Server disconnected without sending a response."),
        httpx.Response(200, json=STORE_JSON),
    )
    async with make_client(script) as client:
        assert (await client.get_store("memstore_1")).name == "n"
        assert client.stats.by_outcome["connection_error"] == 1


async def test_connection_errors_never_leak_httpx(autojump_clock: trio.testing.MockClock) -> None:
    script = Script(*[httpx.ConnectError("connection refused")] * 3)
    async with make_client(script, max_retries=2) as client:
        with pytest.raises(ApiConnectionError) as info:
            await client.get_store("memstore_1")
    assert not isinstance(info.value, httpx.HTTPError)
    assert isinstance(info.value.__cause__, httpx.ConnectError)
    assert len(script.requests) == 3


async def test_timeout_becomes_api_timeout_error(autojump_clock: trio.testing.MockClock) -> None:
    calls = 0

    async def slow(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        await trio.sleep(1000)  # an answer that never comes (autojump clock: virtual time)
        return httpx.Response(200, json=STORE_JSON)

    async with make_client(slow, timeout=2.0, connect_timeout=1.0, max_retries=1) as client:
        started = trio.current_time()
        with pytest.raises(ApiTimeoutError):
            await client.get_store("memstore_1")
        assert trio.current_time() - started < 10
        assert client.stats.by_outcome["timeout"] == 2
    assert calls == 2


async def test_with_options_changes_deadline_and_shares_stats(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def slow(request: httpx.Request) -> httpx.Response:
        await trio.sleep(5)  # a slow answer (autojump clock: virtual time)
        return httpx.Response(200, json=STORE_JSON)

    async with make_client(slow, timeout=30.0, max_retries=3) as client:
        quick = client.with_options(timeout=1.0, max_retries=0)
        with pytest.raises(ApiTimeoutError):
            await quick.get_store("memstore_1")
        await quick.aclose()  # must not close the shared pool
        assert (await client.get_store("memstore_1")).id == "memstore_1"
        assert quick.stats is client.stats
        assert client.stats.count("GET", "/v1/memory_stores/{store}") == 2


async def test_non_json_error_body() -> None:
    script = Script(httpx.Response(502, text="<html>bad gateway</html>"))
    async with make_client(script, max_retries=0) as client:
        with pytest.raises(InternalServerError) as info:
            await client.get_store("memstore_1")
    assert info.value.status == 502
    assert "502" in info.value.message


async def test_malformed_success_answers_are_api_errors() -> None:
    script = Script(
        httpx.Response(200, text="not json"),
        httpx.Response(200, json={"id": "memstore_1"}),
        httpx.Response(200, json={"data": "nope"}),
    )
    async with make_client(script) as client:
        with pytest.raises(ApiError, match="not JSON"):
            await client.get_store("memstore_1")
        with pytest.raises(ApiError, match="malformed"):
            await client.get_store("memstore_1")
        with pytest.raises(ApiError, match="malformed"):
            await client.list_stores_page()


async def test_repeated_cursor_is_an_error_not_a_loop() -> None:
    page = {"data": [STORE_JSON], "next_page": "page_same"}
    script = Script(*[httpx.Response(200, json=page)] * 3)
    async with make_client(script) as client:
        with pytest.raises(ApiError, match="same page cursor"):
            _ = [s async for s in client.list_stores()]


async def test_create_store_not_retried_after_lost_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = Script(httpx.ReadError("connection reset"), httpx.Response(200, json=STORE_JSON))
    async with make_client(script) as client:
        with pytest.raises(ApiConnectionError):
            await client.create_store("n")
    assert len(script.requests) == 1  # a second POST could create a duplicate store


async def test_create_store_retried_when_surely_not_applied(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = Script(
        httpx.ConnectError("refused"),
        error(429, "rate_limit_error", "slow down", **{"retry-after": "1"}),
        httpx.Response(200, json=STORE_JSON),
    )
    async with make_client(script) as client:
        store = await client.create_store("n", description="d", metadata={"k": "v"})
    assert store.id == "memstore_1"
    assert json.loads(script.requests[-1].content) == {
        "name": "n",
        "description": "d",
        "metadata": {"k": "v"},
    }


async def test_key_never_in_repr_errors_or_logs(
    caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock
) -> None:
    caplog.set_level(logging.DEBUG)
    script = Script(
        httpx.ConnectError("refused"),
        error(401, "authentication_error", "invalid x-api-key"),
    )
    async with make_client(script) as client:
        assert KEY not in repr(client)
        with pytest.raises(AuthenticationError) as info:
            await client.get_store("memstore_1")
    assert KEY not in str(info.value)
    assert KEY not in repr(info.value)
    assert KEY not in caplog.text
    assert "GET /v1/memory_stores/{store} -> 401" in caplog.text


def test_retry_after_parsing() -> None:
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) is None
    assert retry_after_seconds({"retry-after": "-1"}) is None
    assert retry_after_seconds({}) is None


def test_backoff_grows_and_stays_under_the_cap() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0, rng=random.Random(1))
    for n in range(1, 10):
        ceiling = min(5.0, 2 ** (n - 1))
        assert all(0 <= policy.delay(n) <= ceiling for _ in range(50))
    assert policy.delay(1, {"retry-after": "2"}) == 2.0


class Fraction:
    """A random source that always draws the same fraction of the range (exact jitter)."""

    def __init__(self, fraction: float) -> None:
        self.fraction = fraction

    def uniform(self, a: float, b: float) -> float:
        return a + (b - a) * self.fraction


async def test_deadline_refuses_a_retry_that_would_start_too_late(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A syscall's client never sleeps a long retry-after: past its deadline, the error."""
    script = Script(error(429, "rate_limit_error", "slow down", **{"retry-after": "20"}))
    async with make_client(script) as client:
        syscall = client.with_options(deadline=10.0)
        started = trio.current_time()
        with pytest.raises(RateLimitError) as info:
            await syscall.get_store("memstore_1")
        assert trio.current_time() == started  # no wait at all
        assert info.value.retry_after == 20.0  # the queue that retries later honours it
        assert len(script.requests) == 1 and client.stats.retries == 0


SSE_READY = b"event: ready\nid: 7\ndata: {}\n\n"


async def test_change_stream_reconnects_with_the_clients_policy(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Reconnect waits: the server's retry-after, else the policy's full jitter; each one is a
    retry in the client's stats; a non-transient answer ends the stream."""
    script = Script(
        error(503, "api_error", "restarting", **{"retry-after": "4"}),
        httpx.ConnectError("refused"),
        error(500, "api_error", "oops"),
        httpx.Response(200, content=SSE_READY, headers={"content-type": "text/event-stream"}),
        error(401, "authentication_error", "key revoked"),
    )
    cfg = ClientConfig(api_key=Secret(KEY), base_url="http://api.test")
    policy = RetryPolicy(base_delay=1.0, max_delay=8.0, rng=Fraction(0.5))
    transport = httpx.MockTransport(script)
    async with StoreClient(cfg, transport=transport, retry=policy) as client:
        events = []
        async with ChangeStream(client, "memstore_1") as stream:
            with pytest.raises(AuthenticationError):
                async for event in stream:
                    events.append(event)
        # each lost connection is announced before the wait (``memfs status``: reconnecting)
        assert [(e.kind, e.detail) for e in events] == [
            ("interrupted", "503 api_error"),
            ("interrupted", "the server is unreachable"),
            ("interrupted", "500 api_error"),
            ("ready", ""),
            ("interrupted", "the server closed the stream"),
        ]
        assert client.stats.retries == 3
        assert client.stats.count("GET", "/v1/memory_stores/{store}/memfs/changes") == 5
    gaps = [b - a for a, b in zip(script.times, script.times[1:], strict=False)]
    # retry-after 4; then half of 1.0 * 2**1 and of 1.0 * 2**2; after "ready", half of 1.0
    assert gaps == pytest.approx([4.0, 1.0, 2.0, 0.5])
    assert script.requests[-1].headers["last-event-id"] == "7"


async def test_a_base_url_password_is_basic_auth_never_in_urls_or_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)  # httpx logs every request URL at INFO
    script = Script(httpx.Response(200, json=STORE_JSON), httpx.ConnectError("refused"))
    cfg = ClientConfig(api_key=Secret(KEY), base_url="http://proxy:hunter2@api.test", max_retries=0)
    async with StoreClient(cfg, transport=httpx.MockTransport(script)) as client:
        await client.get_store("memstore_1")
        with pytest.raises(ApiConnectionError) as info:
            await client.get_store("memstore_1")
        assert "hunter2" not in repr(client)
    sent = script.requests[0]
    assert sent.url.userinfo == b"" and sent.headers["x-api-key"] == KEY
    assert sent.headers["authorization"] == httpx.BasicAuth("proxy", "hunter2")._auth_header
    assert "http://proxy:***@api.test" in str(info.value)
    assert "hunter2" not in str(info.value) and "hunter2" not in caplog.text
