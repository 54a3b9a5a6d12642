"""The AgentKit memory client (databricks-agentbricks' ``databricks_agentkit``), unchanged.

What its agent tools do with a store: ``put`` (create, or on ALREADY_EXISTS find by exact path
and overwrite), ``put(append=True)`` (whole lines, a repeated line is a no-op), ``search``,
``list`` (``path`` across sessions, ``session_id``), and forgetting a fact (read, rewrite or
delete, as ``openai/memory.py``'s ``forget`` does). Its stores: create, get, list, update,
delete.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from databricks_agentbricks.errors import AgentCliError
from databricks_agentkit import AgentKitClient
from databricks_agentkit.memory_store import MemoryStore

from .helpers import new_store_id


@pytest.fixture
def kit_store(agentkit: AgentKitClient) -> Iterator[MemoryStore]:
    store = agentkit.memory_stores.create(new_store_id(), description="kit")
    yield store
    try:
        store.delete()
    except AgentCliError as exc:
        assert exc.error_code == "NOT_FOUND"


def test_stores(agentkit: AgentKitClient) -> None:
    stores = agentkit.memory_stores
    store = stores.create(new_store_id(), description="first")
    assert store.name == f"memory-stores/{store.display_name}"
    assert store.owner_user_id and store.create_time and store.create_time.tzinfo
    assert stores.get(store.id) == store
    assert store.id in [s.id for s in stores.list(page_size=1)]
    assert store.update(description="second").description == "second"
    with pytest.raises(AgentCliError) as caught:
        stores.create(store.id)
    assert caught.value.error_code == "ALREADY_EXISTS"
    with pytest.raises(AgentCliError) as caught:
        store.update(display_name="other-name")
    assert caught.value.error_code == "INVALID_PARAMETER_VALUE"
    store.delete()
    with pytest.raises(AgentCliError) as caught:
        stores.get(store.id)
    assert caught.value.error_code == "NOT_FOUND"


def test_put_creates_then_overwrites(kit_store: MemoryStore) -> None:
    made = kit_store.put(actor_id="u", path="/prefs.md", content="tea", description="drinks")
    assert made.content == "tea" and made.session_id is None and made.create_time
    again = kit_store.put(actor_id="u", path="/prefs.md", content="coffee")
    assert again.id == made.id
    assert again.content == "coffee" and again.description == "drinks"  # description kept
    scoped = kit_store.put(actor_id="u", path="/prefs.md", content="water", session_id="s1")
    assert scoped.id != made.id and scoped.session_id == "s1"
    assert kit_store.get(made.id).content == "coffee"


def test_put_append_adds_whole_lines_once(kit_store: MemoryStore) -> None:
    kit_store.put(actor_id="u", path="/facts.md", content="likes cats", append=True)
    kit_store.put(actor_id="u", path="/facts.md", content="lives in Oslo", append=True)
    kit_store.put(actor_id="u", path="/facts.md", content="likes cats", append=True)  # no-op
    (memory,) = kit_store.list(actor_id="u", path="/facts.md")
    assert memory.content == "likes cats\nlives in Oslo"


def test_list_and_search(kit_store: MemoryStore) -> None:
    kit_store.put(actor_id="u", path="/pets.md", content="has a cat named Miso")
    kit_store.put(actor_id="u", path="/pets.md", content="cat sitter on Fridays", session_id="s")
    kit_store.put(actor_id="u", path="/work.md", content="writes compilers")
    kit_store.put(actor_id="other", path="/pets.md", content="has a cat too")
    assert {(m.path, m.session_id) for m in kit_store.list(actor_id="u", path="/pets.md")} == {
        ("/pets.md", None),
        ("/pets.md", "s"),
    }
    assert [m.path for m in kit_store.list(actor_id="u", session_id="s")] == ["/pets.md"]
    assert [m.path for m in kit_store.list(actor_id="u", path_prefix="/w")] == ["/work.md"]
    results = kit_store.search(actor_id="u", query="cat", limit=5)
    assert {(r.memory.path, r.memory.session_id) for r in results} == {
        ("/pets.md", None),
        ("/pets.md", "s"),
    }
    assert all(r.score is not None and r.score > 0 for r in results)
    assert [
        r.memory.session_id for r in kit_store.search(actor_id="u", query="cat", session_id="s")
    ] == ["s"]
    assert kit_store.search(actor_id="u", query="compilers")[0].memory.path == "/work.md"
    assert kit_store.search(actor_id="u", query="zebra") == []


def test_forget_a_fact(kit_store: MemoryStore) -> None:
    """What the agent's ``forget`` tool does: rewrite without the line, delete when empty."""
    kit_store.put(actor_id="u", path="/f.md", content="a\nb", append=True)
    (memory,) = kit_store.list(actor_id="u", path="/f.md")
    memory = memory.update(content="a")
    assert kit_store.get(memory.id).content == "a"
    memory.delete()
    assert list(kit_store.list(actor_id="u")) == []
    with pytest.raises(AgentCliError) as caught:
        kit_store.get(memory.id)
    assert caught.value.error_code == "NOT_FOUND"


def test_add_is_exclusive(kit_store: MemoryStore) -> None:
    kit_store.add(actor_id="u", path="/x", content="1")
    with pytest.raises(AgentCliError) as caught:
        kit_store.add(actor_id="u", path="/x", content="2")
    assert caught.value.error_code == "ALREADY_EXISTS"
