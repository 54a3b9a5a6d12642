"""Memories: create, retrieve, update (content, rename, preconditions), delete, limits, paths."""

from __future__ import annotations

from typing import Any

import httpx

from memfs.contract.errors import STORE_FULL_MESSAGE
from memfs.contract.models import sha256_hex

from .helpers import MakeMemory, assert_error

MEMORY_FIELDS = {
    "id",
    "type",
    "memory_store_id",
    "path",
    "content",
    "content_sha256",
    "content_size_bytes",
    "memory_version_id",
    "created_at",
    "updated_at",
}


def url(store_id: str, memory_id: str = "") -> str:
    base = f"/v1/memory_stores/{store_id}/memories"
    return f"{base}/{memory_id}" if memory_id else base


async def versions_of(client: httpx.AsyncClient, store_id: str, memory_id: str) -> list[Any]:
    r = await client.get(
        f"/v1/memory_stores/{store_id}/memory_versions", params={"memory_id": memory_id}
    )
    assert r.status_code == 200, r.text
    data: list[Any] = r.json()["data"]
    return data


async def test_create_basic_by_default_retrieve_full(
    client: httpx.AsyncClient, store_id: str
) -> None:
    r = await client.post(url(store_id), json={"path": "/notes/ä.md", "content": "héllo"})
    assert r.status_code == 200, r.text
    memory = r.json()
    assert set(memory) == MEMORY_FIELDS
    assert memory["id"].startswith("mem_") and memory["type"] == "memory"
    assert memory["memory_store_id"] == store_id
    assert memory["content"] is None  # view=basic on create
    assert memory["content_sha256"] == sha256_hex("héllo")
    assert memory["content_size_bytes"] == len("héllo".encode())
    assert memory["memory_version_id"].startswith("memver_")
    got = (await client.get(url(store_id, memory["id"]))).json()
    assert got == {**memory, "content": "héllo"}
    basic = (await client.get(url(store_id, memory["id"]), params={"view": "basic"})).json()
    assert basic["content"] is None
    full = await client.post(
        url(store_id), params={"view": "full"}, json={"path": "/b.md", "content": "b"}
    )
    assert full.json()["content"] == "b"


async def test_empty_content_is_allowed_but_required(
    client: httpx.AsyncClient, store_id: str
) -> None:
    r = await client.post(url(store_id), json={"path": "/empty", "content": ""})
    assert r.status_code == 200 and r.json()["content_size_bytes"] == 0
    assert r.json()["content_sha256"] == sha256_hex("")
    for body in ({"path": "/x"}, {"path": "/x", "content": None}):
        assert_error(
            await client.post(url(store_id), json=body), 400, "invalid_request_error", "content"
        )
    assert_error(
        await client.post(url(store_id), json={"content": "x"}),
        400,
        "invalid_request_error",
        "path",
    )


async def test_content_size_limit(client: httpx.AsyncClient, store_id: str) -> None:
    exact = "é" * (102_400 // 2)
    r = await client.post(url(store_id), json={"path": "/max", "content": exact})
    assert r.status_code == 200 and r.json()["content_size_bytes"] == 102_400
    r = await client.post(url(store_id), json={"path": "/over", "content": exact + "x"})
    assert_error(r, 413, "request_too_large", "102400")
    memory_id = (await client.get(url(store_id))).json()["data"][0]["id"]
    r = await client.patch(url(store_id, memory_id), json={"content": "x" * 102_401})
    assert_error(r, 413, "request_too_large")


async def test_bad_paths_are_400(client: httpx.AsyncClient, store_id: str) -> None:
    bad = [
        ("relative", "start with '/'"),
        ("", "start with '/'"),
        ("/", "empty"),
        ("/a//b", "empty"),
        ("/a/", "empty"),
        ("/a/./b", "'.'"),
        ("/a/../b", "'..'"),
        ("/a\x00b", "NUL"),
        ("/a\nb", "control"),
        ("/a\x7fb", "control"),
        ("/a\u200bb", "format"),
        ("/a\u2028b", "U+2028"),
        ("/cafe\u0301", "Normalization"),
        ("/" + "x" * 1024, "1024 bytes"),
        ("/" + "/".join(["s"] * 21), "20 segments"),
    ]
    for path, message in bad:
        r = await client.post(url(store_id), json={"path": path, "content": ""})
        assert_error(r, 400, "invalid_request_error", message)
    for value in (5, None, ["/a"], {"p": 1}):
        r = await client.post(url(store_id), json={"path": value, "content": ""})
        assert_error(r, 400, "invalid_request_error", "path")
    r = await client.post(url(store_id), json={"path": "/a", "content": 7})
    assert_error(r, 400, "invalid_request_error", "content: expected a string")
    r = await client.post(url(store_id), json={"path": "/a", "content": "", "extra": 1})
    assert_error(r, 400, "invalid_request_error", "unknown field 'extra'")
    # The limits themselves are accepted.
    ok_paths = ["/" + "x" * 1023, "/" + "/".join(["s"] * 20), "/Case", "/case", "/café", "/a b"]
    for path in ok_paths:
        r = await client.post(url(store_id), json={"path": path, "content": ""})
        assert r.status_code == 200, (path, r.text)


async def test_never_overwrites(client: httpx.AsyncClient, store_id: str, mem: MakeMemory) -> None:
    first = await mem("/a.md", "one")
    r = await client.post(url(store_id), json={"path": "/a.md", "content": "two"})
    body = assert_error(r, 409, "memory_path_conflict_error", "/a.md")
    assert body["error"]["conflicting_memory_id"] == first["id"]
    assert body["error"]["conflicting_path"] == "/a.md"
    assert (await client.get(url(store_id, first["id"]))).json()["content"] == "one"


async def test_update_content_and_rename_keep_the_id(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory
) -> None:
    memory = await mem("/a.md", "one")
    r = await client.patch(url(store_id, memory["id"]), json={"content": "two"})
    assert r.status_code == 200, r.text
    updated = r.json()
    assert updated["content"] is None  # basic by default on update
    assert updated["content_sha256"] == sha256_hex("two")
    assert updated["memory_version_id"] != memory["memory_version_id"]
    assert updated["updated_at"] > memory["updated_at"]
    assert updated["created_at"] == memory["created_at"]
    # The SDK sends POST for updates; both work.
    r = await client.post(
        url(store_id, memory["id"]), params={"view": "full"}, json={"path": "/dir/b.md"}
    )
    moved = r.json()
    assert (moved["id"], moved["path"], moved["content"]) == (memory["id"], "/dir/b.md", "two")
    assert_error(
        await client.post(url(store_id), json={"path": "/dir/b.md", "content": ""}),
        409,
        "memory_path_conflict_error",
    )
    # The old path is free again.
    assert (
        await client.post(url(store_id), json={"path": "/a.md", "content": ""})
    ).status_code == 200
    ops = [v["operation"] for v in await versions_of(client, store_id, memory["id"])]
    assert ops == ["modified", "modified", "created"]


async def test_rename_onto_an_occupied_path_is_409(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory
) -> None:
    a = await mem("/a", "a")
    b = await mem("/b", "b")
    r = await client.patch(url(store_id, a["id"]), json={"path": "/b", "content": "new"})
    body = assert_error(r, 409, "memory_path_conflict_error")
    assert body["error"]["conflicting_memory_id"] == b["id"]
    assert body["error"]["conflicting_path"] == "/b"
    assert (await client.get(url(store_id, a["id"]))).json()["content"] == "a"


async def test_noop_update_appends_no_version(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory
) -> None:
    memory = await mem("/a", "same")
    for body in ({"content": "same"}, {"path": "/a"}, {}, {"content": None, "path": None}):
        r = await client.patch(url(store_id, memory["id"]), json=body)
        assert r.status_code == 200, r.text
        assert r.json()["memory_version_id"] == memory["memory_version_id"]
        assert r.json()["updated_at"] == memory["updated_at"]
    assert len(await versions_of(client, store_id, memory["id"])) == 1


async def test_preconditions(client: httpx.AsyncClient, store_id: str, mem: MakeMemory) -> None:
    memory = await mem("/p", "v1")
    target = url(store_id, memory["id"])

    def pre(content: str) -> dict[str, str]:
        return {"type": "content_sha256", "content_sha256": sha256_hex(content)}

    r = await client.patch(target, json={"content": "v2", "precondition": pre("v1")})
    assert r.status_code == 200 and r.json()["content_sha256"] == sha256_hex("v2")
    # Stale precondition: 409 and nothing changes.
    r = await client.patch(target, json={"content": "v3", "precondition": pre("v1")})
    assert_error(r, 409, "memory_precondition_failed_error", "precondition")
    assert (await client.get(target)).json()["content"] == "v2"
    # Stale precondition, but the stored state already equals the request: 200, no version.
    r = await client.patch(target, json={"content": "v2", "precondition": pre("v1")})
    assert r.status_code == 200 and r.json()["content_sha256"] == sha256_hex("v2")
    # Rename with a stale precondition is refused; with a fresh one it applies.
    r = await client.patch(target, json={"path": "/q", "precondition": pre("v1")})
    assert_error(r, 409, "memory_precondition_failed_error")
    r = await client.patch(target, json={"path": "/q", "precondition": pre("v2")})
    assert r.status_code == 200 and r.json()["path"] == "/q"
    assert len(await versions_of(client, store_id, memory["id"])) == 3


async def test_bad_preconditions_are_400(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory
) -> None:
    memory = await mem("/p", "v1")
    target = url(store_id, memory["id"])
    for precondition, message in (
        ("abc", "precondition"),
        ({"type": "etag", "content_sha256": "0" * 64}, "content_sha256"),
        ({"type": "content_sha256"}, "required"),
        ({"type": "content_sha256", "content_sha256": "XYZ"}, "64 lowercase"),
        ({"type": "content_sha256", "content_sha256": "A" * 64}, "64 lowercase"),
        ({"type": "content_sha256", "content_sha256": "0" * 64, "x": 1}, "unknown field"),
    ):
        r = await client.patch(target, json={"content": "v2", "precondition": precondition})
        assert_error(r, 400, "invalid_request_error", message)


async def test_delete(client: httpx.AsyncClient, store_id: str, mem: MakeMemory) -> None:
    memory = await mem("/d", "bye")
    target = url(store_id, memory["id"])
    r = await client.delete(target, params={"expected_content_sha256": sha256_hex("other")})
    assert_error(r, 409, "memory_precondition_failed_error")
    r = await client.delete(target, params={"expected_content_sha256": "nothex"})
    assert_error(r, 400, "invalid_request_error", "expected_content_sha256")
    assert (await client.get(target)).status_code == 200
    r = await client.delete(target, params={"expected_content_sha256": sha256_hex("bye")})
    assert r.status_code == 200 and r.json() == {"id": memory["id"], "type": "memory_deleted"}
    assert_error(await client.get(target), 404, "not_found_error", memory["id"])
    assert_error(await client.delete(target), 404, "not_found_error")
    assert_error(await client.patch(target, json={"content": "x"}), 404, "not_found_error")
    versions = await versions_of(client, store_id, memory["id"])
    assert [v["operation"] for v in versions] == ["deleted", "created"]
    deleted = versions[0]
    assert deleted["path"] == "/d"
    assert (deleted["content"], deleted["content_sha256"], deleted["content_size_bytes"]) == (
        None,
        None,
        None,
    )
    # The path can be reused; the new memory has a new id.
    again = await mem("/d", "back")
    assert again["id"] != memory["id"]


async def test_unknown_ids_are_404(client: httpx.AsyncClient, store_id: str) -> None:
    assert_error(await client.get(url(store_id, "mem_nope")), 404, "not_found_error", "mem_nope")
    assert_error(
        await client.get(url("memstore_nope", "mem_x")), 404, "not_found_error", "memstore_nope"
    )
    assert_error(await client.get(url("memstore_nope")), 404, "not_found_error")
    r = await client.post(url("memstore_nope"), json={"path": "/a", "content": ""})
    assert_error(r, 404, "not_found_error")


async def test_memories_of_another_store_are_not_reachable(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory
) -> None:
    memory = await mem("/mine", "x")
    other = (await client.post("/v1/memory_stores", json={"name": "other"})).json()["id"]
    assert_error(await client.get(url(other, memory["id"])), 404, "not_found_error")
    assert_error(await client.delete(url(other, memory["id"])), 404, "not_found_error")
    r = await client.get(f"/v1/memory_stores/{other}/memory_versions/{memory['memory_version_id']}")
    assert_error(r, 404, "not_found_error")


async def test_store_full(client: httpx.AsyncClient, store_id: str, mem: MakeMemory) -> None:
    # The in-process storage fixture holds at most 10 memories per store.
    made = [await mem(f"/m{i}", str(i)) for i in range(10)]
    r = await client.post(url(store_id), json={"path": "/m10", "content": ""})
    assert_error(r, 400, "invalid_request_error")
    assert r.json()["error"]["message"].startswith(STORE_FULL_MESSAGE)
    # Reads and edits keep working; a delete makes room.
    assert (await client.get(url(store_id, made[0]["id"]))).status_code == 200
    r = await client.patch(url(store_id, made[0]["id"]), json={"content": "edited", "path": "/m0b"})
    assert r.status_code == 200
    assert (await client.delete(url(store_id, made[1]["id"]))).status_code == 200
    assert (
        await client.post(url(store_id), json={"path": "/m10", "content": ""})
    ).status_code == 200
    r = await client.post(url(store_id), json={"path": "/m11", "content": ""})
    assert_error(r, 400, "invalid_request_error", STORE_FULL_MESSAGE)
