"""The real ``memfs server`` subprocess over a real socket: CLI, concurrency, limits under load."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from kit.servers import free_port
from kit.waiting import wait_for
from memfs.contract.models import Actor, sha256_hex
from memfs.server.backends.sqlite import SqliteStorage


def client_for(server: Any) -> httpx.Client:
    return httpx.Client(
        base_url=server.base_url,
        headers={"x-api-key": server.api_key, "anthropic-version": "2023-06-01"},
        timeout=30,
    )


def new_store(server: Any, name: str = "socket") -> str:
    with client_for(server) as c:
        r = c.post("/v1/memory_stores", json={"name": name})
        assert r.status_code == 200, r.text
        return str(r.json()["id"])


def test_round_trip_and_envelope_over_a_socket(server: Any) -> None:
    store_id = new_store(server)
    with client_for(server) as c:
        r = c.post(f"/v1/memory_stores/{store_id}/memories", json={"path": "/a", "content": "x"})
        assert r.status_code == 200 and r.headers["request-id"].startswith("req_")
        r = c.get(f"/v1/memory_stores/{store_id}/memories/{r.json()['id']}?beta=true")
        assert r.json()["content"] == "x"
        r = c.post(
            f"/v1/memory_stores/{store_id}/memories",
            content=b'{"path": "/big", "content": "' + b"y" * 102_401 + b'"}',
        )
        assert r.status_code == 413 and r.json()["error"]["type"] == "request_too_large"
        r = httpx.get(server.base_url + "/v1/memory_stores")
        assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
        metrics = httpx.get(server.base_url + "/metrics").text
        assert 'route="/v1/memory_stores/{store_id}/memories/{memory_id}"' in metrics
        assert server.api_key not in metrics


def test_precondition_read_modify_write_has_one_winner_per_round(server: Any) -> None:
    store_id = new_store(server, "rmw")
    workers, rounds = 8, 10
    with client_for(server) as c:
        memory = c.post(
            f"/v1/memory_stores/{store_id}/memories", json={"path": "/counter", "content": "0"}
        ).json()
    target = f"/v1/memory_stores/{store_id}/memories/{memory['id']}"
    read_barrier = threading.Barrier(workers)
    round_barrier = threading.Barrier(workers)
    wins: list[list[int]] = [[] for _ in range(rounds)]
    statuses: list[int] = []
    lock = threading.Lock()

    def work(tid: int) -> None:
        with client_for(server) as c:
            for rnd in range(rounds):
                current = c.get(target).json()["content"]
                read_barrier.wait()  # everybody read the same state before anybody writes
                increment = tid + 1
                r = c.patch(
                    target,
                    json={
                        "content": str(int(current) + increment),
                        "precondition": {
                            "type": "content_sha256",
                            "content_sha256": sha256_hex(current),
                        },
                    },
                )
                with lock:
                    statuses.append(r.status_code)
                    if r.status_code == 200:
                        wins[rnd].append(increment)
                    else:
                        assert r.status_code == 409, r.text
                        assert r.json()["error"]["type"] == "memory_precondition_failed_error"
                round_barrier.wait()

    with ThreadPoolExecutor(workers) as pool:
        for future in [pool.submit(work, t) for t in range(workers)]:
            future.result()
    assert all(len(w) == 1 for w in wins), wins
    assert statuses.count(200) == rounds and statuses.count(409) == rounds * (workers - 1)
    with client_for(server) as c:
        final = c.get(target).json()
        assert int(final["content"]) == sum(w[0] for w in wins)
        versions = c.get(
            f"/v1/memory_stores/{store_id}/memory_versions",
            params={"memory_id": memory["id"], "limit": 100},
        ).json()["data"]
        assert len(versions) == rounds + 1


async def test_concurrent_creates_never_overshoot_the_limit(server: Any) -> None:
    store_id = new_store(server, "full")
    seeded = 1990
    storage = await SqliteStorage.open(server.db)  # the server's own database, seeded directly
    try:
        actor = Actor("api_actor", "apikey_seed")
        for i in range(seeded):
            await storage.create_memory(store_id, path=f"/seed/{i:04d}", content="", actor=actor)
    finally:
        await storage.aclose()

    def attempt(i: int) -> int:
        with client_for(server) as c:
            r = c.post(
                f"/v1/memory_stores/{store_id}/memories", json={"path": f"/race/{i}", "content": ""}
            )
            if r.status_code == 400:
                assert r.json()["error"]["message"].startswith("Memory store is full"), r.text
            return r.status_code

    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(attempt, range(40)))
    assert codes.count(200) == 10 and codes.count(400) == 30, codes
    with client_for(server) as c:
        listed = c.get(
            f"/v1/memory_stores/{store_id}/memories",
            params={"path_prefix": "/race/", "limit": 100},
        ).json()["data"]
        assert len(listed) == 10
        # Still full: reads and edits work, creates do not.
        r = c.patch(
            f"/v1/memory_stores/{store_id}/memories/{listed[0]['id']}", json={"content": "edit"}
        )
        assert r.status_code == 200
        r = c.post(f"/v1/memory_stores/{store_id}/memories", json={"path": "/x", "content": ""})
        assert r.status_code == 400


def _run_cli(args: list[str], env: dict[str, str], wait: float) -> tuple[int | None, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "memfs", "server", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(wait)  # its exit is the event; ``wait`` only bounds a server that starts
    finally:
        if proc.poll() is None:
            proc.terminate()
        out, _ = proc.communicate(timeout=10)
    return proc.returncode, out.decode()


def test_cli_needs_a_key(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "MEMFS_API_KEYS"}
    code, out = _run_cli(["--db", str(tmp_path / "x.db")], env, wait=15)
    assert code == 2 and "no API key" in out


def test_cli_refuses_unusable_admin_keys(tmp_path: Path) -> None:
    """Exit 2, one line without the key: open key file, same as an API key, given twice, junk."""
    admin = "sk-cli-admin-" + "q" * 20
    key_file = tmp_path / "admin.key"
    key_file.write_text(admin + "\n")
    key_file.chmod(0o644)
    two_lines = tmp_path / "two.key"
    two_lines.write_text(f"{admin}\n{admin}2\n")
    two_lines.chmod(0o600)
    base = {k: v for k, v in os.environ.items() if k not in ("MEMFS_API_KEYS", "MEMFS_ADMIN_KEY")}
    db = ["--db", str(tmp_path / "x.db")]
    cases = [
        (
            ["--admin-key-file", str(key_file)],
            {},
            f"open to other users (mode 0644); make it private: chmod 600 {key_file}",
        ),
        (["--admin-key-file", str(two_lines)], {}, "has 2 lines; it must hold the key alone"),
        ([], {"MEMFS_ADMIN_KEY": "sk-api-" + "q" * 20}, "must differ from every API key"),
        (["--admin-key-file", str(key_file)], {"MEMFS_ADMIN_KEY": admin}, "once"),
        ([], {"MEMFS_ADMIN_KEY": admin + "\u00e9"}, "printable ASCII"),
    ]
    for args, extra_env, message in cases:
        env = dict(base, MEMFS_API_KEYS="sk-api-" + "q" * 20, **extra_env)
        code, out = _run_cli([*db, *args], env, wait=15)
        assert code == 2 and message in out, out
        assert len(out.strip().splitlines()) == 1 and "q" * 20 not in out, out


def test_cli_key_warning_does_not_echo_the_key(tmp_path: Path) -> None:
    key = "sk-cli-secret-" + "z" * 20
    env = {k: v for k, v in os.environ.items() if k != "MEMFS_API_KEYS"}
    port = free_port()
    args = ["--db", str(tmp_path / "x.db"), "--port", str(port), "--api-key", key]
    proc = subprocess.Popen(
        [sys.executable, "-m", "memfs", "server", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )

    def answers() -> bool:
        try:
            url = f"http://127.0.0.1:{port}/v1/memory_stores"
            return httpx.get(url, headers={"x-api-key": key}).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(answers, timeout=20)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    text = out.decode()
    assert proc.returncode == 0, text
    assert "visible to other users" in text
    assert key not in text
