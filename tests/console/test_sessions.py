"""Session lifetimes and the sign-in limiter, on a settable clock (no waiting): idle and
absolute limits end a session and delete its row; the limiter's buckets refill."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from starlette.requests import Request

from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.console.ratelimit import Limits, SignInLimiter
from memfs.server.console.sessions import ABSOLUTE, COOKIE, IDLE, SessionKeeper, token_hash
from memfs.server.console.sql import SqlConsole

KEY = "sk-console-" + "c" * 30


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def request_with(token: str) -> Request:
    cookie = f"{COOKIE}={token}".encode()
    return Request(
        {"type": "http", "method": "GET", "path": "/console/", "headers": [(b"cookie", cookie)]}
    )


async def test_an_idle_session_ends_and_use_keeps_it_alive(storage: SqliteStorage) -> None:
    clock = Clock()
    keeper = SessionKeeper(SqlConsole(storage), [KEY], clock=clock)
    signed = await keeper.sign_in(KEY)
    assert signed is not None
    for _ in range(4):  # used every 20 minutes: alive past the 30-minute idle limit
        clock.now += timedelta(minutes=20)
        assert await keeper.current(request_with(signed.token)) is not None
    clock.now += IDLE
    assert await keeper.current(request_with(signed.token)) is None
    assert await SqlConsole(storage).get_session(token_hash(signed.token)) is None  # row deleted


async def test_a_session_ends_at_its_absolute_limit_however_used(storage: SqliteStorage) -> None:
    clock = Clock()
    keeper = SessionKeeper(SqlConsole(storage), [KEY], clock=clock)
    signed = await keeper.sign_in(KEY)
    assert signed is not None
    start = clock.now
    while clock.now - start < ABSOLUTE - timedelta(minutes=10):
        clock.now += timedelta(minutes=10)
        assert await keeper.current(request_with(signed.token)) is not None
    clock.now = start + ABSOLUTE
    assert await keeper.current(request_with(signed.token)) is None


async def test_the_database_holds_a_hash_and_a_key_id_never_the_token_or_key(
    storage: SqliteStorage,
) -> None:
    keeper = SessionKeeper(SqlConsole(storage), [KEY])
    signed = await keeper.sign_in(KEY)
    assert signed is not None
    rows = await storage._read(
        lambda tx: [dict(r) for r in tx.execute("SELECT * FROM console_sessions").fetchall()]
    )
    assert len(rows) == 1
    text = repr(rows)
    assert KEY not in text and signed.token not in text
    assert rows[0]["token_hash"] == token_hash(signed.token)
    assert rows[0]["api_key_id"].startswith("apikey_")


def test_the_limiter_refuses_an_address_never_everyone_and_refills() -> None:
    now = [0.0]
    limiter = SignInLimiter(Limits(per_address=2, overall=3, refill_seconds=60), lambda: now[0])
    limiter.failed("10.0.0.1")
    limiter.failed("10.0.0.1")
    assert limiter.retry_after("10.0.0.1") == 30  # one token back after 60 s / 2
    for address in ("10.0.0.2", "10.0.0.3", "10.0.0.4"):
        limiter.failed(address)  # everyone's count is over 3: it only warns
    assert limiter.retry_after("10.0.0.5") == 0
    assert limiter.retry_after("10.0.0.2") == 0
    now[0] += 20
    assert limiter.retry_after("10.0.0.1") == 10


def test_an_ipv6_hosts_addresses_are_one_client() -> None:
    limiter = SignInLimiter(Limits(per_address=1), lambda: 0.0)
    limiter.failed("2001:db8:0:7::1")
    assert limiter.retry_after("2001:db8:0:7:ffff::2") > 0  # the same /64
    assert limiter.retry_after("2001:db8:0:8::1") == 0
    limiter.failed("::ffff:192.0.2.1")
    assert limiter.retry_after("192.0.2.1") > 0  # IPv4-mapped is the IPv4 address


def test_the_limiter_remembers_a_bounded_number_of_clients() -> None:
    now = [0.0]
    limiter = SignInLimiter(
        Limits(per_address=1, max_addresses=3, refill_seconds=60), lambda: now[0]
    )
    for address in ("a", "b", "c", "d"):
        limiter.failed(address)
    assert len(limiter) == 3
    assert limiter.retry_after("d") > 0
    assert limiter.retry_after("a") == 0  # forgotten first: the table stays at 3
    now[0] += 60
    limiter.failed("e")  # the refilled ones are dropped on the way
    assert len(limiter) == 1


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_the_console_storage_on_both_backends(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Sessions (create, read, touch, end; ended ones purged at the next sign-in), memory
    counts and the tree's memories, in SQLite and in PostgreSQL."""
    from memfs.contract.models import Actor
    from memfs.server.backends.postgres import PostgresStorage
    from memfs.server.backends.storage import SqlStorage
    from memfs.server.console.storage import ConsoleSession

    storage: SqlStorage
    if backend == "postgres":
        storage = await PostgresStorage.open(request.getfixturevalue("pg_url"), pool_size=2)
    else:
        storage = await SqliteStorage.open(tmp_path / "both.db")
    try:
        console = SqlConsole(storage)
        now = datetime(2026, 12, 1, tzinfo=UTC)
        old = ConsoleSession("a" * 64, "apikey_1", now, now + ABSOLUTE, now)
        await console.create_session(old, ended_before=now - IDLE)
        assert await console.get_session("a" * 64) == old
        later = now + timedelta(minutes=5)
        await console.touch_session("a" * 64, later)
        touched = await console.get_session("a" * 64)
        assert touched is not None and touched.last_seen_at == later
        fresh = ConsoleSession("b" * 64, "apikey_2", now + IDLE * 2, now + ABSOLUTE, now + IDLE * 2)
        await console.create_session(fresh, ended_before=fresh.created_at - IDLE)
        assert await console.get_session("a" * 64) is None  # idle too long: purged
        await console.delete_session("b" * 64)
        assert await console.get_session("b" * 64) is None

        store = await storage.create_store(name="s", description="", metadata={})
        actor = Actor("api_actor", "apikey_1")
        made = [
            await storage.create_memory(store.id, path=path, content=path, actor=actor)
            for path in ("/b/z.md", "/a.md", "/b/a.md")
        ]
        assert await console.memory_counts([store.id, "memstore_nope"]) == {store.id: 3}
        by_path = sorted((m.path, m.id) for m in made)
        listed = await console.tree_memories(store.id)
        assert [(m.path, m.id) for m in listed] == by_path
        # each with its size, and its head version's time and writer
        heads = {m.id: m for m in made}
        assert [(m.size, m.changed_at, m.changed_by) for m in listed] == [
            (len(m.path), heads[m.id].updated_at, actor) for m in listed
        ]
        assert console.memory_limit == 2000
    finally:
        await storage.aclose()
