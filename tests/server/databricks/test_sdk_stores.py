"""Memory stores through databricks-sdk, unchanged: create, get, list in pages, update, delete.

Each decision the contract leaves open is pinned here (docs/server.md, "Databricks Agent
Memory"): a body ``display_name`` must equal the id, only ``description`` is mutable (a mask
naming ``display_name`` with another value, or ``metadata``, is refused), a deleted store is gone
with its entries and its id is free again at once.
"""

from __future__ import annotations

import pytest
from databricks.sdk import WorkspaceClient
from databricks.sdk.common.types.fieldmask import FieldMask
from databricks.sdk.errors import AlreadyExists, InvalidParameterValue, NotFound
from databricks.sdk.service.agentkit import ManagedMemoryEntry, ManagedMemoryStore

from .helpers import new_store_id


def test_create_get_update_delete(workspace: WorkspaceClient) -> None:
    ak = workspace.agent_kit
    store_id = new_store_id()
    created = ak.create_memory_store(
        ManagedMemoryStore(display_name=store_id, description="first"), store_id
    )
    assert created.name == f"memory-stores/{store_id}"
    assert created.display_name == store_id
    assert created.description == "first"
    assert created.creator_user_id and created.creator_user_id == created.owner_user_id
    assert created.create_time is not None and created.create_time == created.update_time

    got = ak.get_memory_store(created.name)
    assert got == created

    updated = ak.update_memory_store(
        created.name, ManagedMemoryStore(description="second"), FieldMask(["description"])
    )
    assert updated.description == "second"
    assert updated.create_time == created.create_time
    assert updated.update_time.ToDatetime() > created.update_time.ToDatetime()

    ak.delete_memory_store(created.name)
    with pytest.raises(NotFound, match=store_id):
        ak.get_memory_store(created.name)
    with pytest.raises(NotFound):
        ak.delete_memory_store(created.name)


def test_duplicate_id_is_already_exists(workspace: WorkspaceClient, store: str) -> None:
    store_id = store.removeprefix("memory-stores/")
    with pytest.raises(AlreadyExists) as caught:
        workspace.agent_kit.create_memory_store(ManagedMemoryStore(), store_id)
    assert caught.value.error_code == "ALREADY_EXISTS"


@pytest.mark.parametrize(
    "bad_id", ["ab", "a" * 57, "1abc", "abc-", "Abc", "ab_c", "a/bc"], ids=repr
)
def test_invalid_store_ids_are_refused(workspace: WorkspaceClient, bad_id: str) -> None:
    with pytest.raises(InvalidParameterValue, match="managed_memory_store_id"):
        workspace.agent_kit.create_memory_store(ManagedMemoryStore(), bad_id)


def test_display_name_must_equal_the_id(workspace: WorkspaceClient) -> None:
    store_id = new_store_id()
    with pytest.raises(InvalidParameterValue, match="display_name"):
        workspace.agent_kit.create_memory_store(
            ManagedMemoryStore(display_name="other-name"), store_id
        )
    with pytest.raises(NotFound):
        workspace.agent_kit.get_memory_store(f"memory-stores/{store_id}")


def test_only_the_description_can_change(workspace: WorkspaceClient, store: str) -> None:
    ak = workspace.agent_kit
    store_id = store.removeprefix("memory-stores/")
    with pytest.raises(InvalidParameterValue, match="display_name"):
        ak.update_memory_store(
            store, ManagedMemoryStore(display_name="renamed"), FieldMask(["display_name"])
        )
    with pytest.raises(InvalidParameterValue, match="metadata"):
        ak.update_memory_store(store, ManagedMemoryStore(), FieldMask(["metadata"]))
    # The id as display_name is a no-op, as agentkit's MemoryStore.update(display_name=id) sends.
    same = ak.update_memory_store(
        store, ManagedMemoryStore(display_name=store_id), FieldMask(["display_name"])
    )
    assert same.display_name == store_id
    # A masked description absent from the body is cleared (field-mask semantics).
    ak.update_memory_store(store, ManagedMemoryStore(description="d"), FieldMask(["description"]))
    cleared = ak.update_memory_store(store, ManagedMemoryStore(), FieldMask(["description"]))
    assert cleared.description is None


def test_list_in_pages(workspace: WorkspaceClient) -> None:
    ak = workspace.agent_kit
    prefix = new_store_id()
    ids = [f"{prefix}-{i}" for i in range(5)]
    for store_id in ids:
        ak.create_memory_store(ManagedMemoryStore(), store_id)
    try:
        listed = [s.display_name for s in ak.list_memory_stores(page_size=2)]
        assert [i for i in listed if i.startswith(prefix)] == ids  # by id, every page read
        assert listed == sorted(listed)
        with pytest.raises(InvalidParameterValue, match="page_size"):
            next(iter(ak.list_memory_stores(page_size=101)))
    finally:
        for store_id in ids:
            ak.delete_memory_store(f"memory-stores/{store_id}")


def test_delete_removes_entries_and_frees_the_id(workspace: WorkspaceClient) -> None:
    ak = workspace.agent_kit
    store_id = new_store_id()
    name = ak.create_memory_store(ManagedMemoryStore(), store_id).name
    entry = ak.create_memory(name, ManagedMemoryEntry(actor_id="a", path="/x", content="old"))
    ak.delete_memory_store(name)
    with pytest.raises(NotFound):
        ak.get_memory(entry.name)
    ak.create_memory_store(ManagedMemoryStore(), store_id)
    try:
        assert list(ak.list_memories(name, actor_id="a")) == []
    finally:
        ak.delete_memory_store(name)
