"""The same API on the PostgreSQL backend, through databricks-sdk: store create, list, update
and delete, entry create (ALREADY_EXISTS on a taken key), list rules, update, search, and a
store delete that takes its entries and their index rows with it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from databricks.sdk import WorkspaceClient
from databricks.sdk.common.types.fieldmask import FieldMask
from databricks.sdk.errors import AlreadyExists, InvalidParameterValue, NotFound
from databricks.sdk.service.agentkit import ManagedMemoryEntry, ManagedMemoryStore
from support.servers import ServerProcess

from .conftest import new_store_id, workspace_for


@pytest.fixture(scope="module")
def pg_workspace(pg_server: ServerProcess) -> WorkspaceClient:
    return workspace_for(pg_server)


@pytest.fixture
def pg_store(pg_workspace: WorkspaceClient) -> Iterator[str]:
    name = pg_workspace.agent_kit.create_memory_store(ManagedMemoryStore(), new_store_id()).name
    yield name
    with contextlib.suppress(NotFound):
        pg_workspace.agent_kit.delete_memory_store(name)


def test_stores(pg_workspace: WorkspaceClient) -> None:
    ak = pg_workspace.agent_kit
    prefix = new_store_id()
    names = [ak.create_memory_store(ManagedMemoryStore(), f"{prefix}-{i}").name for i in range(3)]
    with pytest.raises(AlreadyExists):
        ak.create_memory_store(ManagedMemoryStore(), f"{prefix}-0")
    listed = [s.name for s in ak.list_memory_stores(page_size=1)]
    assert [n for n in listed if prefix in n] == names
    updated = ak.update_memory_store(
        names[0], ManagedMemoryStore(description="pg"), FieldMask(["description"])
    )
    assert updated.description == "pg"
    for name in names:
        ak.delete_memory_store(name)
    with pytest.raises(NotFound):
        ak.get_memory_store(names[0])


def test_entries_and_search(pg_workspace: WorkspaceClient, pg_store: str) -> None:
    ak = pg_workspace.agent_kit
    made = ak.create_memory(
        pg_store, ManagedMemoryEntry(actor_id="a", path="/birds.md", content="a heron fishing")
    )
    with pytest.raises(AlreadyExists):
        ak.create_memory(pg_store, ManagedMemoryEntry(actor_id="a", path="/birds.md"))
    ak.create_memory(pg_store, ManagedMemoryEntry(actor_id="a", path="/birds.md", session_id="s"))
    ak.create_memory(pg_store, ManagedMemoryEntry(actor_id="a", path="/Birds.md"))
    listed = [(e.path, e.session_id) for e in ak.list_memories(pg_store, actor_id="a", page_size=1)]
    assert listed == [("/Birds.md", None), ("/birds.md", None), ("/birds.md", "s")]  # byte order
    assert [e.session_id for e in ak.list_memories(pg_store, actor_id="a", session_id="s")] == ["s"]
    results = list(ak.search_memories(pg_store, "a", "heron"))
    assert [r.managed_memory_entry.name for r in results] == [made.name]
    ak.update_memory(
        made.name,
        ManagedMemoryEntry(actor_id="a", path="/birds.md", content="an egret"),
        FieldMask(["content"]),
    )
    assert list(ak.search_memories(pg_store, "a", "heron")) == []
    assert [r.managed_memory_entry.name for r in ak.search_memories(pg_store, "a", "egret")] == [
        made.name
    ]
    ak.delete_memory(made.name)
    assert list(ak.search_memories(pg_store, "a", "egret")) == []
    with pytest.raises(NotFound):
        ak.get_memory(made.name)


def test_the_largest_key_fits(pg_workspace: WorkspaceClient, pg_store: str) -> None:
    """Every index holding (actor, session, path) takes the largest key the limits allow, and
    four-byte characters count as four (else a PostgreSQL index entry would overflow: a 500)."""
    ak = pg_workspace.agent_kit
    wide = "\U0001f600"  # 4 UTF-8 bytes
    key = ManagedMemoryEntry(
        actor_id=wide * 64, session_id=wide * 64, path="/" + wide * 255 + "xyz", content="big"
    )
    made = ak.create_memory(pg_store, key)
    assert [
        r.managed_memory_entry.name
        for r in ak.search_memories(pg_store, key.actor_id, "big", session_id=key.session_id)
    ] == [made.name]
    with pytest.raises(InvalidParameterValue, match="actor_id"):
        ak.create_memory(pg_store, ManagedMemoryEntry(actor_id=wide * 65, path="/x"))
