"""The wire details the official clients hide or depend on, checked on the raw HTTP answers.

Times are RFC 3339 UTC with ``Z`` and 6 fractional digits (agentkit parses only 0/3/6), unset
fields are omitted (never ``""``: a session-less entry has no ``session_id`` key), unknown body
fields and ``read_mask`` are ignored, a delete answers ``{}``, listings carry
``next_page_token`` only when another page exists and search never does, and every error under
``/api/2.0`` is ``{"error_code", "message"}`` — 401 ``UNAUTHENTICATED`` included — while the
Memory Stores API keeps its own envelope.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import trio
from databricks.sdk import WorkspaceClient
from databricks.sdk.errors import ResourceExhausted
from databricks.sdk.service.agentkit import ManagedMemoryEntry, ManagedMemoryStore

from kit.servers import ServerProcess, served_in_process
from memfs.server.backends.postgres import PostgresStorage
from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.backends.storage import Storage

BASE = "/api/2.0/agents/memory-stores"
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


@pytest.fixture
def http(dbx_server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=dbx_server.base_url,
        headers={"Authorization": f"Bearer {dbx_server.api_key}"},
        timeout=30,
    ) as client:
        yield client


def error_of(r: httpx.Response, status: int, code: str) -> str:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error_code", "message"}, body
    assert body["error_code"] == code
    assert isinstance(body["message"], str) and body["message"] and "\n" not in body["message"]
    return str(body["message"])


def test_store_and_entry_fields(http: httpx.Client, store: str) -> None:
    r = http.get(f"/api/2.0/agents/{store}")
    body = r.json()
    assert set(body) == {
        "name",
        "display_name",
        "creator_user_id",
        "owner_user_id",
        "create_time",
        "update_time",
    }  # no description: unset
    assert TIME.match(body["create_time"]) and TIME.match(body["update_time"])
    entry = http.post(
        f"/api/2.0/agents/{store}/entries",
        json={"actor_id": "a", "path": "/x", "session_id": "", "bogus": 1, "read_mask": "path"},
    ).json()
    assert set(entry) == {"name", "actor_id", "path", "source_type", "create_time", "update_time"}
    assert TIME.match(entry["create_time"])
    assert entry["source_type"] == "MANAGED_MEMORY_ENTRY_SOURCE_TYPE_AGENT"
    r = http.get(f"/api/2.0/agents/{entry['name']}", params={"read_mask": "path"})
    assert r.json() == entry
    r = http.patch(
        f"/api/2.0/agents/{entry['name']}",
        params={"update_mask": "content"},
        json={"content": "", "unknown": {"nested": True}},
    )
    assert "content" not in r.json()  # "" is unset: cleared
    assert http.delete(f"/api/2.0/agents/{entry['name']}").json() == {}


def test_unset_source_type_is_agent(http: httpx.Client, store: str) -> None:
    for source in (None, "MANAGED_MEMORY_ENTRY_SOURCE_TYPE_UNSPECIFIED"):
        r = http.post(
            f"/api/2.0/agents/{store}/entries",
            json={"actor_id": "a", "path": f"/{source}", "source_type": source},
        )
        assert r.json()["source_type"] == "MANAGED_MEMORY_ENTRY_SOURCE_TYPE_AGENT"
    r = http.post(
        f"/api/2.0/agents/{store}/entries",
        json={"actor_id": "a", "path": "/y", "source_type": "HUMAN"},
    )
    error_of(r, 400, "INVALID_PARAMETER_VALUE")


def test_listing_tokens(http: httpx.Client, store: str) -> None:
    for i in range(3):
        http.post(f"/api/2.0/agents/{store}/entries", json={"actor_id": "a", "path": f"/{i}"})
    url = f"/api/2.0/agents/{store}/entries"
    first = http.get(url, params={"actor_id": "a", "page_size": 2}).json()
    assert len(first["managed_memory_entries"]) == 2
    rest = http.get(
        url, params={"actor_id": "a", "page_size": 2, "page_token": first["next_page_token"]}
    ).json()
    assert [e["path"] for e in rest["managed_memory_entries"]] == ["/2"]
    assert "next_page_token" not in rest
    # page_size 0 is proto3's unset: the default (10).
    assert (
        len(
            http.get(url, params={"actor_id": "a", "page_size": 0}).json()["managed_memory_entries"]
        )
        == 3
    )
    error_of(
        http.get(url, params={"actor_id": "a", "page_token": "junk"}),
        400,
        "INVALID_PARAMETER_VALUE",
    )
    error_of(
        http.get(url, params={"actor_id": "a", "page_size": -1}), 400, "INVALID_PARAMETER_VALUE"
    )
    assert http.get(url, params={"actor_id": "nobody"}).json() == {"managed_memory_entries": []}


def test_search_shape_and_limits(http: httpx.Client, store: str) -> None:
    url = f"/api/2.0/agents/{store}/entries"
    http.post(url, json={"actor_id": "a", "path": "/cats.md", "content": "cats purr softly"})
    http.post(url, json={"actor_id": "a", "path": "/dogs.md", "content": "dogs bark"})
    r = http.post(url + ":search", json={"actor_id": "a", "query": "cats", "page_token": "x"})
    body = r.json()
    assert set(body) == {"results", "managed_memory_entries"}  # never a next_page_token
    assert [x["managed_memory_entry"]["path"] for x in body["results"]] == ["/cats.md"]
    assert isinstance(body["results"][0]["score"], float) and body["results"][0]["score"] > 0
    assert body["managed_memory_entries"] == [x["managed_memory_entry"] for x in body["results"]]
    basic = http.post(
        url + ":search",
        json={"actor_id": "a", "query": "cats", "view": "MANAGED_MEMORY_ENTRY_VIEW_BASIC"},
    ).json()
    assert "content" not in basic["results"][0]["managed_memory_entry"]
    assert "score" in basic["results"][0]
    same = http.post(
        url + ":search", json={"actor_id": "a", "query": "cats", "limit": 3, "page_size": 3}
    )
    assert same.status_code == 200
    message = error_of(
        http.post(
            url + ":search", json={"actor_id": "a", "query": "c", "limit": 3, "page_size": 4}
        ),
        400,
        "INVALID_PARAMETER_VALUE",
    )
    assert "limit" in message
    for bad in (
        {"actor_id": "a"},
        {"actor_id": "a", "query": "  "},
        {"query": "cats"},
        {"actor_id": "a", "query": "c", "page_size": 101},
        {"actor_id": "a", "query": "c", "path_prefix": "cats"},
    ):
        error_of(http.post(url + ":search", json=bad), 400, "INVALID_PARAMETER_VALUE")


def test_update_mask_is_required(http: httpx.Client, store: str) -> None:
    entry = http.post(
        f"/api/2.0/agents/{store}/entries", json={"actor_id": "a", "path": "/m"}
    ).json()
    for target in (store, entry["name"]):
        r = http.patch(f"/api/2.0/agents/{target}", json={"description": "x"})
        assert "update_mask" in error_of(r, 400, "INVALID_PARAMETER_VALUE")


def test_errors_use_the_databricks_envelope(dbx_server: ServerProcess, http: httpx.Client) -> None:
    with httpx.Client(base_url=dbx_server.base_url, timeout=30) as anonymous:
        error_of(anonymous.get(BASE), 401, "UNAUTHENTICATED")
        error_of(
            anonymous.get(BASE, headers={"Authorization": "Bearer wrong-token"}),
            401,
            "UNAUTHENTICATED",
        )
        # The SDK's start-up probe: 404 without a key (a 429/503 would stall its start-up).
        error_of(anonymous.get("/.well-known/databricks-config"), 404, "NOT_FOUND")
        # The Memory Stores API keeps its own envelope.
        assert anonymous.get("/v1/memory_stores").json()["type"] == "error"
    error_of(http.get("/api/2.0/agents/no-such-thing"), 404, "NOT_FOUND")
    error_of(http.put(BASE), 405, "METHOD_NOT_ALLOWED")
    error_of(http.get(f"{BASE}/absent-store"), 404, "NOT_FOUND")
    error_of(
        http.post(BASE, params={"managed_memory_store_id": "ok-id"}, content=b"{"),
        400,
        "INVALID_PARAMETER_VALUE",
    )
    error_of(http.post(BASE, content=b"{}"), 400, "INVALID_PARAMETER_VALUE")  # id required
    error_of(
        http.post(f"{BASE}/x/entries", content=b"x" * (2 * 1024 * 1024)),
        400,
        "INVALID_PARAMETER_VALUE",
    )


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_full_store_is_resource_exhausted_not_retryable(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """400, not 429 or 503, which databricks-sdk would retry for minutes: the SDK raises its
    ``ResourceExhausted`` at the first answer. The limit is an argument of the storage, not of
    ``memfs server``: the server's app on each backend, served over real HTTP in process."""
    storage: Storage
    if backend == "postgres":
        url = request.getfixturevalue("pg_url")
        storage = await PostgresStorage.open(url, max_dbx_entries=2, pool_size=2)
    else:
        storage = await SqliteStorage.open(tmp_path / "full.db", max_dbx_entries=2)
    key = "sk-dbx-full-" + "f" * 24
    try:
        async with served_in_process(storage, [key]) as base_url:
            await trio.to_thread.run_sync(fill_a_full_store, base_url, key)
    finally:
        await storage.aclose()


def fill_a_full_store(base_url: str, key: str) -> None:
    ak = WorkspaceClient(host=base_url, token=key).agent_kit
    store = ak.create_memory_store(ManagedMemoryStore(), "full").name
    first = ak.create_memory(store, ManagedMemoryEntry(actor_id="a", path="/a"))
    ak.create_memory(store, ManagedMemoryEntry(actor_id="a", path="/b"))
    with pytest.raises(ResourceExhausted, match="full") as caught:
        ak.create_memory(store, ManagedMemoryEntry(actor_id="a", path="/c"))
    assert caught.value.error_code == "RESOURCE_EXHAUSTED"
    with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"}) as http:
        r = http.post(f"/api/2.0/agents/{store}/entries", json={"actor_id": "a", "path": "/c"})
        assert "full" in error_of(r, 400, "RESOURCE_EXHAUSTED")
        assert "retry-after" not in r.headers
    # Deleting one makes room again.
    ak.delete_memory(first.name)
    ak.create_memory(store, ManagedMemoryEntry(actor_id="a", path="/c"))


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("/cafe\u0301.md", "path: path is not in Unicode Normalization Form C"),
        ("/a\x01b.md", "path: path contains a control or format character U+0001"),
        ("/tab\there.md", "path: path contains a control or format character U+0009"),
        ("/zero\u200bwidth.md", "path: path contains a control or format character U+200B"),
        ("/" + "x" * 256, "path: a path segment is longer than 255 bytes"),
        ("/" + "/".join("abcdefghijklmnopqrstu"), "path: path has more than 20 segments"),
    ],
    ids=["nfd", "control", "tab", "format", "segment-256-bytes", "21-segments"],
)
def test_new_entry_paths_follow_the_rules_a_mount_can_save(
    http: httpx.Client, store: str, path: str, rule: str
) -> None:
    """A create applies the mount's path rules (memfs/contract/paths.py, docs/semantics.md
    "Errors"): every entry is a file a mount can save. 400 ``INVALID_PARAMETER_VALUE`` names the
    rule."""
    url = f"/api/2.0/agents/{store}/entries"
    said = error_of(
        http.post(url, json={"actor_id": "a", "path": path}), 400, "INVALID_PARAMETER_VALUE"
    )
    assert said == rule
    listed = http.get(url, params={"actor_id": "a"}).json()
    assert listed["managed_memory_entries"] == []
    # at the limits: 20 segments, a 255-byte segment, NFC
    for fine in ("/" + "/".join("abcdefghijklmnopqrst"), "/" + "x" * 255, "/caf\u00e9.md"):
        assert http.post(url, json={"actor_id": "a", "path": fine}).status_code == 200
