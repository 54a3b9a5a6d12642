"""Memory versions: one per change, newest first, filters, pages, redaction, retention."""

from __future__ import annotations

from typing import Any

import httpx

from memfs.contract.models import Actor, parse_time, sha256_hex
from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.db.ids import api_key_id
from memfs.server.memory_stores.storage import VersionFilter
from memfs.server.serve import Retention

from .helpers import KEY, OTHER, FakeClock, MakeMemory, assert_error

VERSION_FIELDS = {
    "id",
    "type",
    "memory_id",
    "memory_store_id",
    "operation",
    "path",
    "content",
    "content_sha256",
    "content_size_bytes",
    "created_at",
    "created_by",
    "redacted_at",
    "redacted_by",
}


def vurl(store_id: str, version_id: str = "") -> str:
    base = f"/v1/memory_stores/{store_id}/memory_versions"
    return f"{base}/{version_id}" if version_id else base


def murl(store_id: str, memory_id: str) -> str:
    return f"/v1/memory_stores/{store_id}/memories/{memory_id}"


async def history(client: httpx.AsyncClient, store_id: str, **params: Any) -> list[dict[str, Any]]:
    r = await client.get(vurl(store_id), params={"limit": 100, **params})
    assert r.status_code == 200, r.text
    data: list[dict[str, Any]] = r.json()["data"]
    return data


async def test_one_version_per_change_newest_first(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory
) -> None:
    memory = await mem("/v.md", "one")
    await client.patch(murl(store_id, memory["id"]), json={"content": "two"})
    await client.patch(murl(store_id, memory["id"]), json={"path": "/w.md"})
    await client.delete(murl(store_id, memory["id"]))
    versions = await history(client, store_id)
    assert [v["operation"] for v in versions] == ["deleted", "modified", "modified", "created"]
    assert [v["path"] for v in versions] == ["/w.md", "/w.md", "/v.md", "/v.md"]
    assert all(set(v) == VERSION_FIELDS for v in versions)
    assert all(v["content"] is None for v in versions)  # basic by default on list
    assert versions[1]["content_sha256"] == sha256_hex("two")
    assert versions[1]["content_size_bytes"] == 3
    assert versions[-1]["id"] == memory["memory_version_id"]
    times = [parse_time(v["created_at"]) for v in versions]
    assert times == sorted(times, reverse=True) and len(set(times)) == 4
    full = await history(client, store_id, view="full")
    assert [v["content"] for v in full] == [None, "two", "two", "one"]
    one = (await client.get(vurl(store_id, versions[-1]["id"]))).json()  # full by default
    assert one["content"] == "one" and one["type"] == "memory_version"
    basic = (await client.get(vurl(store_id, versions[-1]["id"]), params={"view": "basic"})).json()
    assert basic["content"] is None and basic["content_sha256"] == sha256_hex("one")


async def test_created_at_strictly_increases_when_the_clock_stands_still(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory, clock: FakeClock
) -> None:
    clock.frozen = True
    memory = await mem("/t", "0")
    for i in range(1, 5):
        await client.patch(murl(store_id, memory["id"]), json={"content": str(i)})
    other = await mem("/u", "x")
    times = [parse_time(v["created_at"]) for v in await history(client, store_id)]
    assert times == sorted(times, reverse=True) and len(set(times)) == len(times) == 6
    # A created_at[gte] feed from the last seen time sees that version and everything newer.
    last_seen = (await history(client, store_id, memory_id=memory["id"]))[0]["created_at"]
    feed = await history(client, store_id, **{"created_at[gte]": last_seen})
    assert [v["memory_id"] for v in feed] == [other["id"], memory["id"]]


async def test_filters(client: httpx.AsyncClient, app: Any, store_id: str, mem: MakeMemory) -> None:
    a = await mem("/a", "a", **{"x-memfs-session-id": "sesn_one"})
    b = await mem("/b", "b")
    await client.patch(murl(store_id, a["id"]), json={"content": "a2"})
    await client.delete(murl(store_id, b["id"]))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://memfs.test",
        headers={"x-api-key": OTHER},
    ) as other:
        c = (
            await other.post(
                f"/v1/memory_stores/{store_id}/memories", json={"path": "/c", "content": ""}
            )
        ).json()

    def ops(versions: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return [(v["memory_id"], v["operation"]) for v in versions]

    assert ops(await history(client, store_id, memory_id=a["id"])) == [
        (a["id"], "modified"),
        (a["id"], "created"),
    ]
    assert ops(await history(client, store_id, memory_id=b["id"])) == [
        (b["id"], "deleted"),
        (b["id"], "created"),
    ]
    assert ops(await history(client, store_id, operation="deleted")) == [(b["id"], "deleted")]
    assert ops(await history(client, store_id, session_id="sesn_one")) == [(a["id"], "created")]
    assert ops(await history(client, store_id, api_key_id=api_key_id(OTHER))) == [
        (c["id"], "created")
    ]
    assert len(await history(client, store_id, api_key_id=api_key_id(KEY))) == 3
    assert await history(client, store_id, service_account_id="svac_1") == []
    assert await history(client, store_id, memory_id="mem_unknown") == []
    everything = await history(client, store_id)
    middle = everything[2]["created_at"]
    newer = await history(client, store_id, **{"created_at[gte]": middle})
    older = await history(client, store_id, **{"created_at[lte]": middle})
    assert len(newer) == 3 and len(older) == len(everything) - 2


async def test_pages_and_bad_parameters(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory
) -> None:
    memory = await mem("/p", "0")
    for i in range(1, 5):
        await client.patch(murl(store_id, memory["id"]), json={"content": str(i)})
    seen: list[str] = []
    page = None
    while True:
        r = await client.get(
            vurl(store_id), params={"limit": 2, **({"page": page} if page else {})}
        )
        seen += [v["id"] for v in r.json()["data"]]
        page = r.json()["next_page"]
        if not page:
            break
    assert seen == [v["id"] for v in await history(client, store_id)] and len(seen) == 5
    first = (await client.get(vurl(store_id), params={"limit": 2})).json()["next_page"]
    r = await client.get(vurl(store_id), params={"page": first, "operation": "created"})
    assert_error(r, 400, "invalid_request_error", "different")
    for params, message in (
        ({"operation": "renamed"}, "operation"),
        ({"limit": "0"}, "limit"),
        ({"limit": "x"}, "limit"),
        ({"view": "raw"}, "view"),
        ({"created_at[gte]": "2026-13-45"}, "created_at[gte]"),
        ({"page": "page_AAAA"}, "page"),
    ):
        assert_error(
            await client.get(vurl(store_id), params=params), 400, "invalid_request_error", message
        )
    assert_error(
        await client.get(vurl(store_id, "memver_nope")), 404, "not_found_error", "memver_nope"
    )
    assert_error(await client.get(vurl("memstore_nope")), 404, "not_found_error")
    assert_error(
        await client.post(vurl(store_id, "memver_nope") + "/redact"), 404, "not_found_error"
    )


async def test_redaction(client: httpx.AsyncClient, store_id: str, mem: MakeMemory) -> None:
    memory = await mem("/secret.md", "password=hunter2", **{"x-memfs-session-id": "sesn_s"})
    head = memory["memory_version_id"]
    r = await client.post(vurl(store_id, head) + "/redact")
    assert_error(r, 400, "invalid_request_error", "current version")
    await client.patch(murl(store_id, memory["id"]), json={"content": "clean"})
    r = await client.post(
        vurl(store_id, head) + "/redact", headers={"x-memfs-session-id": "sesn_s"}
    )
    assert r.status_code == 200, r.text
    redacted = r.json()
    assert (redacted["content"], redacted["content_sha256"], redacted["content_size_bytes"]) == (
        None,
        None,
        None,
    )
    assert redacted["path"] is None
    assert redacted["redacted_at"] is not None
    # Redactions are attributed to the API key even when a session header is present.
    assert redacted["redacted_by"] == {"type": "api_actor", "api_key_id": api_key_id(KEY)}
    assert redacted["created_by"] == {"type": "session_actor", "session_id": "sesn_s"}
    assert redacted["operation"] == "created" and redacted["memory_id"] == memory["id"]
    got = await client.get(vurl(store_id, head))
    assert got.status_code == 200 and got.json() == redacted
    again = await client.post(vurl(store_id, head) + "/redact")
    assert again.status_code == 200 and again.json() == redacted  # unchanged
    assert "hunter2" not in (await client.get(vurl(store_id), params={"view": "full"})).text
    r = await client.post(vurl(store_id, head) + "/redact", json={"reason": "x"})
    assert_error(r, 400, "invalid_request_error", "unknown field")
    # After deletion every version, including the newest, can be redacted.
    await client.delete(murl(store_id, memory["id"]))
    for version in await history(client, store_id, memory_id=memory["id"]):
        r = await client.post(vurl(store_id, version["id"]) + "/redact")
        assert r.status_code == 200 and r.json()["path"] is None


async def test_versions_outlive_their_memory(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory
) -> None:
    memory = await mem("/gone", "x")
    await client.delete(murl(store_id, memory["id"]))
    versions = await history(client, store_id, memory_id=memory["id"])
    assert [v["operation"] for v in versions] == ["deleted", "created"]
    r = await client.get(vurl(store_id, memory["memory_version_id"]))
    assert r.status_code == 200 and r.json()["content"] == "x"


async def test_retention_keeps_each_memorys_newest_version(
    storage: SqliteStorage, clock: FakeClock
) -> None:
    actor = Actor("api_actor", "apikey_t")
    store = await storage.create_store(name="r", description="", metadata={})
    live = await storage.create_memory(store.id, path="/live", content="1", actor=actor)
    await storage.update_memory(
        store.id, live.id, content="2", path=None, expected_sha256=None, actor=actor
    )
    gone = await storage.create_memory(store.id, path="/gone", content="x", actor=actor)
    await storage.delete_memory(store.id, gone.id, expected_sha256=None, actor=actor)
    old_only = await storage.create_memory(store.id, path="/old", content="o", actor=actor)
    clock.advance(days=31)
    fresh = await storage.update_memory(
        store.id, live.id, content="3", path=None, expected_sha256=None, actor=actor
    )
    retention = Retention(storage, retention_days=30, clock=clock)
    assert await retention.prune_once() == 3  # live: created + modified(2); gone: created
    kept = await storage.list_versions(
        store.id, VersionFilter(), after=None, limit=100, with_content=False
    )
    kept_ops = sorted((v.memory_id, v.operation) for v in kept.items)
    assert kept_ops == sorted(
        [(live.id, "modified"), (gone.id, "deleted"), (old_only.id, "created")]
    )
    assert fresh.memory_version_id in {v.id for v in kept.items}
    assert await retention.prune_once() == 0
    # A longer retention keeps everything younger than it.
    assert await Retention(storage, retention_days=365, clock=clock).prune_once() == 0
