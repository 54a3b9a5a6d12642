"""Listing memories: byte order, path_prefix on whole segments, depth=1 roll-up, pages, views."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx

from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.memory_stores.storage import MemoryPosition

from .helpers import MakeMemory, assert_error


def url(store_id: str) -> str:
    return f"/v1/memory_stores/{store_id}/memories"


def label(item: dict[str, Any]) -> str:
    return item["path"] if item["type"] == "memory" else "dir:" + item["path"]


async def list_all(client: httpx.AsyncClient, store_id: str, **params: Any) -> list[str]:
    """Every item of a listing, following next_page."""
    seen: list[str] = []
    page: str | None = None
    for _ in range(1000):
        query = dict(params, **({"page": page} if page else {}))
        r = await client.get(url(store_id), params=query)
        assert r.status_code == 200, r.text
        body = r.json()
        seen += [label(item) for item in body["data"]]
        page = body["next_page"]
        if page is None:
            return seen
    raise AssertionError("listing did not end")


PATHS = ["/z", "/é", "/a/c/d", "/a", "/B", "/a/b", "/a-x", "/a/c/e", "/notes-archive/t", "/notes/t"]


async def test_whole_store_in_byte_order(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory
) -> None:
    for path in PATHS:
        await mem(path)
    expected = sorted(PATHS, key=lambda p: p.encode("utf-8"))
    assert await list_all(client, store_id) == expected
    assert await list_all(client, store_id, limit=3) == expected
    assert await list_all(client, store_id, path_prefix="/", depth=0) == expected


async def test_prefix_matches_whole_segments(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory
) -> None:
    for path in PATHS:
        await mem(path)
    assert await list_all(client, store_id, path_prefix="/notes/") == ["/notes/t"]
    assert await list_all(client, store_id, path_prefix="/a/") == ["/a/b", "/a/c/d", "/a/c/e"]
    assert await list_all(client, store_id, path_prefix="/a/c/") == ["/a/c/d", "/a/c/e"]
    assert await list_all(client, store_id, path_prefix="/nothing/") == []


async def test_depth_one_rolls_up_directories(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory
) -> None:
    for path in PATHS:
        await mem(path)
    expected = ["/B", "/a", "/a-x", "dir:/a/", "/z", "dir:/notes-archive/", "dir:/notes/", "/é"]
    expected = sorted(expected, key=lambda p: p.removeprefix("dir:").encode("utf-8"))
    assert await list_all(client, store_id, depth=1) == expected
    # Prefix items count toward the limit and pages continue after them.
    for limit in (1, 2, 3):
        assert await list_all(client, store_id, depth=1, limit=limit) == expected
    assert await list_all(client, store_id, depth=1, path_prefix="/a/") == ["/a/b", "dir:/a/c/"]
    r = await client.get(url(store_id), params={"depth": 1, "limit": 4})
    assert len(r.json()["data"]) == 4 and r.json()["next_page"]


async def test_memory_prefix_item_shape(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory
) -> None:
    await mem("/dir/x")
    r = await client.get(url(store_id), params={"depth": "1"})
    assert r.json() == {"data": [{"type": "memory_prefix", "path": "/dir/"}], "next_page": None}


async def test_view_full_caps_pages_at_20(
    client: httpx.AsyncClient, store_id: str, storage: SqliteStorage
) -> None:
    storage.max_memories = 30
    for i in range(25):
        r = await client.post(url(store_id), json={"path": f"/f{i:02d}", "content": f"c{i}"})
        assert r.status_code == 200
    r = await client.get(url(store_id), params={"view": "full", "limit": 100})
    body = r.json()
    assert len(body["data"]) == 20 and body["next_page"]
    assert body["data"][0]["content"] == "c0"
    r = await client.get(url(store_id), params={"view": "full", "page": body["next_page"]})
    assert len(r.json()["data"]) == 5 and r.json()["next_page"] is None
    basic = (await client.get(url(store_id), params={"limit": 100})).json()
    assert len(basic["data"]) == 25 and all(m["content"] is None for m in basic["data"])
    assert all(m["content_size_bytes"] in (2, 3) for m in basic["data"])
    default = (await client.get(url(store_id))).json()
    assert len(default["data"]) == 20


async def test_bad_listing_parameters(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory
) -> None:
    await mem("/a/b")
    await mem("/a/c")
    cases = [
        ({"path_prefix": "/a"}, "end with '/'"),
        ({"path_prefix": "a/"}, "path_prefix"),
        ({"path_prefix": "//"}, "path_prefix"),
        ({"path_prefix": "/a/../"}, "path_prefix"),
        ({"depth": "2"}, "depth"),
        ({"depth": "-1"}, "depth"),
        ({"depth": "one"}, "depth"),
        ({"limit": "0"}, "limit"),
        ({"limit": "101"}, "limit"),
        ({"limit": "1.5"}, "limit"),
        ({"view": "everything"}, "view"),
        ({"page": "page_"}, "page"),
        ({"page": "page_!!!"}, "page"),
        ({"page": "nope"}, "page"),
    ]
    for params, message in cases:
        assert_error(
            await client.get(url(store_id), params=params), 400, "invalid_request_error", message
        )


async def test_tampered_and_foreign_cursors_are_400(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory
) -> None:
    for i in range(3):
        await mem(f"/a/{i}")
    cursor = (await client.get(url(store_id), params={"limit": 1})).json()["next_page"]
    raw = bytearray(base64.urlsafe_b64decode(cursor[5:] + "=" * (-len(cursor[5:]) % 4)))
    raw[-3] ^= 0x01
    tampered = "page_" + base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()
    r = await client.get(url(store_id), params={"page": tampered})
    assert_error(r, 400, "invalid_request_error", "page")
    # A cursor whose position was changed but whose JSON is still valid and for this listing:
    # only the check can reject it.
    check, payload = bytes(raw[:8]), bytearray(raw[8:])
    payload[-3] ^= 0x01  # undo the flip above: the JSON is intact again
    position = json.loads(payload)
    assert position["p"]["key"] == "/a/0", position
    position["p"]["key"] = "/a/1"
    moved = json.dumps(position, separators=(",", ":")).encode()
    tampered = "page_" + base64.urlsafe_b64encode(check + moved).rstrip(b"=").decode()
    r = await client.get(url(store_id), params={"page": tampered})
    assert_error(r, 400, "invalid_request_error", "page")
    # A cursor for one prefix or depth cannot continue another listing.
    for params in ({"path_prefix": "/a/"}, {"depth": "1"}):
        r = await client.get(url(store_id), params={"page": cursor, **params})
        assert_error(r, 400, "invalid_request_error", "different")
    # Nor a cursor of another store or of another kind of list.
    other = (await client.post("/v1/memory_stores", json={"name": "o"})).json()["id"]
    assert_error(
        await client.get(url(other), params={"page": cursor}), 400, "invalid_request_error"
    )
    r = await client.get(f"/v1/memory_stores/{store_id}/memory_versions", params={"page": cursor})
    assert_error(r, 400, "invalid_request_error")


async def test_depth_one_skips_subdirectories_by_index_seeks(
    storage: SqliteStorage, clock: Any
) -> None:
    storage.max_memories = 1000
    store = await storage.create_store(name="big", description="", metadata={})
    from memfs.contract.models import Actor

    actor = Actor("api_actor", "apikey_x")
    for i in range(300):
        await storage.create_memory(store.id, path=f"/big/{i:03d}", content="", actor=actor)
    for name in ("/a", "/c", "/d/x", "/e"):
        await storage.create_memory(store.id, path=name, content="", actor=actor)
    statements: list[str] = []
    # Statement tracing is a SQLite feature; on PostgreSQL the listing itself is checked.
    readers = storage._readers if isinstance(storage, SqliteStorage) else []
    for conn in readers:
        conn.set_trace_callback(statements.append)
    result = await storage.list_memories(
        store.id, prefix="/", depth=1, after=None, limit=100, with_content=False
    )
    for conn in readers:
        conn.set_trace_callback(None)
    paths = [item.path for item in result.items]
    assert paths == ["/a", "/big/", "/c", "/d/", "/e"]
    seeks = [s for s in statements if "FROM memories" in s]
    # One seek per rolled-up directory plus the first and the final one, each LIMITed: the 300
    # memories under /big/ are never read.
    assert len(seeks) <= 4, seeks
    # Continuing after a directory starts past its whole range.
    after_big = await storage.list_memories(
        store.id,
        prefix="/",
        depth=1,
        after=MemoryPosition("/big0", True),
        limit=1,
        with_content=False,
    )
    assert [item.path for item in after_big.items] == ["/c"]
