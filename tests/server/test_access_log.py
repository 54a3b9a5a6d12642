"""``memfs server --access-log``: one line per request, route templates only, never a secret."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import httpx

from kit.servers import ServerProcess, free_port
from kit.waiting import wait_for

LINE = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (?P<method>[A-Z]+|other) (?P<route>\S+) "
    r"(?P<status>\d{3}) \d+\.\dms (?P<request_id>req_\w+)$"
)


def test_access_log_has_one_line_per_request_and_no_secret(tmp_path: Path) -> None:
    access = tmp_path / "access.log"
    server = ServerProcess(
        db=tmp_path / "a.db", port=free_port(), extra_args=["--access-log", str(access)]
    )
    server.start()
    try:
        headers = {"x-api-key": server.api_key}
        with httpx.Client(base_url=server.base_url, timeout=10) as http:
            created = http.post("/v1/memory_stores", json={"name": "logged"}, headers=headers)
            store_id = created.json().get("id", "")
            refused = http.get(
                "/v1/memory_stores", headers={"x-api-key": "sk-not-a-key-" + "s" * 20}
            )
            unmatched = http.get(f"/v1/nothing/{server.api_key}", headers=headers)
        assert created.status_code == 200 and store_id.startswith("memstore_")
        answers = [created, refused, unmatched]
        lines = wait_for(lambda: (t := access.read_text().splitlines()) and len(t) >= 4 and t)
    finally:
        server.stop()
    text = access.read_text()
    assert server.api_key not in text and "sk-not-a-key" not in text
    assert not store_id or store_id not in text
    parsed = [m.groupdict() for m in map(LINE.match, lines) if m]
    assert len(parsed) == len(lines), lines
    mine = [p for p in parsed if p["route"] != "/healthz"]
    assert [(p["method"], p["route"], int(p["status"])) for p in mine] == [
        ("POST", "/v1/memory_stores", created.status_code),
        ("GET", "/v1/memory_stores", 401),
        ("GET", "unmatched", unmatched.status_code),
    ]
    assert [p["request_id"] for p in mine] == [a.headers["request-id"] for a in answers]
    assert stat.S_IMODE(access.stat().st_mode) == 0o600


def test_access_log_to_standard_output(tmp_path: Path) -> None:
    server = ServerProcess(db=tmp_path / "b.db", port=free_port(), extra_args=["--access-log", "-"])
    server.start()
    try:
        answer = httpx.get(server.base_url + "/v1/memory_stores", headers={"x-api-key": "wrong"})
        request_id = answer.headers["request-id"]
        assert server.log_path is not None  # the server's stdout and stderr
        log_path = server.log_path
        line = wait_for(
            lambda: next((t for t in log_path.read_text().splitlines() if request_id in t), None)
        )
    finally:
        server.stop()
    match = LINE.match(line)
    assert match and match["route"] == "/v1/memory_stores" and match["status"] == "401"


def test_a_method_the_client_invents_is_logged_as_other(tmp_path: Path) -> None:
    """h11 takes any token as a method, up to the 64 KiB of a head: written as sent, a client
    without a key put 50 kB into the access log per request. Logged as the metrics count it."""
    access = tmp_path / "access.log"
    server = ServerProcess(
        db=tmp_path / "m.db", port=free_port(), extra_args=["--access-log", str(access)]
    )
    server.start()
    try:
        invented = "X" * 10_000
        answer = httpx.request(invented, server.base_url + "/healthz", timeout=10)
        request_id = answer.headers["request-id"]
        line = wait_for(
            lambda: next((t for t in access.read_text().splitlines() if request_id in t), None)
        )
    finally:
        server.stop()
    assert answer.status_code == 401
    parsed = LINE.match(line)
    assert parsed is not None and parsed["method"] == "other", line
    assert invented not in access.read_text() and len(line) < 200
