"""Memory entries through databricks-sdk, unchanged: exclusive create, get with a view, the list
rules (actor, exact path, session, prefix, pages), updates by field mask, delete, and errors.

The unique key is (actor, session or none, path): a session-less entry and a session-scoped one
at the same actor and path coexist, two of either kind collide with 409 ALREADY_EXISTS.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from databricks.sdk import WorkspaceClient
from databricks.sdk.common.types.fieldmask import FieldMask
from databricks.sdk.errors import AlreadyExists, InvalidParameterValue, NotFound, Unauthenticated
from databricks.sdk.service.agentkit import (
    ManagedMemoryEntry,
    ManagedMemoryEntrySourceType,
    ManagedMemoryEntryView,
)

from kit.servers import ServerProcess
from memfs.contract.databricks_limits import (
    MAX_CONTENT_BYTES,
    MAX_DESCRIPTION_BYTES,
    MAX_PATH_BYTES,
)
from memfs.contract.paths import MAX_NAME_BYTES

from .helpers import workspace_for

BASIC = ManagedMemoryEntryView.MANAGED_MEMORY_ENTRY_VIEW_BASIC


def keys(entries: Iterable[ManagedMemoryEntry]) -> list[tuple[str, str | None]]:
    return [(e.path, e.session_id) for e in entries]


def test_create_is_exclusive_per_actor_session_and_path(
    workspace: WorkspaceClient, store: str
) -> None:
    ak = workspace.agent_kit
    first = ak.create_memory(store, ManagedMemoryEntry(actor_id="ann", path="/a.md", content="1"))
    assert first.name.startswith(f"{store}/entries/")
    assert first.session_id is None and first.description is None
    assert first.source_type is ManagedMemoryEntrySourceType.MANAGED_MEMORY_ENTRY_SOURCE_TYPE_AGENT
    with pytest.raises(AlreadyExists) as caught:
        ak.create_memory(store, ManagedMemoryEntry(actor_id="ann", path="/a.md", content="2"))
    assert caught.value.error_code == "ALREADY_EXISTS"
    # Other session, other actor, other case of the path: other keys.
    ak.create_memory(store, ManagedMemoryEntry(actor_id="ann", path="/a.md", session_id="s1"))
    ak.create_memory(store, ManagedMemoryEntry(actor_id="bob", path="/a.md"))
    ak.create_memory(store, ManagedMemoryEntry(actor_id="ann", path="/A.md"))
    with pytest.raises(AlreadyExists):
        ak.create_memory(store, ManagedMemoryEntry(actor_id="ann", path="/a.md", session_id="s1"))
    # An empty session_id is no session (proto3: unset).
    with pytest.raises(AlreadyExists):
        ak.create_memory(store, ManagedMemoryEntry(actor_id="ann", path="/a.md", session_id=""))
    assert ak.get_memory(first.name).content == "1"


def test_caller_chosen_entry_id(workspace: WorkspaceClient, store: str) -> None:
    ak = workspace.agent_kit
    made = ak.create_memory(
        store, ManagedMemoryEntry(actor_id="a", path="/x"), managed_memory_entry_id="my-id_1.0"
    )
    assert made.name == f"{store}/entries/my-id_1.0"
    with pytest.raises(AlreadyExists):
        ak.create_memory(
            store, ManagedMemoryEntry(actor_id="a", path="/y"), managed_memory_entry_id="my-id_1.0"
        )
    with pytest.raises(InvalidParameterValue, match="managed_memory_entry_id"):
        ak.create_memory(
            store, ManagedMemoryEntry(actor_id="a", path="/z"), managed_memory_entry_id="a:b"
        )


def test_get_with_views(workspace: WorkspaceClient, store: str) -> None:
    ak = workspace.agent_kit
    made = ak.create_memory(
        store,
        ManagedMemoryEntry(
            actor_id="a",
            path="/notes/x.md",
            session_id="s",
            content="body",
            description="about x",
            source_type=ManagedMemoryEntrySourceType.MANAGED_MEMORY_ENTRY_SOURCE_TYPE_DREAMER,
        ),
    )
    full = ak.get_memory(made.name)
    assert full == made
    assert full.content == "body" and full.description == "about x" and full.session_id == "s"
    assert full.source_type is ManagedMemoryEntrySourceType.MANAGED_MEMORY_ENTRY_SOURCE_TYPE_DREAMER
    basic = ak.get_memory(made.name, view=BASIC)
    assert basic.content is None
    assert basic.description == "about x" and basic.path == "/notes/x.md"
    with pytest.raises(NotFound, match="entries/nope"):
        ak.get_memory(f"{store}/entries/nope")


def test_list_rules(workspace: WorkspaceClient, store: str) -> None:
    ak = workspace.agent_kit
    for path, session in [
        ("/p.md", None),
        ("/p.md", "s1"),
        ("/p.md", "s2"),
        ("/dir/q.md", None),
        ("/dir/r.md", "s1"),
        ("/dirt.md", None),
    ]:
        ak.create_memory(
            store, ManagedMemoryEntry(actor_id="a", path=path, session_id=session, content=path)
        )
    ak.create_memory(store, ManagedMemoryEntry(actor_id="other", path="/p.md"))

    everything = list(ak.list_memories(store, actor_id="a"))
    assert keys(everything) == [
        ("/dir/q.md", None),
        ("/dir/r.md", "s1"),
        ("/dirt.md", None),
        ("/p.md", None),
        ("/p.md", "s1"),
        ("/p.md", "s2"),
    ]
    # The default view carries content (agentkit's append reads it from a plain list).
    assert all(e.content == e.path for e in everything)
    # An empty session_id is unset (docs/server.md, decision 8): the whole actor.
    assert keys(ak.list_memories(store, actor_id="a", session_id="")) == keys(everything)
    # session_id: that session only, session-less entries excluded.
    assert keys(ak.list_memories(store, actor_id="a", session_id="s1")) == [
        ("/dir/r.md", "s1"),
        ("/p.md", "s1"),
    ]
    # path_prefix is a plain string prefix; a trailing '/' keeps to the directory.
    assert keys(ak.list_memories(store, actor_id="a", path_prefix="/dir/")) == [
        ("/dir/q.md", None),
        ("/dir/r.md", "s1"),
    ]
    assert len(list(ak.list_memories(store, actor_id="a", path_prefix="/dir"))) == 3
    assert keys(ak.list_memories(store, actor_id="a", path_prefix="/dir/", session_id="s1")) == [
        ("/dir/r.md", "s1")
    ]
    basic = list(ak.list_memories(store, actor_id="a", view=BASIC))
    assert len(basic) == 6 and all(e.content is None for e in basic)
    assert list(ak.list_memories(store, actor_id="nobody")) == []
    with pytest.raises(InvalidParameterValue, match="actor_id"):
        list(ak.list_memories(store, actor_id=""))
    with pytest.raises(InvalidParameterValue, match="path_prefix"):
        list(ak.list_memories(store, actor_id="a", path_prefix="dir"))
    with pytest.raises(InvalidParameterValue, match="path_prefix"):
        list(ak.list_memories(store, actor_id="a", path_prefix="/a//b"))


def test_exact_path_lists_every_session(workspace: WorkspaceClient, store: str) -> None:
    """``path`` is not in the SDK's signature; agentkit sends it (tests/.../test_agentkit.py),
    here it goes through the SDK's own transport."""
    ak = workspace.agent_kit
    for session in (None, "s1", "s2"):
        ak.create_memory(store, ManagedMemoryEntry(actor_id="a", path="/p", session_id=session))
    ak.create_memory(store, ManagedMemoryEntry(actor_id="a", path="/p2"))
    listing = workspace.api_client.do(
        "GET",
        f"/api/2.0/agents/{store}/entries",
        query={"actor_id": "a", "path": "/p", "session_id": "s1"},  # session_id is ignored
    )
    assert keys(map(ManagedMemoryEntry.from_dict, listing["managed_memory_entries"])) == [
        ("/p", None),
        ("/p", "s1"),
        ("/p", "s2"),
    ]
    with pytest.raises(InvalidParameterValue, match="path_prefix"):
        workspace.api_client.do(
            "GET",
            f"/api/2.0/agents/{store}/entries",
            query={"actor_id": "a", "path": "/p", "path_prefix": "/"},
        )


def test_pages(workspace: WorkspaceClient, store: str) -> None:
    ak = workspace.agent_kit
    for i in range(25):
        ak.create_memory(store, ManagedMemoryEntry(actor_id="a", path=f"/f{i:02}"))
    paths = [e.path for e in ak.list_memories(store, actor_id="a", page_size=7)]
    assert paths == [f"/f{i:02}" for i in range(25)]
    first = workspace.api_client.do(
        "GET", f"/api/2.0/agents/{store}/entries", query={"actor_id": "a"}
    )
    assert len(first["managed_memory_entries"]) == 10  # the default page size
    token = first["next_page_token"]
    with pytest.raises(InvalidParameterValue, match="page_token"):
        workspace.api_client.do(
            "GET",
            f"/api/2.0/agents/{store}/entries",
            query={"actor_id": "b", "page_token": token},  # another listing's token
        )
    last = workspace.api_client.do(
        "GET", f"/api/2.0/agents/{store}/entries", query={"actor_id": "a", "page_size": 100}
    )
    assert len(last["managed_memory_entries"]) == 25 and "next_page_token" not in last
    with pytest.raises(InvalidParameterValue, match="page_size"):
        list(ak.list_memories(store, actor_id="a", page_size=101))


def test_list_is_in_byte_order(workspace: WorkspaceClient, store: str) -> None:
    """Paths sort by their UTF-8 bytes on every backend, never by a locale's collation; at one
    path the session-less entry comes first. Pages of one keep that order."""
    ak = workspace.agent_kit
    for path, session in [("/b.md", "s"), ("/é.md", None), ("/b.md", None), ("/B.md", None)]:
        ak.create_memory(store, ManagedMemoryEntry(actor_id="a", path=path, session_id=session))
    ak.create_memory(store, ManagedMemoryEntry(actor_id="a", path="/a.md"))
    assert keys(ak.list_memories(store, actor_id="a", page_size=1)) == [
        ("/B.md", None),
        ("/a.md", None),
        ("/b.md", None),
        ("/b.md", "s"),
        ("/é.md", None),
    ]


def test_update_by_mask(workspace: WorkspaceClient, store: str) -> None:
    ak = workspace.agent_kit
    made = ak.create_memory(
        store, ManagedMemoryEntry(actor_id="a", path="/u", content="c1", description="d1")
    )
    # The SDK sends the whole entry: identity fields and times in the body are ignored.
    changed = ak.update_memory(
        made.name,
        ManagedMemoryEntry(actor_id="zzz", path="/elsewhere", content="c2", description="d2"),
        FieldMask(["content"]),
    )
    assert (changed.actor_id, changed.path, changed.content, changed.description) == (
        "a",
        "/u",
        "c2",
        "d1",
    )
    assert changed.create_time == made.create_time
    assert changed.update_time.ToDatetime() > made.update_time.ToDatetime()
    both = ak.update_memory(
        made.name,
        ManagedMemoryEntry(actor_id="a", path="/u", content="c3", description="d3"),
        FieldMask(["content", "description"]),
    )
    assert (both.content, both.description) == ("c3", "d3")
    # A masked field absent from the body is cleared.
    cleared = ak.update_memory(
        made.name, ManagedMemoryEntry(actor_id="a", path="/u"), FieldMask(["description"])
    )
    assert cleared.description is None and cleared.content == "c3"
    for bad_mask in (["path"], ["actor_id"], ["session_id"], ["source_type"]):
        with pytest.raises(InvalidParameterValue, match="update_mask"):
            ak.update_memory(
                made.name, ManagedMemoryEntry(actor_id="a", path="/v"), FieldMask(bad_mask)
            )
    with pytest.raises(NotFound):
        ak.update_memory(
            f"{store}/entries/nope",
            ManagedMemoryEntry(actor_id="a", path="/u", content="x"),
            FieldMask(["content"]),
        )
    assert ak.get_memory(made.name).path == "/u"


def test_delete(workspace: WorkspaceClient, store: str) -> None:
    ak = workspace.agent_kit
    made = ak.create_memory(store, ManagedMemoryEntry(actor_id="a", path="/d"))
    ak.delete_memory(made.name)
    with pytest.raises(NotFound):
        ak.get_memory(made.name)
    with pytest.raises(NotFound):
        ak.delete_memory(made.name)
    # The key is free again.
    ak.create_memory(store, ManagedMemoryEntry(actor_id="a", path="/d"))


def test_entries_of_an_absent_store(workspace: WorkspaceClient) -> None:
    ak = workspace.agent_kit
    gone = "memory-stores/no-such-store"
    with pytest.raises(NotFound, match="no-such-store"):
        ak.create_memory(gone, ManagedMemoryEntry(actor_id="a", path="/x"))
    with pytest.raises(NotFound, match="no-such-store"):
        list(ak.list_memories(gone, actor_id="a"))
    with pytest.raises(NotFound, match="no-such-store"):
        ak.get_memory(f"{gone}/entries/e")
    with pytest.raises(NotFound, match="no-such-store"):
        list(ak.search_memories(gone, "a", "x"))


def test_a_wrong_token_is_unauthenticated(dbx_server: ServerProcess, store: str) -> None:
    """The SDK's own error class, for stores and entries alike; the token is never echoed."""
    ak = workspace_for(dbx_server, token="not-the-token").agent_kit
    for call in (
        lambda: ak.get_memory_store(store),
        lambda: list(ak.list_memories(store, actor_id="a")),
        lambda: ak.create_memory(store, ManagedMemoryEntry(actor_id="a", path="/x")),
        lambda: list(ak.search_memories(store, "a", "x")),
    ):
        with pytest.raises(Unauthenticated) as caught:
            call()
        assert caught.value.error_code == "UNAUTHENTICATED"
        assert "not-the-token" not in str(caught.value)
    assert list(workspace_for(dbx_server).agent_kit.list_memories(store, actor_id="a")) == []


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        (ManagedMemoryEntry(actor_id="", path="/x"), "actor_id"),
        (ManagedMemoryEntry(actor_id="a" * 257, path="/x"), "actor_id"),
        (ManagedMemoryEntry(actor_id="a", path="/x", session_id="s" * 257), "session_id"),
        (ManagedMemoryEntry(actor_id="a", path=""), "path"),
        (ManagedMemoryEntry(actor_id="a", path="x"), "path"),
        (ManagedMemoryEntry(actor_id="a", path="/"), "path"),
        (ManagedMemoryEntry(actor_id="a", path="//x"), "path"),
        (ManagedMemoryEntry(actor_id="a", path="/x/"), "path"),
        (ManagedMemoryEntry(actor_id="a", path="/a/./b"), "path"),
        (ManagedMemoryEntry(actor_id="a", path="/a/../b"), "path"),
        (ManagedMemoryEntry(actor_id="a", path="/" + "p" * MAX_PATH_BYTES), "path"),
        (ManagedMemoryEntry(actor_id="a", path="/x", content="é" * MAX_CONTENT_BYTES), "content"),
        (
            ManagedMemoryEntry(
                actor_id="a", path="/x", description="d" * (MAX_DESCRIPTION_BYTES + 1)
            ),
            "description",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_invalid_entries_are_refused(
    workspace: WorkspaceClient, store: str, entry: ManagedMemoryEntry, field: str
) -> None:
    with pytest.raises(InvalidParameterValue, match=field):
        workspace.agent_kit.create_memory(store, entry)
    assert list(workspace.agent_kit.list_memories(store, actor_id="a")) == []


def test_largest_entry_fits(workspace: WorkspaceClient, store: str) -> None:
    entry = ManagedMemoryEntry(
        actor_id="a" * 256,
        path="/" + "/".join(["p" * MAX_NAME_BYTES] * 4),  # 1,024 bytes: 4 longest segments
        content="x" * MAX_CONTENT_BYTES,
        description="d" * MAX_DESCRIPTION_BYTES,
        session_id="s" * 256,
    )
    made = workspace.agent_kit.create_memory(store, entry)
    assert workspace.agent_kit.get_memory(made.name).content == entry.content


def test_the_largest_key_fits_in_every_index(workspace: WorkspaceClient, store: str) -> None:
    """Every index holding (actor, session, path) takes the largest key the limits allow, and a
    four-byte character counts as four (else a PostgreSQL index entry would overflow: a 500)."""
    ak = workspace.agent_kit
    wide = "\U0001f600"  # 4 UTF-8 bytes
    segment = wide * 63 + "xyz"  # the longest a segment may be: 255 bytes
    path = "/" + "/".join([segment] * 4)  # and the longest path: 1,024 bytes
    assert len(path.encode()) == MAX_PATH_BYTES
    key = ManagedMemoryEntry(actor_id=wide * 64, session_id=wide * 64, path=path, content="big")
    made = ak.create_memory(store, key)
    found = ak.search_memories(store, wide * 64, "big", session_id=wide * 64)
    assert [r.managed_memory_entry.name for r in found] == [made.name]
    with pytest.raises(InvalidParameterValue, match="actor_id"):
        ak.create_memory(store, ManagedMemoryEntry(actor_id=wide * 65, path="/x"))
