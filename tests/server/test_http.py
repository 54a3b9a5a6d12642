"""The HTTP envelope: auth, request ids, routing errors, bad JSON, beta/session headers, 500s."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import httpx

from memfs.contract.models import MemoryStore
from memfs.server.app import create_app
from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.db.ids import api_key_id
from memfs.server.db.notify import ChangeHub
from memfs.server.http.metrics import Metrics

from .helpers import KEY, OTHER, assert_error, make_client


async def test_missing_and_wrong_key_are_401(app: Any) -> None:
    async with make_client(app, key=None) as anon:
        r = await anon.get("/v1/memory_stores")
        assert_error(r, 401, "authentication_error", "api key")
        r = await anon.get("/v1/memory_stores", headers={"x-api-key": "sk-wrong"})
        assert_error(r, 401, "authentication_error")
        r = await anon.get("/v1/memory_stores", headers={"authorization": "Bearer sk-wrong"})
        assert_error(r, 401, "authentication_error")
        r = await anon.get("/v1/memory_stores", headers={"authorization": f"Basic {KEY}"})
        assert_error(r, 401, "authentication_error")
        # Unknown routes also need a key first.
        assert_error(await anon.get("/v1/nothing"), 401, "authentication_error")
        # The key never appears in an answer.
        assert KEY not in r.text


async def test_both_key_forms_and_every_key_are_accepted(app: Any) -> None:
    async with make_client(app, key=None) as anon:
        for headers in (
            {"x-api-key": KEY},
            {"authorization": f"Bearer {KEY}"},
            {"Authorization": f"bearer {OTHER}"},
        ):
            r = await anon.get("/v1/memory_stores", headers=headers)
            assert r.status_code == 200, r.text
            assert r.json() == {"data": [], "next_page": None}


async def test_credentials_that_disagree_are_401(app: Any) -> None:
    """Every key a request carries counts; none is ignored because another one is valid."""
    async with make_client(app, key=None) as anon:
        for headers in (
            [("x-api-key", KEY), ("authorization", "Bearer sk-wrong")],
            [("authorization", f"Bearer {KEY}"), ("x-api-key", "sk-wrong")],
            [("x-api-key", KEY), ("x-api-key", "sk-wrong")],
            [("x-api-key", KEY), ("x-api-key", OTHER)],  # two valid keys: which actor?
            [("authorization", f"Bearer {KEY}"), ("authorization", f"Bearer {OTHER}")],
            [("x-api-key", KEY), ("authorization", f"Basic {KEY}")],
            [("x-api-key", KEY), ("x-api-key", "")],
        ):
            r = await anon.get("/v1/memory_stores", headers=headers)
            body = assert_error(r, 401, "authentication_error", "different credentials")
            assert KEY not in r.text and OTHER not in r.text, body
        for headers in (
            [("x-api-key", KEY), ("authorization", f"Bearer {KEY}")],
            [("x-api-key", KEY), ("x-api-key", KEY)],
        ):
            r = await anon.get("/v1/memory_stores", headers=headers)
            assert r.status_code == 200, r.text


async def test_healthz_and_metrics_need_no_key(app: Any, metrics: Metrics) -> None:
    async with make_client(app, key=None) as anon:
        r = await anon.get("/healthz")
        assert r.status_code == 200 and r.json() == {"status": "ok"}
        r = await anon.get("/metrics")
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
        assert 'memfs_server_requests_total{method="GET",route="/healthz",status="200"} 1' in r.text
        # POST to them is not open.
        assert_error(await anon.post("/healthz"), 401, "authentication_error")


async def test_metrics_use_route_templates(client: httpx.AsyncClient, store_id: str) -> None:
    await client.get(f"/v1/memory_stores/{store_id}/memories")
    await client.get("/v1/memory_stores/memstore_nope/memories")
    text = (await client.get("/metrics")).text
    route = "/v1/memory_stores/{store_id}/memories"
    assert f'memfs_server_requests_total{{method="GET",route="{route}",status="200"}} 1' in text
    assert f'memfs_server_requests_total{{method="GET",route="{route}",status="404"}} 1' in text
    assert store_id not in text
    assert f'memfs_server_request_duration_seconds_count{{method="GET",route="{route}"}} 2' in text
    assert 'memfs_server_request_duration_seconds_bucket{method="GET",route="' in text
    assert 'le="+Inf"' in text


async def test_metrics_labels_stay_bounded_whatever_is_sent(app: Any, metrics: Metrics) -> None:
    """Junk methods and paths (with or without a key) add no series: /metrics is open."""
    async with make_client(app) as c:
        for n in range(40):
            await c.request(f"JUNK{n}", "/v1/memory_stores")
            await c.request(f"X{n}", f"/v1/nothing/{n}", headers={"x-api-key": "sk-wrong"})
            await c.get(f"/v1/nothing/{n}")
        text = (await c.get("/metrics")).text
    assert metrics.request_count("other", "/v1/memory_stores", 405) == 40
    assert metrics.request_count("other", "unmatched", 401) == 40
    assert metrics.request_count("GET", "unmatched", 404) == 40
    assert set(re.findall(r'method="([^"]*)"', text)) == {"GET", "other"}
    assert set(re.findall(r'route="([^"]*)"', text)) == {"/v1/memory_stores", "unmatched"}
    counters = [line for line in text.splitlines() if line.startswith("memfs_server_requests")]
    assert len(counters) == 3


async def test_unauthenticated_requests_are_labelled_by_route(app: Any, metrics: Metrics) -> None:
    async with make_client(app, key=None) as anon:
        await anon.get("/v1/memory_stores")
    assert metrics.request_count("GET", "/v1/memory_stores", 401) == 1


async def test_every_answer_has_a_request_id(client: httpx.AsyncClient, store_id: str) -> None:
    r = await client.get(f"/v1/memory_stores/{store_id}")
    assert r.status_code == 200
    assert r.headers["request-id"].startswith("req_")
    r2 = await client.get(f"/v1/memory_stores/{store_id}")
    assert r2.headers["request-id"] != r.headers["request-id"]


async def test_unknown_route_and_wrong_method(client: httpx.AsyncClient, store_id: str) -> None:
    assert_error(await client.get("/v1/nothing"), 404, "not_found_error", "GET /v1/nothing")
    assert_error(await client.get("/v1/memory_stores/"), 404, "not_found_error")
    r = await client.put(f"/v1/memory_stores/{store_id}")
    assert_error(r, 405, "invalid_request_error", "not allowed")
    assert "GET" in r.headers["allow"]
    assert_error(await client.delete("/v1/memory_stores"), 405, "invalid_request_error")


async def test_beta_query_flag_is_ignored(client: httpx.AsyncClient, store_id: str) -> None:
    r = await client.get(f"/v1/memory_stores/{store_id}?beta=true")
    assert r.status_code == 200 and r.json()["id"] == store_id


async def test_any_version_header_and_the_old_beta_alone_are_fine(
    client: httpx.AsyncClient,
) -> None:
    for headers in (
        {"anthropic-version": "2026-10-21"},
        {"anthropic-beta": "managed-agents-2026-04-01"},
        {"anthropic-beta": "other-beta,agent-memory-2026-07-22"},
    ):
        assert (await client.get("/v1/memory_stores", headers=headers)).status_code == 200


async def test_old_beta_together_with_memory_beta_is_400(client: httpx.AsyncClient) -> None:
    r = await client.get(
        "/v1/memory_stores",
        headers={"anthropic-beta": "managed-agents-2026-04-01, agent-memory-2026-07-22"},
    )
    assert_error(r, 400, "invalid_request_error", "anthropic-beta")


async def test_malformed_bodies(client: httpx.AsyncClient, store_id: str) -> None:
    url = f"/v1/memory_stores/{store_id}/memories"
    cases: list[tuple[bytes, str]] = [
        (b"{not json", "not valid JSON: expecting property name"),
        (b"", "JSON object"),
        (b"[1, 2]", "JSON object"),
        (b'"text"', "JSON object"),
        (b"null", "JSON object"),
        (b"\xff\xfe{}", "not valid UTF-8"),
        (b"[" * 200_000 + b"]" * 200_000, "nested too deeply"),
    ]
    for raw, message in cases:
        r = await client.post(url, content=raw, headers={"content-type": "application/json"})
        assert_error(r, 400, "invalid_request_error", message)


async def test_json_edge_cases_are_400s_in_api_terms(
    client: httpx.AsyncClient, store_id: str
) -> None:
    """What json.loads would accept, mangle or explain in Python's words gets the envelope."""
    url = f"/v1/memory_stores/{store_id}/memories"
    cases: list[tuple[bytes, str]] = [
        (b'{"path": "/a", "content": ' + b"1" * 5000 + b"}", "integer too large"),
        (b'{"path": "/a", "content": -' + b"9" * 5000 + b"}", "integer too large"),
        (b'{"path": "/a", "content": 1e999999}', "number out of range"),
        (b'{"path": "/a", "content": NaN}', "NaN is not a JSON value"),
        (b'{"path": "/a", "content": -Infinity}', "-Infinity is not a JSON value"),
        (b'\xef\xbb\xbf{"path": "/a", "content": ""}', "byte order mark"),
        (b'{"path": "/a", "content": "", "path": "/b"}', "'path' appears more than once"),
        (b'{"path": "/a", "content": "x\xc3("}', "not valid UTF-8"),
        (b'{"path": "/a", "content": "x}', "unterminated string starting at line 1, column 27"),
        (b'{"path": "/a"} {}', "extra data at line 1, column 16"),
        (b'{"a": ' * 100_000, "nested too deeply"),
    ]
    for raw, message in cases:
        r = await client.post(url, content=raw, headers={"content-type": "application/json"})
        text = assert_error(r, 400, "invalid_request_error", message)["error"]["message"]
        assert "(char " not in text and "sys." not in text and "utf-8-sig" not in text
    listed = await client.get(url)
    assert listed.json()["data"] == []  # none of them wrote anything


async def test_nul_in_urls_is_a_400_on_every_backend(
    client: httpx.AsyncClient, store_id: str, mem: Any
) -> None:
    """PostgreSQL cannot compare text with NUL: such ids and filters were 500s there."""
    memory = await mem("/a.md", "x")
    base = f"/v1/memory_stores/{store_id}"
    for url in (
        "/v1/memory_stores/x%00y",
        f"{base}/memories/%00",
        f"{base}/memory_versions/{memory['memory_version_id']}%00",
        f"{base}/memory_versions?memory_id=%00",
        f"{base}/memory_versions?session_id=a%00",
        f"{base}/memory_versions?api_key_id=%00",
        f"{base}/memory_versions?service_account_id=%00",
        f"{base}/memories?path_prefix=/%00/",
    ):
        for method in ("GET", "POST", "DELETE"):
            r = await client.request(method, url, json={} if method == "POST" else None)
            if r.status_code != 405:
                assert_error(r, 400, "invalid_request_error", "NUL")
    assert (await client.get(f"{base}/memories/{memory['id']}")).json()["content"] == "x"


async def test_change_stream_cursor_out_of_range_is_a_400(tmp_path: Any) -> None:
    storage = await SqliteStorage.open(tmp_path / "memfs.db")
    app = create_app(storage, [KEY], change_hub=ChangeHub())
    try:
        async with make_client(app) as c:
            store = (await c.post("/v1/memory_stores", json={"name": "s"})).json()
            url = f"/v1/memory_stores/{store['id']}/memfs/changes"
            assert_error(await c.get(url, params={"after": "9" * 20}), 400, "invalid_request_error")
            r = await c.get(url, headers={"last-event-id": "9" * 20})
            assert_error(r, 400, "invalid_request_error", "after")
    finally:
        await storage.aclose()


async def test_oversized_body_is_413(client: httpx.AsyncClient, store_id: str) -> None:
    raw = b'{"path": "/a", "content": "' + b"x" * (1024 * 1024 + 10) + b'"}'
    r = await client.post(f"/v1/memory_stores/{store_id}/memories", content=raw)
    assert_error(r, 413, "request_too_large")


async def test_session_header_attributes_writes(client: httpx.AsyncClient, store_id: str) -> None:
    r = await client.post(
        f"/v1/memory_stores/{store_id}/memories",
        json={"path": "/s.md", "content": "x"},
        headers={"x-memfs-session-id": "sesn_01Abc-_z"},
    )
    assert r.status_code == 200
    version_id = r.json()["memory_version_id"]
    v = (await client.get(f"/v1/memory_stores/{store_id}/memory_versions/{version_id}")).json()
    assert v["created_by"] == {"type": "session_actor", "session_id": "sesn_01Abc-_z"}


async def test_api_actor_is_a_digest_of_the_key(client: httpx.AsyncClient, store_id: str) -> None:
    r = await client.post(
        f"/v1/memory_stores/{store_id}/memories", json={"path": "/k.md", "content": ""}
    )
    version_id = r.json()["memory_version_id"]
    v = (await client.get(f"/v1/memory_stores/{store_id}/memory_versions/{version_id}")).json()
    assert v["created_by"] == {"type": "api_actor", "api_key_id": api_key_id(KEY)}
    assert v["created_by"]["api_key_id"].startswith("apikey_")
    assert KEY not in v["created_by"]["api_key_id"]
    assert api_key_id(KEY) != api_key_id(OTHER)


async def test_bad_session_ids_are_400(client: httpx.AsyncClient, store_id: str) -> None:
    for bad in (b"", b"sesn_", b"session_1", b"sesn_a/b", b"sesn_a b", "sesn_é".encode()):
        r = await client.get(f"/v1/memory_stores/{store_id}", headers={b"x-memfs-session-id": bad})
        assert_error(r, 400, "invalid_request_error", "x-memfs-session-id")


async def test_session_headers_that_disagree_are_400(
    client: httpx.AsyncClient, store_id: str
) -> None:
    """Two session headers must name one session, as two credentials must name one key: else
    the last one silently won (an invalid first one was even ignored), so whoever adds the
    second header (a proxy, or the client behind it) chose the author of every write."""
    memories = f"/v1/memory_stores/{store_id}/memories"
    for first, second in ((b"sesn_proxy", b"sesn_agent"), (b"not-a-session", b"sesn_agent")):
        headers = [(b"x-memfs-session-id", first), (b"x-memfs-session-id", second)]
        r = await client.post(memories, json={"path": "/two.md", "content": "x"}, headers=headers)
        assert_error(r, 400, "invalid_request_error", "x-memfs-session-id")
    same = [(b"x-memfs-session-id", b"sesn_one"), (b"x-memfs-session-id", b"sesn_one")]
    r = await client.post(memories, json={"path": "/same.md", "content": "x"}, headers=same)
    assert r.status_code == 200, r.text
    version = await client.get(
        f"/v1/memory_stores/{store_id}/memory_versions/{r.json()['memory_version_id']}"
    )
    assert version.json()["created_by"] == {"type": "session_actor", "session_id": "sesn_one"}


class _BrokenStorage(SqliteStorage):
    """A storage whose store lookup has a bug, to prove the 500 path (the only fake here)."""

    async def get_store(self, store_id: str) -> MemoryStore:
        raise RuntimeError("boom " + str(datetime.now()))


async def test_unexpected_exceptions_become_a_logged_500(tmp_path: Any, caplog: Any) -> None:
    storage = await _BrokenStorage.open(tmp_path / "broken.db")
    try:
        app = create_app(storage, [KEY])
        async with make_client(app) as c:
            r = await c.get("/v1/memory_stores/memstore_x")
            body = assert_error(r, 500, "api_error", "internal server error")
            assert "boom" not in r.text
            assert body["request_id"] in caplog.text
            assert "RuntimeError: boom" in caplog.text
            # The server keeps answering.
            assert (await c.get("/v1/memory_stores")).status_code == 200
    finally:
        await storage.aclose()
