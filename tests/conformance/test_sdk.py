"""Conformance: the official ``anthropic`` SDK, unchanged, against the real server subprocess.

Every endpoint, the rules the SDK docstrings describe, and the exception class, status and body
of every error the SDK can meet.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import anthropic
import pytest

from memfs.contract.errors import STORE_ARCHIVED_MESSAGE
from memfs.contract.models import sha256_hex


@pytest.fixture
def sdk(server: Any) -> Iterator[anthropic.Anthropic]:
    client = anthropic.Anthropic(api_key=server.api_key, base_url=server.base_url, max_retries=0)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def store(sdk: anthropic.Anthropic) -> Any:
    return sdk.beta.memory_stores.create(name="Conformance Store", description="sdk tests")


def error_of(exc: pytest.ExceptionInfo[anthropic.APIStatusError]) -> dict[str, Any]:
    body = exc.value.body
    assert isinstance(body, dict)
    # The SDK hands over the parsed envelope; request_id is on the exception too.
    assert exc.value.request_id and exc.value.request_id.startswith("req_")
    assert body["type"] == "error" and "request_id" in body
    error: dict[str, Any] = body["error"]
    return error


def test_store_lifecycle(sdk: anthropic.Anthropic) -> None:
    stores = sdk.beta.memory_stores
    created = stores.create(name="Demo Memory", metadata={"user": "u1", "team": "t"})
    assert created.id.startswith("memstore_") and created.type == "memory_store"
    assert created.description == "" and created.archived_at is None
    assert isinstance(created.created_at, datetime)
    assert stores.retrieve(created.id) == created
    updated = stores.update(created.id, metadata={"user": None, "x": "1"}, description="now")
    assert updated.metadata == {"team": "t", "x": "1"} and updated.description == "now"
    listed = [s.id for s in stores.list(limit=100, created_at_gte=created.created_at)]
    assert created.id in listed
    archived = stores.archive(created.id)
    assert archived.archived_at is not None
    assert stores.archive(created.id) == archived
    assert created.id not in [s.id for s in stores.list(created_at_gte=created.created_at)]
    assert created.id in [
        s.id for s in stores.list(include_archived=True, created_at_gte=created.created_at)
    ]
    with pytest.raises(anthropic.BadRequestError) as exc:
        stores.update(created.id, name="nope")
    assert exc.value.status_code == 400
    assert error_of(exc)["message"].startswith(STORE_ARCHIVED_MESSAGE)
    deleted = stores.delete(created.id)
    assert (deleted.id, deleted.type) == (created.id, "memory_store_deleted")
    with pytest.raises(anthropic.NotFoundError) as nf:
        stores.retrieve(created.id)
    assert nf.value.status_code == 404 and error_of(nf)["type"] == "not_found_error"


def test_store_listing_pages_newest_first(sdk: anthropic.Anthropic) -> None:
    made = [sdk.beta.memory_stores.create(name=f"page {i}") for i in range(5)]
    page = sdk.beta.memory_stores.list(limit=2, created_at_gte=made[0].created_at)
    assert len(page.data) == 2 and page.next_page and page.next_page.startswith("page_")
    everything = [s.id for s in page]  # auto-pagination follows next_page
    assert everything[:5] == [s.id for s in reversed(made)]


def test_memory_lifecycle(sdk: anthropic.Anthropic, store: Any) -> None:
    memories = sdk.beta.memory_stores.memories
    created = memories.create(store.id, path="/notes/todo.md", content="buy milk")
    assert created.id.startswith("mem_") and created.content is None
    assert created.content_sha256 == sha256_hex("buy milk") and created.content_size_bytes == 8
    got = memories.retrieve(created.id, memory_store_id=store.id)
    assert got.content == "buy milk" and got.memory_version_id == created.memory_version_id
    assert memories.retrieve(created.id, memory_store_id=store.id, view="basic").content is None
    empty = memories.create(store.id, path="/empty", content="", view="full")
    assert empty.content == "" and empty.content_size_bytes == 0

    updated = memories.update(
        created.id,
        memory_store_id=store.id,
        content="buy oat milk",
        precondition={"type": "content_sha256", "content_sha256": created.content_sha256},
    )
    assert updated.content_sha256 == sha256_hex("buy oat milk")
    renamed = memories.update(
        created.id, memory_store_id=store.id, path="/done/todo.md", view="full"
    )
    assert (renamed.id, renamed.path, renamed.content) == (
        created.id,
        "/done/todo.md",
        "buy oat milk",
    )
    noop = memories.update(created.id, memory_store_id=store.id, content="buy oat milk")
    assert noop.memory_version_id == renamed.memory_version_id

    deleted = memories.delete(
        created.id, memory_store_id=store.id, expected_content_sha256=renamed.content_sha256
    )
    assert (deleted.id, deleted.type) == (created.id, "memory_deleted")
    with pytest.raises(anthropic.NotFoundError):
        memories.retrieve(created.id, memory_store_id=store.id)


def test_memory_listing(sdk: anthropic.Anthropic, store: Any) -> None:
    memories = sdk.beta.memory_stores.memories
    for path in ("/a/x", "/a/y/z", "/b", "/notes/t", "/notes-archive/t"):
        memories.create(store.id, path=path, content=path)
    assert [m.path for m in memories.list(store.id)] == [
        "/a/x",
        "/a/y/z",
        "/b",
        "/notes-archive/t",
        "/notes/t",
    ]
    top = list(memories.list(store.id, depth=1, limit=1))
    assert [(item.type, item.path) for item in top] == [
        ("memory_prefix", "/a/"),
        ("memory", "/b"),
        ("memory_prefix", "/notes-archive/"),
        ("memory_prefix", "/notes/"),
    ]
    assert [m.path for m in memories.list(store.id, path_prefix="/notes/")] == ["/notes/t"]
    full = memories.list(store.id, path_prefix="/a/", view="full", limit=100)
    assert [m.content for m in full.data] == ["/a/x", "/a/y/z"]
    with pytest.raises(anthropic.BadRequestError):
        memories.list(store.id, path_prefix="/notes")
    with pytest.raises(anthropic.BadRequestError):
        memories.list(store.id, depth=2)
    with pytest.raises(anthropic.BadRequestError):
        memories.list(store.id, limit=101)
    with pytest.raises(anthropic.BadRequestError):
        memories.list(store.id, page="page_forged")


def test_memory_errors(sdk: anthropic.Anthropic, store: Any) -> None:
    memories = sdk.beta.memory_stores.memories
    first = memories.create(store.id, path="/taken", content="x")
    other = memories.create(store.id, path="/other", content="y")

    with pytest.raises(anthropic.ConflictError) as conflict:
        memories.create(store.id, path="/taken", content="z")
    error = error_of(conflict)
    assert conflict.value.status_code == 409
    assert error["type"] == "memory_path_conflict_error"
    assert (error["conflicting_memory_id"], error["conflicting_path"]) == (first.id, "/taken")

    with pytest.raises(anthropic.ConflictError) as rename:
        memories.update(other.id, memory_store_id=store.id, path="/taken")
    assert error_of(rename)["type"] == "memory_path_conflict_error"

    stale = {"type": "content_sha256", "content_sha256": sha256_hex("not it")}
    with pytest.raises(anthropic.ConflictError) as pre:
        memories.update(first.id, memory_store_id=store.id, content="new", precondition=stale)  # type: ignore[arg-type]
    assert error_of(pre)["type"] == "memory_precondition_failed_error"
    same = memories.update(first.id, memory_store_id=store.id, content="x", precondition=stale)  # type: ignore[arg-type]
    assert same.content_sha256 == first.content_sha256

    with pytest.raises(anthropic.ConflictError) as delete_pre:
        memories.delete(first.id, memory_store_id=store.id, expected_content_sha256="0" * 64)
    assert error_of(delete_pre)["type"] == "memory_precondition_failed_error"

    with pytest.raises(anthropic.APIStatusError) as too_big:
        memories.create(store.id, path="/big", content="x" * 102_401)
    assert too_big.value.status_code == 413
    assert error_of(too_big)["type"] == "request_too_large"

    bad_paths = [
        "nope",
        "/a//b",
        "/a/../b",
        "/x\x00",
        "/cafe\u0301",
        "/" + "x" * 1024,
        "/" + "/".join("s" * 21),
    ]
    for path in bad_paths:
        with pytest.raises(anthropic.BadRequestError) as bad:
            memories.create(store.id, path=path, content="")
        assert bad.value.status_code == 400
        assert error_of(bad)["type"] == "invalid_request_error"

    with pytest.raises(anthropic.BadRequestError):
        memories.create(store.id, path="/null", content=None)
    with pytest.raises(anthropic.BadRequestError) as unknown:
        memories.create(store.id, path="/u", content="", extra_body={"color": "red"})
    assert "color" in error_of(unknown)["message"]
    with pytest.raises(anthropic.NotFoundError):
        memories.retrieve("mem_missing", memory_store_id=store.id)
    with pytest.raises(anthropic.NotFoundError):
        memories.create("memstore_missing", path="/a", content="")


def test_versions_and_redaction(sdk: anthropic.Anthropic, store: Any) -> None:
    memories = sdk.beta.memory_stores.memories
    versions = sdk.beta.memory_stores.memory_versions
    memory = memories.create(store.id, path="/s", content="secret")
    memories.update(memory.id, memory_store_id=store.id, content="public")
    history = list(versions.list(store.id, memory_id=memory.id))
    assert [v.operation for v in history] == ["modified", "created"]
    assert all(v.content is None for v in history)
    assert history[0].created_by is not None and history[0].created_by.type == "api_actor"
    api_key_id = history[0].created_by.api_key_id  # type: ignore[union-attr]
    assert api_key_id.startswith("apikey_")
    assert [v.id for v in versions.list(store.id, api_key_id=api_key_id, memory_id=memory.id)] == [
        v.id for v in history
    ]
    assert list(versions.list(store.id, operation="deleted", memory_id=memory.id)) == []
    old = versions.retrieve(history[1].id, memory_store_id=store.id)
    assert old.content == "secret" and old.path == "/s"

    with pytest.raises(anthropic.BadRequestError) as head:
        versions.redact(history[0].id, memory_store_id=store.id)
    assert "cannot be redacted" in error_of(head)["message"]
    redacted = versions.redact(history[1].id, memory_store_id=store.id)
    assert redacted.redacted_at is not None and redacted.redacted_by is not None
    assert (redacted.content, redacted.path, redacted.content_sha256) == (None, None, None)
    again = versions.retrieve(history[1].id, memory_store_id=store.id)
    assert again.content is None and again.redacted_at == redacted.redacted_at
    with pytest.raises(anthropic.NotFoundError):
        versions.retrieve("memver_missing", memory_store_id=store.id)
    with pytest.raises(anthropic.BadRequestError):
        versions.list(store.id, limit=0)

    memories.delete(memory.id, memory_store_id=store.id)
    after = list(versions.list(store.id, memory_id=memory.id, view="full"))
    assert [v.operation for v in after] == ["deleted", "modified", "created"]
    assert after[0].content is None and after[1].content == "public"
    feed = list(versions.list(store.id, created_at_gte=after[1].created_at))
    assert [v.id for v in feed] == [after[0].id, after[1].id]


def test_archived_store_rules(sdk: anthropic.Anthropic, store: Any) -> None:
    memories = sdk.beta.memory_stores.memories
    memory = memories.create(store.id, path="/kept", content="v1")
    memories.update(memory.id, memory_store_id=store.id, content="v2")
    sdk.beta.memory_stores.archive(store.id)
    for call in (
        lambda: memories.create(store.id, path="/new", content=""),
        lambda: memories.update(memory.id, memory_store_id=store.id, content="v3"),
    ):
        with pytest.raises(anthropic.BadRequestError) as exc:
            call()
        assert error_of(exc)["message"].startswith(STORE_ARCHIVED_MESSAGE)
    assert memories.retrieve(memory.id, memory_store_id=store.id).content == "v2"
    first = list(sdk.beta.memory_stores.memory_versions.list(store.id))[-1]
    assert sdk.beta.memory_stores.memory_versions.redact(
        first.id, memory_store_id=store.id
    ).redacted_at
    assert memories.delete(memory.id, memory_store_id=store.id).type == "memory_deleted"
    assert sdk.beta.memory_stores.delete(store.id).type == "memory_store_deleted"


def test_authentication_errors(server: Any) -> None:
    bad = anthropic.Anthropic(api_key="sk-wrong", base_url=server.base_url, max_retries=0)
    try:
        with pytest.raises(anthropic.AuthenticationError) as exc:
            bad.beta.memory_stores.list()
        assert exc.value.status_code == 401
        assert error_of(exc)["type"] == "authentication_error"
        assert "sk-wrong" not in str(exc.value)
    finally:
        bad.close()


def test_session_attribution_through_the_sdk(sdk: anthropic.Anthropic, store: Any) -> None:
    memory = sdk.beta.memory_stores.memories.create(
        store.id, path="/mount.md", content="x", extra_headers={"x-memfs-session-id": "sesn_sdk1"}
    )
    version = sdk.beta.memory_stores.memory_versions.retrieve(
        memory.memory_version_id, memory_store_id=store.id
    )
    assert version.created_by is not None and version.created_by.type == "session_actor"
    assert version.created_by.session_id == "sesn_sdk1"  # type: ignore[union-attr]
    found = list(sdk.beta.memory_stores.memory_versions.list(store.id, session_id="sesn_sdk1"))
    assert [v.id for v in found] == [version.id]


def test_old_beta_with_new_beta_is_rejected(sdk: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError) as exc:
        sdk.beta.memory_stores.list(betas=["managed-agents-2026-04-01"])
    assert "anthropic-beta" in error_of(exc)["message"]
