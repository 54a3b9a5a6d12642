"""Hostile HTTP clients against a real ``memfs server`` process over real sockets.

A client that hangs up mid-body, one that sends its body a byte at a time, one that asks for
HTTP/2 cleartext, one that opens change streams without end, odd integers and prefixes: each is
answered as docs/server.md says and none is a 500. One server serves the module (its access
log, metrics and log are read after each request; tests look only at their own lines).
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

import h2.config
import h2.connection
import h2.events
import httpx
import pytest
import trio

from kit.servers import OTHER_KEY, ServerProcess, free_port
from kit.waiting import wait_for
from memfs.cli import build_parser
from memfs.commands import server as server_command
from memfs.server.serve import ServerSettings, serve

BODY_TIMEOUT = 1.0
STREAMS_PER_KEY = 2


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("hostile")
    proc = ServerProcess(
        db=root / "memfs.db",
        port=free_port(),
        extra_args=[
            "--access-log",
            str(root / "access.log"),
            "--body-timeout",
            str(BODY_TIMEOUT),
            "--max-streams-per-key",
            str(STREAMS_PER_KEY),
        ],
    )
    with proc:
        yield proc


def access_log(server: ServerProcess) -> Path:
    return server.db.parent / "access.log"


def server_log(server: ServerProcess) -> str:
    assert server.log_path is not None
    return server.log_path.read_text()


def raw_request(server: ServerProcess, head: str, body: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.sendall(head.encode("latin-1") + b"\r\n" + body)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def post_head(server: ServerProcess, path: str, length: int) -> str:
    return (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nx-api-key: {server.api_key}\r\n"
        f"content-type: application/json\r\ncontent-length: {length}\r\n"
    )


def metric(server: ServerProcess, method: str, route: str, status: str) -> int:
    text = httpx.get(server.base_url + "/metrics").text
    labels = f'method="{method}",route="{route}",status="{status}"'
    found = re.search(re.escape(f"memfs_server_requests_total{{{labels}}} ") + r"(\d+)", text)
    return int(found.group(1)) if found else 0


def api(server: ServerProcess, key: str | None = None) -> httpx.Client:
    return httpx.Client(
        base_url=server.base_url, headers={"x-api-key": key or server.api_key}, timeout=10
    )


def test_a_client_that_hangs_up_mid_body_is_counted_as_499_not_500(
    hostile: ServerProcess,
) -> None:
    log = access_log(hostile)
    lines_before = len(log.read_text().splitlines())
    sock = raw_request(hostile, post_head(hostile, "/v1/memory_stores", 100), b'{"name": ')
    sock.close()

    def posted() -> list[str]:  # the fixture's own GET /healthz may be logged late
        new = log.read_text().splitlines()[lines_before:]
        return [line for line in new if " POST /v1/memory_stores " in line]

    line = wait_for(posted)[0]
    assert " POST /v1/memory_stores 499 " in line, line
    request_id = line.rsplit(" ", 1)[1]
    assert metric(hostile, "POST", "/v1/memory_stores", "499") == 1
    assert metric(hostile, "POST", "/v1/memory_stores", "500") == 0
    mine = [entry for entry in server_log(hostile).splitlines() if request_id in entry]
    assert len(mine) == 1 and " INFO " in mine[0] and "client closed" in mine[0], mine
    assert "Traceback" not in server_log(hostile)


def test_a_body_that_does_not_arrive_in_time_is_408_and_the_connection_closes(
    hostile: ServerProcess,
) -> None:
    started = time.monotonic()
    sock = raw_request(hostile, post_head(hostile, "/v1/memory_stores", 100), b'{"name": ')
    with sock:
        answer = read_until_closed(sock)  # the server closes: the rest of the body is not read
    took = time.monotonic() - started
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 "), answer
    assert b"\r\nconnection: close" in head.lower()
    assert BODY_TIMEOUT <= took < BODY_TIMEOUT + 3
    envelope = httpx.Response(408, content=body).json()
    assert envelope["error"]["type"] == "invalid_request_error"
    assert "did not arrive within 1 s" in envelope["error"]["message"]
    assert envelope["request_id"].encode() in head
    # A body that trickles in but completes in time is fine.
    sock = raw_request(hostile, post_head(hostile, "/v1/memory_stores", 16), b'{"name":')
    with sock:
        time.sleep(BODY_TIMEOUT / 4)
        sock.sendall(b' "slow"}')
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")


def test_content_length_with_transfer_encoding_is_refused_and_the_connection_closed(
    hostile: ServerProcess,
) -> None:
    """RFC 9112 §6.1: a sign of request smuggling; nothing after it on the connection is read
    (such as a second request that a proxy in front, going by Content-Length, would not see)."""
    body = b'{"name":"a"}'
    head = post_head(hostile, "/v1/memory_stores", len(body)) + "transfer-encoding: chunked\r\n"
    chunked = b"c\r\n" + body + b"\r\n0\r\n\r\n"
    with raw_request(hostile, head, chunked) as sock:
        answer = read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 400 ") and b"\r\nconnection: close\r\n" in answer
    assert b"both Content-Length and Transfer-Encoding" in answer
    smuggled = f"GET /v1/memory_stores HTTP/1.1\r\nhost: x\r\nx-api-key: {hostile.api_key}\r\n\r\n"
    with raw_request(hostile, head, chunked + smuggled.encode()) as sock:
        answer = read_until_closed(sock)
    assert b"HTTP/1.1 200" not in answer, answer


def test_http2_cleartext_is_off_unless_asked_for(hostile: ServerProcess) -> None:
    """Neither an ``Upgrade: h2c`` request nor the HTTP/2 preface switches protocols."""
    upgrade = (
        "GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: Upgrade, HTTP2-Settings\r\n"
        "upgrade: h2c\r\nhttp2-settings: AAMAAABkAARAAAAAAAIAAAAA\r\nconnection: close\r\n"
    )
    with raw_request(hostile, upgrade) as sock:
        answer = read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes.fromhex("000000040000000000")
    with socket.create_connection(("127.0.0.1", hostile.port), timeout=10) as sock:
        sock.sendall(preface)
        answer = read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]  # not an HTTP/2 SETTINGS frame
    assert b"HTTP/1.1 500" not in answer


async def next_h2_events(
    stream: trio.SocketStream, client: h2.connection.H2Connection, until: type, stream_id: int
) -> list[Any]:
    """HTTP/2 events the server sends, up to an ``until`` event of ``stream_id``."""
    events: list[Any] = []
    with trio.fail_after(10):
        while not any(isinstance(e, until) and e.stream_id == stream_id for e in events):
            events += client.receive_data(await stream.receive_some(65536))
            await stream.send_all(client.data_to_send())
    return events


def statuses(events: list[Any], stream_id: int) -> list[bytes]:
    return [
        dict(e.headers)[b":status"]
        for e in events
        if isinstance(e, h2.events.ResponseReceived) and e.stream_id == stream_id
    ]


async def test_h2c_with_the_option_and_a_body_after_its_answer_stops_nothing(
    tmp_path: Path,
) -> None:
    """``--h2c`` speaks HTTP/2; a client without a key whose body goes on after its 401 (body
    frames of a closed stream: Hypercorn's ``KeyError``, which ended the server) changes
    nothing: the same connection is served next."""
    settings = ServerSettings(
        db=str(tmp_path / "h2c.db"), api_keys=["sk-h2c-" + "h" * 24], port=free_port(), h2c=True
    )
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    upgrade = (
        b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: Upgrade, HTTP2-Settings\r\n"
        b"upgrade: h2c\r\nhttp2-settings: " + client.initiate_upgrade_connection() + b"\r\n\r\n"
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(partial(serve, settings, shutdown_trigger=trio.sleep_forever))
        stream = await trio.open_tcp_stream("127.0.0.1", settings.port)
        async with stream:
            await stream.send_all(upgrade)
            head = b""
            while b"\r\n\r\n" not in head:
                head += await stream.receive_some(65536)
            head, _, rest = head.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 101 "), head
            client.receive_data(rest)
            await stream.send_all(client.data_to_send())
            post = client.get_next_available_stream_id()
            client.send_headers(
                post,
                [
                    (":method", "POST"),
                    (":path", "/v1/memory_stores"),
                    (":authority", "127.0.0.1"),
                    (":scheme", "http"),
                    ("content-length", "16"),
                ],
            )
            client.send_data(post, b'{"name":')
            await stream.send_all(client.data_to_send())
            answered = await next_h2_events(stream, client, h2.events.StreamEnded, post)
            assert statuses(answered, post) == [b"401"]
            client.send_data(post, b' "late"}', end_stream=True)  # after its answer
            get = client.get_next_available_stream_id()
            healthz = [(":method", "GET"), (":path", "/healthz"), (":authority", "127.0.0.1")]
            client.send_headers(get, [*healthz, (":scheme", "http")], end_stream=True)
            await stream.send_all(client.data_to_send())
            served = await next_h2_events(stream, client, h2.events.StreamEnded, get)
            assert statuses(served, get) == [b"200"]
        nursery.cancel_scope.cancel()  # a graceful stop would wait for the HTTP/2 connection


def test_the_new_options_are_checked_and_in_the_help(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(server_command.KEYS_ENV, "sk-options-" + "o" * 24)
    for argv, message in (
        (["--body-timeout", "0"], "--body-timeout must be from 0 to 3600 seconds"),
        (["--body-timeout", "nan"], "--body-timeout must be from 0 to 3600 seconds"),
        (["--max-streams-per-key", "0"], "--max-streams-per-key must be at least 1"),
    ):
        args = build_parser().parse_args(["server", "--db", str(tmp_path / "x.db"), *argv])
        assert server_command.run(args) == server_command.EXIT_USAGE
        assert capsys.readouterr().err == f"memfs server: {message}\n"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["server", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "--h2c also speak HTTP/2 cleartext" in shown and "HTTP/1.1 only" in shown
    assert "--body-timeout SECONDS" in shown and "(default: 30.0)" in shown
    assert "--max-streams-per-key N" in shown and "(default: 64)" in shown


def open_streams(stack: ExitStack, server: ServerProcess, key: str, paths: list[str]) -> list[Any]:
    """GET each change stream; the answers (open streams stay open until ``stack`` closes)."""
    http = stack.enter_context(
        httpx.Client(
            base_url=server.base_url,
            headers={"authorization": f"Bearer {key}"},
            timeout=10,
        )
    )
    return [stack.enter_context(http.stream("GET", path)) for path in paths]


def test_change_streams_per_key_are_bounded_across_both_apis(hostile: ServerProcess) -> None:
    with api(hostile) as http:
        store_id = http.post("/v1/memory_stores", json={"name": "streams"}).json()["id"]
        r = http.post("/api/2.0/agents/memory-stores?managed_memory_store_id=streams", json={})
        assert r.status_code == 200, r.text
    memory_stream = f"/v1/memory_stores/{store_id}/memfs/changes"
    dbx_stream = "/api/2.0/agents/memory-stores/streams/memfs/changes"
    with ExitStack() as first:
        held = open_streams(first, hostile, hostile.api_key, [memory_stream, dbx_stream])
        assert [r.status_code for r in held] == [200] * STREAMS_PER_KEY
        with ExitStack() as more:
            refused_memory, refused_dbx = open_streams(
                more, hostile, hostile.api_key, [memory_stream, dbx_stream]
            )
            refused_memory.read()
            refused_dbx.read()
            other = open_streams(more, hostile, OTHER_KEY, [memory_stream])[0]
            assert other.status_code == 200  # another key has streams of its own
        assert refused_memory.status_code == 429
        assert refused_memory.json()["error"]["type"] == "rate_limit_error"
        assert refused_memory.json()["request_id"] == refused_memory.headers["request-id"]
        assert "change streams" in refused_memory.json()["error"]["message"]
        assert refused_dbx.status_code == 429
        assert refused_dbx.json()["error_code"] == "REQUEST_LIMIT_EXCEEDED"
        for refused in (refused_memory, refused_dbx):
            assert int(refused.headers["retry-after"]) > 0

    # Closing the held streams frees their slots (the server sees the hang-up).
    def reopened() -> bool:
        with ExitStack() as again:
            answers = open_streams(again, hostile, hostile.api_key, [memory_stream, dbx_stream])
            return all(r.status_code == 200 for r in answers)

    assert wait_for(reopened)


def test_a_stream_error_event_carries_the_request_id(hostile: ServerProcess) -> None:
    with api(hostile) as http:
        store_id = http.post("/v1/memory_stores", json={"name": "deleted"}).json()["id"]
        with http.stream("GET", f"/v1/memory_stores/{store_id}/memfs/changes") as stream:
            lines = stream.iter_lines()
            assert next(lines) == "event: ready"
            assert http.delete(f"/v1/memory_stores/{store_id}").status_code == 200
            data = next(line for line in lines if line.startswith('data: {"type": "error"'))
            request_id = stream.headers["request-id"]
    assert request_id.startswith("req_")
    assert httpx.Response(200, content=data[len("data: ") :]).json()["request_id"] == request_id


@pytest.mark.parametrize("number", ["1_0", "١٠", "+5", " 5"])
def test_integers_in_query_strings_are_ascii_digits(hostile: ServerProcess, number: str) -> None:
    with api(hostile) as http:
        r = http.get("/v1/memory_stores", params={"limit": number})
        assert r.status_code == 400 and "limit: expected an integer" in r.text, r.text
        r = http.get("/api/2.0/agents/memory-stores", params={"page_size": number})
        assert r.status_code == 400 and "page_size: expected an integer" in r.text, r.text
        assert http.get("/v1/memory_stores", params={"limit": "10"}).status_code == 200


def test_search_path_prefix_is_refused_as_a_listing_refuses_it(hostile: ServerProcess) -> None:
    with api(hostile) as http:
        store_id = http.post("/v1/memory_stores", json={"name": "prefixes"}).json()["id"]
        memories = f"/v1/memory_stores/{store_id}/memories"
        r = http.post(memories, json={"path": "/notes/.hidden", "content": "walrus"})
        assert r.status_code == 200, r.text
        search = f"/v1/memory_stores/{store_id}/memfs/search"
        for bad in (
            "//",
            "/a//",
            "/a/../",
            "/a/./b",
            "/../",
            "/a\u0000b/",
            "/a\u0001",
            "/e\u0301/",
        ):
            r = http.post(search, json={"query": "walrus", "path_prefix": bad})
            assert r.status_code == 400, (bad, r.text)
            assert r.json()["error"]["message"].startswith("path_prefix: "), r.text
            if bad.endswith("/") and "\u0000" not in bad:  # a listing's (NUL: refused in URLs)
                listed = http.get(memories, params={"path_prefix": bad})
                assert listed.json()["error"]["message"] == r.json()["error"]["message"]
        for good in ("/", "/notes/", "/notes/.", "/no"):
            r = http.post(search, json={"query": "walrus", "path_prefix": good})
            assert r.status_code == 200, (good, r.text)
            assert [hit["memory"]["path"] for hit in r.json()["data"]] == ["/notes/.hidden"]


def test_answers_say_nosniff_and_not_which_server(hostile: ServerProcess) -> None:
    # a memory's content is agent-written: a browser must not sniff it as HTML
    with api(hostile) as http:
        for answer in (
            http.get("/healthz"),
            http.get("/v1/memory_stores"),
            http.get("/v1/memory_stores/memstore_nope"),
            httpx.get(hostile.base_url + "/v1/memory_stores"),  # 401, no key
        ):
            assert answer.headers["x-content-type-options"] == "nosniff", answer.headers
            assert "server" not in answer.headers, answer.headers


def test_a_query_parameter_given_twice_is_refused_naming_it(hostile: ServerProcess) -> None:
    """Starlette answers the last of a repeated parameter: a scope appended to a URL (or put
    first) would be undone by another. Each reader refuses a repeat instead (400, its name)."""
    with api(hostile) as http:
        store_id = http.post("/v1/memory_stores", json={"name": "twice"}).json()["id"]
        r = http.post("/api/2.0/agents/memory-stores?managed_memory_store_id=twice", json={})
        assert r.status_code == 200, r.text
        memory_stores = [
            ("/v1/memory_stores", "include_archived=true&include_archived=false"),
            (f"/v1/memory_stores/{store_id}/memory_versions", "session_id=a&session_id=b"),
            (f"/v1/memory_stores/{store_id}/memories", "path_prefix=/a/&path_prefix=/"),
            (f"/v1/memory_stores/{store_id}/memfs/changes", "after=0&after=1"),
        ]
        for path, query in memory_stores:
            r = http.get(f"{path}?{query}")
            name = query.split("=")[0]
            assert r.status_code == 400, (path, r.text)
            assert r.json()["error"]["message"] == f"{name}: given 2 times; send it once"
        entries = "/api/2.0/agents/memory-stores/twice/entries"
        databricks = [
            (entries, "actor_id=bob&actor_id=alice"),
            (entries, "actor_id=bob&session_id=s1&session_id=s2"),
            ("/api/2.0/agents/memory-stores/twice/memfs/changes", "actor_id=bob&actor_id=alice"),
        ]
        for path, query in databricks:
            r = http.get(f"{path}?{query}")
            name = query.split("&")[-1].split("=")[0]
            assert r.status_code == 400, (path, r.text)
            assert r.json()["message"] == f"{name}: given 2 times; send it once"
        assert http.get(f"{entries}?actor_id=bob&session_id=s1").status_code == 200
