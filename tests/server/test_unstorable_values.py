"""Values one backend cannot store, sent by a client: a 400, the same on both backends.

NUL (U+0000) in any text a client sends is a 400 naming the field: PostgreSQL ``text`` cannot
hold a NUL and SQLite can, so without one rule at the edge the same request was a 500 on one
backend (which a mount retries for ever) and stored on the other. Every string of a body passes
``memfs.server.http.body.text_field``, which refuses it (a NUL in the URL is the gatekeeper's:
``test_http.py``) — except a Memory Stores content, which the API allows to hold NUL: both
backends store it (escaped on PostgreSQL, ``memory_stores.sql.rows``) and give it back as it was
sent. A page cursor is not secret (``memfs.server.http.cursor``): a forged position with a NUL, a
lone surrogate or an integer past 64 bits is the 400 of any bad cursor. Each test runs once per
backend (the ``storage`` fixture).
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import httpx

from memfs.server.http import cursor

from .helpers import MakeMemory, assert_error

DBX = "/api/2.0/agents/memory-stores"


async def test_memory_stores_fields_holding_nul_are_400s_naming_the_field(
    client: httpx.AsyncClient, store_id: str
) -> None:
    created = await client.post(
        f"/v1/memory_stores/{store_id}/memories", json={"path": "/a.md", "content": "a"}
    )
    assert created.status_code == 200, created.text
    memory = f"/v1/memory_stores/{store_id}/memories/{created.json()['id']}"
    nul = "a\x00b"
    cases: list[tuple[str, str, dict[str, Any], str]] = [
        ("POST", "/v1/memory_stores", {"name": nul}, "name"),
        ("POST", "/v1/memory_stores", {"name": "n", "description": nul}, "description"),
        ("POST", "/v1/memory_stores", {"name": "n", "metadata": {nul: "v"}}, "metadata key"),
        ("POST", "/v1/memory_stores", {"name": "n", "metadata": {"k": nul}}, "metadata['k']"),
        ("POST", f"/v1/memory_stores/{store_id}", {"name": nul}, "name"),
        ("POST", f"/v1/memory_stores/{store_id}", {"description": nul}, "description"),
        ("POST", f"/v1/memory_stores/{store_id}", {"metadata": {"k": nul}}, "metadata['k']"),
        ("POST", f"/v1/memory_stores/{store_id}", {"metadata": {nul: None}}, "metadata key"),
        (
            "POST",
            f"/v1/memory_stores/{store_id}/memories",
            {"path": "/b\x00.md", "content": ""},
            "path",
        ),
        ("PATCH", memory, {"path": "/c\x00.md"}, "path"),
        ("POST", f"/v1/memory_stores/{store_id}/memfs/search", {"query": nul}, "query"),
        (
            "POST",
            f"/v1/memory_stores/{store_id}/memfs/search",
            {"query": "a", "path_prefix": "/a\x00"},
            "path_prefix",
        ),
    ]
    for method, url, body, field in cases:
        r = await client.request(method, url, json=body)
        error = assert_error(r, 400, "invalid_request_error", "NUL")
        assert error["error"]["message"].startswith(field + ":"), (url, body, r.text)
    # nothing was stored: the store and the memory are as they were
    store = (await client.get(f"/v1/memory_stores/{store_id}")).json()
    assert (store["name"], store["description"], store["metadata"]) == ("Test Store", "", {})
    assert (await client.get(memory)).json()["content"] == "a"
    stores = (await client.get("/v1/memory_stores")).json()["data"]
    assert [s["id"] for s in stores] == [store_id]


async def test_a_memory_stores_content_holds_nul_on_both_backends(
    client: httpx.AsyncClient, store_id: str
) -> None:
    """A content with NUL in the middle and at the end (and the escape character the
    PostgreSQL backend uses, alone and next to a NUL) is stored, listed, versioned and found
    again exactly as sent, with the SHA-256 and size of what was sent."""
    memories = f"/v1/memory_stores/{store_id}/memories"
    first = "a\x00b ends in NUL\x00"
    tricky = "\uffff0 lantern\x00harbour \uffff\uffff \x00\uffff\x00 \uffff"
    created = await client.post(memories, json={"path": "/nul.md", "content": first})
    assert created.status_code == 200, created.text
    memory = f"{memories}/{created.json()['id']}"
    assert (await client.get(memory)).json()["content"] == first
    assert created.json()["content_sha256"] == hashlib.sha256(first.encode()).hexdigest()
    assert created.json()["content_size_bytes"] == len(first.encode())
    precondition = {"type": "content_sha256", "content_sha256": created.json()["content_sha256"]}
    r = await client.post(memory, json={"content": tricky, "precondition": precondition})
    assert r.status_code == 200, r.text
    assert (await client.get(memory)).json()["content"] == tricky
    listed = (await client.get(memories, params={"view": "full"})).json()["data"]
    assert [m["content"] for m in listed] == [tricky]
    versions = (
        await client.get(
            f"/v1/memory_stores/{store_id}/memory_versions",
            params={"memory_id": created.json()["id"], "view": "full"},
        )
    ).json()["data"]
    assert [v["content"] for v in versions] == [tricky, first]
    # the same content again is no new version (compared unescaped)
    r = await client.post(memory, json={"content": tricky})
    assert r.status_code == 200 and r.json()["memory_version_id"] == versions[0]["id"], r.text
    found = await client.post(
        f"/v1/memory_stores/{store_id}/memfs/search", json={"query": "harbour"}
    )
    assert found.status_code == 200, found.text  # a NUL separates words in the index
    assert [hit["memory"]["id"] for hit in found.json()["data"]] == [created.json()["id"]]


async def test_databricks_fields_holding_nul_are_400s_naming_the_field(
    client: httpx.AsyncClient,
) -> None:
    r = await client.post(DBX, params={"managed_memory_store_id": "nul-store"}, json={})
    assert r.status_code == 200, r.text
    entries = f"{DBX}/nul-store/entries"
    r = await client.post(entries, json={"actor_id": "u", "path": "/a.md", "content": "a"})
    assert r.status_code == 200, r.text
    entry = f"{entries}/{r.json()['name'].rsplit('/', 1)[-1]}"
    nul = "a\x00b"
    cases: list[tuple[str, str, dict[str, str], dict[str, Any], str]] = [
        ("POST", DBX, {"managed_memory_store_id": "nul-two"}, {"description": nul}, "description"),
        (
            "PATCH",
            f"{DBX}/nul-store",
            {"update_mask": "description"},
            {"description": nul},
            "description",
        ),
        ("POST", entries, {}, {"actor_id": "u", "path": "/b.md", "content": nul}, "content"),
        (
            "POST",
            entries,
            {},
            {"actor_id": "u", "path": "/b.md", "description": nul},
            "description",
        ),
        ("POST", entries, {}, {"actor_id": nul, "path": "/b.md"}, "actor_id"),
        ("POST", entries, {}, {"actor_id": "u", "session_id": nul, "path": "/b.md"}, "session_id"),
        ("POST", entries, {}, {"actor_id": "u", "path": "/b\x00.md"}, "path"),
        ("PATCH", entry, {"update_mask": "content"}, {"content": nul}, "content"),
        ("POST", f"{entries}:search", {}, {"actor_id": "u", "query": nul}, "query"),
        (
            "POST",
            f"{entries}:search",
            {},
            {"actor_id": "u", "query": "a", "path_prefix": "/\x00"},
            "path_prefix",
        ),
    ]
    for method, url, params, body, field in cases:
        r = await client.request(method, url, params=params, json=body)
        assert r.status_code == 400, (url, body, r.text)
        error = r.json()
        assert error["error_code"] == "INVALID_PARAMETER_VALUE", r.text
        assert "NUL" in error["message"] and error["message"].startswith(field + ":"), r.text
    r = await client.get(entry)
    assert r.json()["content"] == "a" and "description" not in r.json()


def forged(token: str, **position: Any) -> str:
    """``token`` with its position changed, as a client can forge it (the check is no secret;
    JSON escapes let a position hold what ``cursor.encode`` would not write)."""
    raw = base64.urlsafe_b64decode(token[len(cursor.PREFIX) :] + "==")
    data = json.loads(raw[8:])
    data["p"].update(position)
    payload = json.dumps(data).encode("ascii")
    check = hashlib.sha256(b"memfs-cursor\0" + payload).digest()[:8]
    return cursor.PREFIX + base64.urlsafe_b64encode(check + payload).decode("ascii")


async def test_forged_cursors_with_unstorable_values_are_400s(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory
) -> None:
    for path in ("/a.md", "/b.md"):
        await mem(path, "x")
        r = await client.post("/v1/memory_stores", json={"name": path})
        assert r.status_code == 200, r.text
    for i in (1, 2):
        r = await client.post(DBX, params={"managed_memory_store_id": f"cursor-{i}"}, json={})
        assert r.status_code == 200, r.text
        r = await client.post(
            f"{DBX}/cursor-1/entries", json={"actor_id": "u", "path": f"/{i}.md", "content": "x"}
        )
        assert r.status_code == 200, r.text
    entries = f"{DBX}/cursor-1/entries"
    listings: list[tuple[str, dict[str, str], str, str, list[dict[str, Any]]]] = [
        (
            f"/v1/memory_stores/{store_id}/memories",
            {},
            "page",
            "next_page",
            [{"key": "a\x00"}, {"key": "\ud800"}],
        ),
        ("/v1/memory_stores", {}, "page", "next_page", [{"id": "a\x00"}, {"id": "\ud800"}]),
        (
            f"/v1/memory_stores/{store_id}/memory_versions",
            {},
            "page",
            "next_page",
            [{"seq": 2**63}, {"seq": -(2**64)}],
        ),
        (DBX, {}, "page_token", "next_page_token", [{"id": "a\x00"}, {"id": "\ud800"}]),
        (
            entries,
            {"actor_id": "u"},
            "page_token",
            "next_page_token",
            [{"p": "/\x00"}, {"s": "\ud800"}, {"i": "\x00"}],
        ),
    ]
    for url, params, page, next_page, positions in listings:
        size = "page_size" if page == "page_token" else "limit"
        first = await client.get(url, params={**params, size: "1"})
        assert first.status_code == 200, first.text
        token = first.json()[next_page]
        r = await client.get(url, params={**params, size: "1", page: forged(token)})
        assert r.status_code == 200, (url, r.text)  # the forgery itself is sound
        for position in positions:
            r = await client.get(url, params={**params, size: "1", page: forged(token, **position)})
            assert r.status_code == 400, (url, position, r.text)
            assert "not a valid page" in r.text, r.text
