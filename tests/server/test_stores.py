"""Memory stores: create, retrieve, list (newest first, filters, pages), patch, archive, delete."""

from __future__ import annotations

from typing import Any

import httpx

from memfs.contract.errors import STORE_ARCHIVED_MESSAGE
from memfs.contract.models import parse_time

from .helpers import FakeClock, MakeMemory, assert_error

STORES = "/v1/memory_stores"


async def test_create_and_retrieve(client: httpx.AsyncClient) -> None:
    r = await client.post(
        STORES, json={"name": "Demo Memory", "description": "notes", "metadata": {"user": "u1"}}
    )
    assert r.status_code == 200, r.text
    store = r.json()
    assert store["id"].startswith("memstore_")
    assert set(store) == {
        "id",
        "type",
        "name",
        "description",
        "metadata",
        "created_at",
        "updated_at",
        "archived_at",
    }
    assert store["type"] == "memory_store"
    assert (store["name"], store["description"], store["metadata"]) == (
        "Demo Memory",
        "notes",
        {"user": "u1"},
    )
    assert store["archived_at"] is None
    assert store["created_at"] == store["updated_at"]
    assert store["created_at"].endswith("Z")
    assert (await client.get(f"{STORES}/{store['id']}")).json() == store


async def test_description_defaults_to_empty(client: httpx.AsyncClient) -> None:
    store = (await client.post(STORES, json={"name": "x"})).json()
    assert store["description"] == "" and store["metadata"] == {}


async def test_create_validation(client: httpx.AsyncClient) -> None:
    cases: list[tuple[Any, str]] = [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": "x" * 256}, "name"),
        ({"name": "a\nb"}, "control"),
        ({"name": 5}, "expected a string"),
        ({"name": None}, "name"),
        ({"name": "ok", "description": "d" * 1025}, "description"),
        ({"name": "ok", "description": 1}, "description"),
        ({"name": "ok", "metadata": []}, "metadata"),
        ({"name": "ok", "metadata": {"": "v"}}, "keys"),
        ({"name": "ok", "metadata": {"k" * 65: "v"}}, "keys"),
        ({"name": "ok", "metadata": {"k": "v" * 513}}, "512"),
        ({"name": "ok", "metadata": {"k": 1}}, "expected a string"),
        ({"name": "ok", "metadata": {f"k{i}": "v" for i in range(17)}}, "16"),
        ({"name": "ok", "color": "blue"}, "unknown field 'color'"),
    ]
    for body, message in cases:
        assert_error(await client.post(STORES, json=body), 400, "invalid_request_error", message)
    r = await client.post(STORES, content=b'{"name": "\\ud800"}')
    assert_error(r, 400, "invalid_request_error", "surrogate")
    # The limits themselves are fine.
    ok = {
        "name": "n" * 255,
        "description": "d" * 1024,
        "metadata": {f"k{i:02d}" + "k" * 61: "v" * 512 for i in range(16)},
    }
    assert (await client.post(STORES, json=ok)).status_code == 200


async def test_unknown_store_is_404(client: httpx.AsyncClient) -> None:
    for method in ("GET", "POST", "DELETE"):
        r = await client.request(
            method, f"{STORES}/memstore_nope", json={} if method == "POST" else None
        )
        assert_error(r, 404, "not_found_error", "memstore_nope")
    assert_error(await client.post(f"{STORES}/memstore_nope/archive"), 404, "not_found_error")


async def test_list_newest_first_with_pages(client: httpx.AsyncClient) -> None:
    ids = [(await client.post(STORES, json={"name": f"s{i}"})).json()["id"] for i in range(5)]
    page = (await client.get(STORES, params={"limit": 2})).json()
    seen = [s["id"] for s in page["data"]]
    assert page["next_page"].startswith("page_")
    while page["next_page"]:
        page = (await client.get(STORES, params={"limit": 2, "page": page["next_page"]})).json()
        seen += [s["id"] for s in page["data"]]
    assert seen == ids[::-1]
    default = (await client.get(STORES)).json()
    assert [s["id"] for s in default["data"]] == ids[::-1] and default["next_page"] is None


async def test_list_filters(client: httpx.AsyncClient, clock: FakeClock) -> None:
    old = (await client.post(STORES, json={"name": "old"})).json()
    clock.advance(days=1)
    new = (await client.post(STORES, json={"name": "new"})).json()
    archived = (await client.post(STORES, json={"name": "gone"})).json()
    await client.post(f"{STORES}/{archived['id']}/archive")

    def names(r: httpx.Response) -> list[str]:
        assert r.status_code == 200, r.text
        return [s["name"] for s in r.json()["data"]]

    assert names(await client.get(STORES)) == ["new", "old"]
    assert names(await client.get(STORES, params={"include_archived": "true"})) == [
        "gone",
        "new",
        "old",
    ]
    assert names(await client.get(STORES, params={"include_archived": "false"})) == ["new", "old"]
    assert names(await client.get(STORES, params={"created_at[gte]": new["created_at"]})) == ["new"]
    assert names(await client.get(STORES, params={"created_at[lte]": old["created_at"]})) == ["old"]
    offset_form = parse_time(new["created_at"]).isoformat()  # +00:00 instead of Z
    assert names(await client.get(STORES, params={"created_at[gte]": offset_form})) == ["new"]


async def test_list_bad_parameters(client: httpx.AsyncClient) -> None:
    for params, message in (
        ({"limit": "0"}, "limit"),
        ({"limit": "101"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"include_archived": "maybe"}, "include_archived"),
        ({"created_at[gte]": "yesterday"}, "created_at[gte]"),
        ({"page": "garbage"}, "page"),
    ):
        r = await client.get(STORES, params=params)
        assert_error(r, 400, "invalid_request_error", message)
    assert (await client.get(STORES, params={"limit": "100"})).status_code == 200


async def test_cursor_cannot_be_reused_with_other_filters(client: httpx.AsyncClient) -> None:
    for i in range(3):
        await client.post(STORES, json={"name": f"s{i}"})
    cursor = (await client.get(STORES, params={"limit": 1})).json()["next_page"]
    r = await client.get(STORES, params={"limit": 1, "page": cursor, "include_archived": "true"})
    assert_error(r, 400, "invalid_request_error", "different")


async def test_update_is_a_patch(client: httpx.AsyncClient, clock: FakeClock) -> None:
    store = (
        await client.post(
            STORES, json={"name": "a", "description": "d", "metadata": {"x": "1", "y": "2"}}
        )
    ).json()
    url = f"{STORES}/{store['id']}"
    r = await client.post(url, json={"metadata": {"x": None, "z": "3"}})
    assert r.status_code == 200, r.text
    updated = r.json()
    assert updated["metadata"] == {"y": "2", "z": "3"}
    assert (updated["name"], updated["description"]) == ("a", "d")
    assert updated["updated_at"] > store["updated_at"]
    assert updated["created_at"] == store["created_at"]
    r = await client.post(url, json={"name": "b", "description": ""})
    assert (r.json()["name"], r.json()["description"]) == ("b", "")
    # Deleting a missing key is fine; nulls elsewhere mean "leave unchanged".
    r = await client.post(url, json={"metadata": {"nope": None}, "name": None})
    assert r.status_code == 200 and r.json()["name"] == "b"


async def test_update_validation(client: httpx.AsyncClient, store_id: str) -> None:
    url = f"{STORES}/{store_id}"
    await client.post(url, json={"metadata": {f"k{i}": "v" for i in range(16)}})
    r = await client.post(url, json={"metadata": {"k99": "v"}})
    assert_error(r, 400, "invalid_request_error", "16")
    r = await client.post(url, json={"metadata": {"k99": "v", "k0": None}})
    assert r.status_code == 200 and len(r.json()["metadata"]) == 16
    for body, message in (
        ({"name": ""}, "name"),
        ({"archived": True}, "unknown field"),
        ({"metadata": "x"}, "metadata"),
    ):
        assert_error(await client.post(url, json=body), 400, "invalid_request_error", message)


async def test_archive_is_irreversible_and_read_only(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory
) -> None:
    memory = await mem("/keep.md", "v1")
    await client.post(f"{STORES}/{store_id}/memories/{memory['id']}", json={"content": "v2"})
    url = f"{STORES}/{store_id}"
    archived = (await client.post(f"{url}/archive")).json()
    assert archived["archived_at"] is not None
    assert archived["updated_at"] == archived["archived_at"]
    again = await client.post(f"{url}/archive")
    assert again.status_code == 200 and again.json() == archived  # returned unchanged

    # Mutations of the store and of memories are refused ...
    for r in (
        await client.post(url, json={"name": "new"}),
        await client.post(f"{url}/memories", json={"path": "/new.md", "content": ""}),
        await client.post(f"{url}/memories/{memory['id']}", json={"content": "v3"}),
        await client.patch(f"{url}/memories/{memory['id']}", json={"path": "/moved.md"}),
    ):
        assert_error(r, 400, "invalid_request_error")
        assert r.json()["error"]["message"].startswith(STORE_ARCHIVED_MESSAGE)
    # ... reads, redaction, memory deletion and store deletion still work.
    assert (await client.get(f"{url}/memories/{memory['id']}")).json()["content"] == "v2"
    versions = (await client.get(f"{url}/memory_versions")).json()["data"]
    first = versions[-1]
    assert first["operation"] == "created"
    r = await client.post(f"{url}/memory_versions/{first['id']}/redact")
    assert r.status_code == 200 and r.json()["redacted_at"] is not None
    r = await client.delete(f"{url}/memories/{memory['id']}")
    assert r.json() == {"id": memory["id"], "type": "memory_deleted"}
    r = await client.delete(url)
    assert r.json() == {"id": store_id, "type": "memory_store_deleted"}


async def test_delete_store_removes_everything(
    client: httpx.AsyncClient, store_id: str, mem: MakeMemory
) -> None:
    memory = await mem("/a.md", "x")
    url = f"{STORES}/{store_id}"
    assert (await client.delete(url)).status_code == 200
    assert_error(await client.get(url), 404, "not_found_error")
    assert_error(await client.get(f"{url}/memories/{memory['id']}"), 404, "not_found_error")
    r = await client.get(f"{url}/memory_versions/{memory['memory_version_id']}")
    assert_error(r, 404, "not_found_error")
    assert_error(await client.delete(url), 404, "not_found_error")
