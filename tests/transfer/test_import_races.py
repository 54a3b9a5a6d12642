"""An import meets the world between its plan and its writes: another writer, a file edited or
swapped for a link, a store that fills up. Each is reported for its path, nothing overwritten,
the rest imported. The plan and the writes are called directly (``memfs import`` runs the same
two calls) so that the other writer can act exactly between them, on the real server."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kit.hosted_like import hosted_like_client
from kit.servers import ServerProcess, served_in_process
from memfs.api import StoreClient
from memfs.api.config import ClientConfig, Secret
from memfs.api.store import MemoryStoresAPI
from memfs.contract.models import Memory, sha256_hex
from memfs.contract.store_api import Capabilities
from memfs.server.backends.sqlite import SqliteStorage
from memfs.transfer.import_plan import make_plan
from memfs.transfer.import_tree import Results, carry_out, plan_import
from memfs.transfer.import_walk import Tree, TreeFile

from .importing import write_tree

MOMENT = datetime(2026, 12, 3, tzinfo=UTC)


@pytest.fixture
def root(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    tree = tmp_path / "tree"
    tree.mkdir()
    fd = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield tree, fd
    finally:
        os.close(fd)


async def _store(client: StoreClient) -> MemoryStoresAPI:
    store = await client.create_store("import races")
    return MemoryStoresAPI(client, store.id)


def _failures(results: Results) -> dict[str, str]:
    return {o.step.path: o.reason for o in results.outcomes if not o.done}


async def test_a_concurrent_writer_is_reported_not_overwritten(
    client: StoreClient, root: tuple[Path, int]
) -> None:
    tree, fd = root
    store = await _store(client)
    for path in ("/edited.md", "/gone.md", "/deleted-here.md", "/stays.md"):
        await store.create(path, "v1")
    write_tree(tree, {"edited.md": "mine", "gone.md": "mine", "taken.md": "mine", "ok.md": "ok"})
    write_tree(tree, {"stays.md": "v1"})
    plan = await plan_import(store, fd, delete=True)
    assert {s.path: s.action for s in plan.steps} == {
        "/deleted-here.md": "delete",
        "/edited.md": "update",
        "/gone.md": "update",
        "/ok.md": "create",
        "/stays.md": "skip",
        "/taken.md": "create",
    }

    # another writer, between the plan and the writes
    listed = {m.path: m async for m in store.list_below(None)}
    await store.update(listed["/edited.md"].id, content="theirs")
    await store.delete(listed["/gone.md"].id)
    await store.create("/taken.md", "theirs")
    await store.update(listed["/deleted-here.md"].id, content="theirs too")

    results = Results()
    await carry_out(store, plan, fd, results)
    assert _failures(results) == {
        "/edited.md": "changed in the store since it was listed: not overwritten",
        "/gone.md": "deleted from the store meanwhile: not written again",
        "/taken.md": "created in the store meanwhile: not overwritten",
        "/deleted-here.md": "changed in the store since it was listed: not overwritten",
    }
    now = {m.path: m async for m in store.list_below(None)}
    assert sorted(now) == ["/deleted-here.md", "/edited.md", "/ok.md", "/stays.md", "/taken.md"]
    for path, content in (("/edited.md", "theirs"), ("/taken.md", "theirs")):
        assert now[path].content_sha256 == sha256_hex(content)
    assert now["/deleted-here.md"].content_sha256 == sha256_hex("theirs too")


async def test_a_file_edited_or_swapped_for_a_link_after_the_plan_is_not_uploaded(
    client: StoreClient, root: tuple[Path, int], tmp_path: Path
) -> None:
    tree, fd = root
    store = await _store(client)
    write_tree(tree, {"edited.md": "planned", "dir/inner.md": "planned", "fine.md": "fine"})
    plan = await plan_import(store, fd)
    assert plan.count("create") == 3

    (tree / "edited.md").write_text("edited after the plan")
    outside = tmp_path / "outside"
    write_tree(outside, {"inner.md": "planned"})  # the same bytes, through a link
    (tree / "dir/inner.md").unlink()
    (tree / "dir").rmdir()
    (tree / "dir").symlink_to(outside)

    results = Results()
    await carry_out(store, plan, fd, results)
    assert _failures(results) == {
        "/edited.md": "changed during the import (run it again)",
        "/dir/inner.md": "a symbolic link (not followed)",
    }
    assert [m.path async for m in store.list_below(None)] == ["/fine.md"]


def _tree(*paths: str) -> Tree:
    return Tree(files=[TreeFile(p[1:], p, sha256_hex(p), len(p)) for p in paths])


def _memory(path: str) -> Memory:
    return Memory(
        id="mem_" + path.strip("/"),
        memory_store_id="memstore_x",
        path=path,
        content_sha256=sha256_hex("stored"),
        content_size_bytes=6,
        memory_version_id="memver_x",
        created_at=MOMENT,
        updated_at=MOMENT,
    )


def test_past_the_limit_the_first_paths_fit_and_the_rest_are_refused() -> None:
    """Deterministic: the store's memories less the deletes plus the creates in path order."""
    limit = Capabilities(max_memories=4)
    plan = make_plan(_tree("/e", "/a", "/d", "/c", "/b"), [_memory("/z")], limit)
    assert [(s.path, s.action) for s in plan.steps] == [
        ("/a", "create"),
        ("/b", "create"),
        ("/c", "create"),
        ("/d", "refuse"),
        ("/e", "refuse"),
    ]  # /z, in the store and not in the tree, is left alone without --delete
    assert plan.steps[3].reason == "the store is full (4 memories at most)"
    # with --delete, /z goes first and makes room for one more
    plan = make_plan(_tree("/e", "/a", "/d", "/c", "/b"), [_memory("/z")], limit, delete=True)
    actions = {s.path: s.action for s in plan.steps}
    assert actions == {
        "/a": "create",
        "/b": "create",
        "/c": "create",
        "/d": "create",
        "/e": "refuse",
        "/z": "delete",
    }


@pytest.fixture
async def small_server(tmp_path: Path) -> AsyncIterator[StoreClient]:
    """The reference server (its app, over real HTTP in this process) with room for 3
    memories per store: the limit is an argument of the storage, not of ``memfs server``."""
    storage = await SqliteStorage.open(tmp_path / "small.db", max_memories=3)
    key = "sk-memfs-small-" + "s" * 24
    try:
        async with (
            served_in_process(storage, [key]) as base_url,
            StoreClient(ClientConfig(api_key=Secret(key), base_url=base_url)) as client,
        ):
            yield client
    finally:
        await storage.aclose()


async def test_a_store_that_fills_up_meanwhile_refuses_the_creates_it_cannot_hold(
    small_server: StoreClient, root: tuple[Path, int]
) -> None:
    """The server's own limit (3, where the client knows the hosted 2,000): the creates past it
    fail for their paths, the others are made, the updates go through."""
    tree, fd = root
    store = await _store(small_server)
    await store.create("/a.md", "old")
    write_tree(tree, {"a.md": "new", "b.md": "b", "c.md": "c", "d.md": "d", "e.md": "e"})
    plan = await plan_import(store, fd)
    results = Results()
    await carry_out(store, plan, fd, results, concurrency=1)  # in path order
    assert _failures(results) == {"/d.md": "the store is full", "/e.md": "the store is full"}
    stored = {m.path: m.content_sha256 async for m in store.list_below(None)}
    assert stored == {
        "/a.md": sha256_hex("new"),
        "/b.md": sha256_hex("b"),
        "/c.md": sha256_hex("c"),
    }


async def test_a_file_the_server_refuses_is_reported_and_the_rest_imported(
    server: ServerProcess, root: tuple[Path, int]
) -> None:
    """A client that cannot know the server refuses NUL (the hosted API publishes no rule on
    it; memfs server takes it) sends it: the server's 400 is that file's line."""
    tree, fd = root
    write_tree(tree, {"nul.txt": "a\x00b", "fine.md": "fine"})
    async with hosted_like_client(server, refuses_in_content="\x00") as (client, _transport):
        store = await _store(client)
        plan = await plan_import(store, fd)
        assert plan.count("create") == 2
        results = Results()
        await carry_out(store, plan, fd, results)
        failures = _failures(results)
        assert list(failures) == ["/nul.txt"]
        assert failures["/nul.txt"].startswith("refused by the server: ")
        assert failures["/nul.txt"].endswith("content: holds a character this API refuses")
        assert [m.path async for m in store.list_below(None)] == ["/fine.md"]


async def test_delete_keeps_what_no_tree_holds_and_what_is_below_an_unread_directory(
    client: StoreClient, root: tuple[Path, int], tmp_path: Path
) -> None:
    tree, fd = root
    store = await _store(client)
    for path in ("/.git/config", "/linked/a.md", "/gone.md", "/kept.md"):
        await store.create(path, "stored")
    write_tree(tree, {"kept.md": "stored"})
    (tree / "linked").symlink_to(tmp_path)
    plan = await plan_import(store, fd, delete=True)
    assert [(s.action, s.path, s.reason) for s in plan.steps] == [
        ("keep", "/.git/config", "no tree can hold it (reserved name)"),
        ("delete", "/gone.md", ""),
        ("skip", "/kept.md", ""),
        ("refuse", "/linked", "a symbolic link (not followed)"),
        ("keep", "/linked/a.md", "/linked was not read"),
    ]
