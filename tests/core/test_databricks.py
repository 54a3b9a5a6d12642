"""A Databricks store under the core, FUSE-free: the real adapter (``DatabricksStore``) over
``FakeDatabricks``, the entry endpoints in memory. What the API lacks is made up in the adapter
(docs/architecture.md, "A second store API"): the precondition of a save, a rename as create
and delete, directories, the change listing; the core gains ``user.description``."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from trio.testing import MockClock

from kit.fake_databricks import FakeDatabricks
from kit.fake_store import FakeStore
from memfs.api.databricks.store import DatabricksStore
from memfs.contract.errors import RemoteConflictError, errno_for
from memfs.contract.models import MemoryPrefix, sha256_hex
from memfs.core.model.inodes import ROOT_INODE
from memfs.core.ops.descriptions import DESCRIPTION
from memfs.search.engine import StoreSearch

from .helpers import CONFIG, replay, running_core

ACTOR = "alice"


def adapter(api: FakeDatabricks, session: str | None = None) -> DatabricksStore:
    return DatabricksStore(api, api.store_id, ACTOR, session)  # type: ignore[arg-type]


def errno_of(exc: BaseException) -> int:
    return errno_for(exc)


async def test_the_root_shows_the_actors_session_less_entries_and_derives_directories(
    autojump_clock: MockClock, cache_dir: Path
) -> None:
    api = FakeDatabricks()
    api.put(ACTOR, "/a.md", "a\n")
    api.put(ACTOR, "/notes/b.md", "b\n")
    api.put(ACTOR, "/s.md", "in a session\n", session="s1")
    api.put("bob", "/bob.md", "not alice's\n")
    page = await adapter(api).list_directory_page(None)
    assert [(type(i).__name__, i.path) for i in page.data] == [
        ("Memory", "/a.md"),
        ("MemoryPrefix", "/notes/"),
    ]
    assert page.next_page is None
    session = await adapter(api, "s1").list_directory_page(None, with_content=True)
    assert [(i.path, getattr(i, "content", None)) for i in session.data] == [
        ("/s.md", "in a session\n")
    ]
    below = await adapter(api).list_directory_page("/notes/")
    assert [i.path for i in below.data] == ["/notes/b.md"]
    assert not any(isinstance(i, MemoryPrefix) for i in below.data)
    async with running_core(adapter(api), cache_dir) as core:  # type: ignore[arg-type]
        assert sorted(n for n, _ in await core.vfs.readdir(ROOT_INODE)) == ["a.md", "notes"]
        assert await core.read("b.md", await core.ino("notes")) == b"b\n"


async def test_a_save_updates_the_same_entry_and_a_new_file_creates_one(
    autojump_clock: MockClock, cache_dir: Path
) -> None:
    api = FakeDatabricks()
    entry = api.put(ACTOR, "/a.md", "one\n", description="kept")
    async with running_core(adapter(api), cache_dir) as core:  # type: ignore[arg-type]
        await core.save("a.md", b"two\n")
        await core.save("new.md", b"fresh\n")
        await core.vfs.fsync_dir()
        assert core.records() == []
    assert api.entries[entry.id].content == "two\n"
    assert api.entries[entry.id].description == "kept"
    created = api.at(ACTOR, "/new.md")
    assert created is not None and created.content == "fresh\n" and created.session_id is None


async def test_a_change_made_elsewhere_before_the_upload_is_a_conflict_never_silent(
    autojump_clock: MockClock, cache_dir: Path
) -> None:
    """No server preconditions: the adapter reads the entry before the PATCH and refuses the
    save if its content is no longer the one the file was based on."""
    api = FakeDatabricks()
    entry = api.put(ACTOR, "/c.md", "base\n")
    async with running_core(adapter(api), cache_dir) as core:  # type: ignore[arg-type]
        vfs = core.vfs
        fh, _ = await vfs.open(await core.ino("c.md"), os.O_WRONLY | os.O_TRUNC)
        await vfs.write(fh, 0, b"mine\n")
        api.edit(entry.id, content="theirs\n")  # through the API, by another agent
        with pytest.raises(RemoteConflictError) as raised:
            await vfs.fsync(fh)
        assert errno_of(raised.value) == errno.ESTALE
        await vfs.release(fh)
        assert await vfs.flush_all() == []
        assert await core.read("c.md") == b"theirs\n"
    assert api.entries[entry.id].content == "theirs\n"  # the winner stays
    copies = [e for e in api.entries.values() if e.path.startswith("/c.conflict-")]
    assert [e.content for e in copies] == ["mine\n"]
    assert api.calls["update_entry"] == 0


async def test_a_rename_creates_at_the_new_path_keeps_the_description_and_deletes_the_old(
    autojump_clock: MockClock, cache_dir: Path
) -> None:
    api = FakeDatabricks()
    old = api.put(ACTOR, "/m.md", "one\n", description="about m")
    async with running_core(adapter(api), cache_dir) as core:  # type: ignore[arg-type]
        node = core.vfs.parts.state.table.get(await core.ino("m.md"))
        await core.vfs.rename(ROOT_INODE, "m.md", ROOT_INODE, "n.md")
        await core.vfs.fsync_dir()
        moved = api.at(ACTOR, "/n.md")
        assert moved is not None and moved.id != old.id and old.id not in api.entries
        assert (moved.content, moved.description) == ("one\n", "about m")
        assert node is not None and node.memory_id == moved.id
        await core.save("n.md", b"two\n")  # the next save updates the new entry
        await core.vfs.fsync_dir()
        assert core.vfs.parts.durable.conflict_count == 0
    assert [(e.path, e.content) for e in api.entries.values()] == [("/n.md", "two\n")]


async def test_the_description_is_an_extended_attribute_written_like_content(
    autojump_clock: MockClock, cache_dir: Path
) -> None:
    api = FakeDatabricks()
    entry = api.put(ACTOR, "/d.md", "text\n", description="first")
    api.put(ACTOR, "/plain.md", "no description\n")
    async with running_core(adapter(api), cache_dir, queue=False) as core:  # type: ignore[arg-type]
        descriptions = core.vfs.descriptions
        ino = await core.ino("d.md")
        assert await descriptions.get(ino, DESCRIPTION) == b"first"
        assert await descriptions.names(ino) == [DESCRIPTION]
        plain = await core.ino("plain.md")
        assert await descriptions.names(plain) == []
        with pytest.raises(Exception) as absent:
            await descriptions.get(plain, DESCRIPTION)
        assert errno_of(absent.value) == errno.ENODATA
        with pytest.raises(Exception) as other:
            await descriptions.get(ino, "user.other")
        assert errno_of(other.value) == errno.ENODATA
        with pytest.raises(Exception) as unsupported:
            await descriptions.set(ino, "user.other", b"x")
        assert errno_of(unsupported.value) == errno.ENOTSUP
        with pytest.raises(Exception) as not_utf8:
            await descriptions.set(ino, DESCRIPTION, b"\xff")
        assert errno_of(not_utf8.value) == errno.EILSEQ
        with pytest.raises(Exception) as too_big:
            await descriptions.set(ino, DESCRIPTION, b"x" * 4097)
        assert errno_of(too_big.value) == errno.E2BIG
        with pytest.raises(Exception) as a_directory:
            await descriptions.set(ROOT_INODE, DESCRIPTION, b"x")
        assert errno_of(a_directory.value) == errno.ENOTSUP

        await descriptions.set(ino, DESCRIPTION, "second, é".encode())
        # journaled before the call returns (the daemon is killed here: no upload ran)
        [record] = core.records()
        assert (record.memory_id, record.description, record.data) == (
            entry.id,
            "second, é",
            None,
        )
        assert await descriptions.get(ino, DESCRIPTION) == "second, é".encode()
    assert api.entries[entry.id].description == "first"
    async with running_core(adapter(api), cache_dir) as core:  # type: ignore[arg-type]
        assert await replay(core) == 1
        assert core.records() == []
    assert api.entries[entry.id].description == "second, é"
    assert api.entries[entry.id].content == "text\n"

    async with running_core(adapter(api), cache_dir) as core:  # type: ignore[arg-type]
        ino = await core.ino("d.md")
        await core.vfs.descriptions.remove(ino, DESCRIPTION)
        await core.vfs.fsync_dir()
        assert await core.vfs.descriptions.names(ino) == []
        new = await core.save("new.md", b"new\n")
        await core.vfs.descriptions.set(new, DESCRIPTION, b"made with it")
        await core.vfs.fsync_dir()
    assert api.entries[entry.id].description == ""
    created = api.at(ACTOR, "/new.md")
    assert created is not None and created.description == "made with it"
    assert api.calls["update_entry"] == 2  # the replayed set and the removal: no PATCH for new.md


async def test_a_read_only_mount_refuses_a_description(
    autojump_clock: MockClock, cache_dir: Path
) -> None:
    api = FakeDatabricks()
    api.put(ACTOR, "/d.md", "text\n", description="first")
    config = CONFIG.__class__(**{**CONFIG.__dict__, "read_only": True})
    async with running_core(adapter(api), cache_dir, config=config) as core:  # type: ignore[arg-type]
        ino = await core.ino("d.md")
        with pytest.raises(Exception) as raised:
            await core.vfs.descriptions.set(ino, DESCRIPTION, b"x")
        assert errno_of(raised.value) == errno.EROFS


async def test_memory_stores_memories_have_no_description(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    async with running_core(store, cache_dir) as core:
        assert not core.vfs.descriptions.enabled  # fuse_ops answers ENOSYS
        await core.save("m.md", b"x\n")
        await core.vfs.fsync_dir()
    assert "description" not in store.writes[-1][1]  # never sent to an API without them


async def test_versions_are_off_on_a_databricks_store(
    autojump_clock: MockClock, cache_dir: Path
) -> None:
    api = FakeDatabricks()
    async with running_core(adapter(api), cache_dir) as core:  # type: ignore[arg-type]
        assert not core.vfs.versions.config.enabled


async def test_changes_elsewhere_are_found_by_comparing_listings(
    autojump_clock: MockClock, cache_dir: Path
) -> None:
    api = FakeDatabricks()
    kept = api.put(ACTOR, "/kept.md", "one\n")
    gone = api.put(ACTOR, "/gone.md", "bye\n")
    store = adapter(api)
    assert (await store.recent_changes(since=None, limit=1)).data == []  # the starting point
    api.edit(kept.id, content="two\n")
    api.entries.pop(gone.id)
    new = api.put(ACTOR, "/new.md", "hi\n")
    api.put(ACTOR, "/other-session.md", "x\n", session="s9")
    page = await store.recent_changes(since=None, limit=100)
    got = {(v.memory_id, v.operation, v.content_sha256) for v in page.data}
    assert got == {
        (kept.id, "modified", sha256_hex("two\n")),
        (gone.id, "deleted", None),
        (new.id, "created", sha256_hex("hi\n")),
    }
    times = [v.created_at for v in page.data]
    assert times == sorted(times, reverse=True) and len(set(times)) == 3
    since = page.data[0].created_at
    assert (await store.recent_changes(since=since, limit=100)).data == [page.data[0]]
    assert (await store.recent_changes(since=since, limit=100)).next_page is None


async def test_a_directory_rename_moves_every_entry_below_it(
    autojump_clock: MockClock, cache_dir: Path
) -> None:
    api = FakeDatabricks()
    one = api.put(ACTOR, "/d/one.md", "1\n", description="first")
    api.put(ACTOR, "/d/sub/two.md", "2\n")
    async with running_core(adapter(api), cache_dir) as core:  # type: ignore[arg-type]
        d = await core.ino("d")
        node = core.vfs.parts.state.table.get(await core.ino("one.md", d))
        await core.vfs.rename(ROOT_INODE, "d", ROOT_INODE, "e")
        assert sorted(n for n, _ in await core.vfs.readdir(await core.ino("e"))) == [
            "one.md",
            "sub",
        ]
        await core.save("one.md", b"1, again\n", await core.ino("e"))
        await core.vfs.fsync_dir()
        moved = api.at(ACTOR, "/e/one.md")
        assert moved is not None and node is not None and node.memory_id == moved.id
        assert core.vfs.parts.durable.conflict_count == 0
    assert sorted((e.path, e.content, e.description) for e in api.entries.values()) == [
        ("/e/one.md", "1, again\n", "first"),
        ("/e/sub/two.md", "2\n", ""),
    ]
    assert one.id not in api.entries


async def test_a_description_set_with_a_save_that_lost_the_race_still_reaches_the_entry(
    autojump_clock: MockClock, cache_dir: Path
) -> None:
    api = FakeDatabricks()
    entry = api.put(ACTOR, "/c.md", "base\n")
    async with running_core(adapter(api), cache_dir) as core:  # type: ignore[arg-type]
        ino = await core.save("c.md", b"mine\n")
        await core.vfs.descriptions.set(ino, DESCRIPTION, b"why it matters")
        api.edit(entry.id, content="theirs\n")
        with pytest.raises(RemoteConflictError):
            await core.vfs.fsync_dir()
        await core.vfs.fsync_dir()
        assert core.records() == []
    assert (api.entries[entry.id].content, api.entries[entry.id].description) == (
        "theirs\n",
        "why it matters",
    )


# -- a delete or a rename racing a write made through the API: the remote change wins ----------


async def test_a_delete_racing_an_api_write_leaves_the_entry_and_it_reappears(
    autojump_clock: MockClock, cache_dir: Path
) -> None:
    """The adapter's precondition on delete (docs/semantics.md, "Databricks stores"): the
    entry is read right before the DELETE; changed since it was removed here, it is kept."""
    api = FakeDatabricks()
    entry = api.put(ACTOR, "/d.md", "base\n")
    async with running_core(adapter(api), cache_dir) as core:  # type: ignore[arg-type]
        await core.vfs.unlink(ROOT_INODE, "d.md")
        api.before_next("get_entry", lambda api: api.edit(entry.id, content="theirs\n"))
        await core.vfs.fsync_dir()
        assert api.calls["delete_entry"] == 0
        assert await core.read("d.md") == b"theirs\n"  # it reappears with the winner
        assert core.records() == []
    assert api.entries[entry.id].content == "theirs\n"


async def test_a_rename_racing_an_api_write_moves_the_winners_content(
    autojump_clock: MockClock, cache_dir: Path
) -> None:
    """A rename is a create at the new path with the content read right before it, then a
    delete of the old entry: the API's write moves along, nothing is lost."""
    api = FakeDatabricks()
    entry = api.put(ACTOR, "/m.md", "base\n", description="kept")
    async with running_core(adapter(api), cache_dir) as core:  # type: ignore[arg-type]
        await core.vfs.rename(ROOT_INODE, "m.md", ROOT_INODE, "n.md")
        api.before_next("get_entry", lambda api: api.edit(entry.id, content="theirs\n"))
        await core.vfs.fsync_dir()
        assert core.vfs.parts.durable.conflict_count == 0
        assert await core.read("n.md") == b"theirs\n"
    assert [(e.path, e.content, e.description) for e in api.entries.values()] == [
        ("/n.md", "theirs\n", "kept")
    ]


async def test_a_rename_with_new_content_racing_an_api_write_is_a_conflict(
    autojump_clock: MockClock, cache_dir: Path
) -> None:
    """The local content was based on the old one: the winner is moved to the new path, the
    local content becomes a conflict copy, and the writer hears ESTALE."""
    api = FakeDatabricks()
    entry = api.put(ACTOR, "/m.md", "base\n")
    async with running_core(adapter(api), cache_dir) as core:  # type: ignore[arg-type]
        await core.vfs.rename(ROOT_INODE, "m.md", ROOT_INODE, "n.md")
        fh, _ = await core.vfs.open(await core.ino("n.md"), os.O_WRONLY | os.O_TRUNC)
        await core.vfs.write(fh, 0, b"mine\n")
        api.edit(entry.id, content="theirs\n")
        with pytest.raises(RemoteConflictError) as raised:
            await core.vfs.fsync(fh)
        assert errno_of(raised.value) == errno.ESTALE
        await core.vfs.release(fh)
        assert await core.vfs.flush_all() == []
        assert core.vfs.parts.durable.conflict_count == 1
        assert await core.read("n.md") == b"theirs\n"
    contents = {e.path: e.content for e in api.entries.values()}
    copies = [p for p in contents if p.startswith("/n.conflict-")]
    assert [contents[p] for p in copies] == ["mine\n"]
    assert contents == {"/n.md": "theirs\n", copies[0]: "mine\n"}


async def test_a_write_made_through_the_api_while_a_rename_moves_the_entry_is_kept(
    autojump_clock: MockClock, cache_dir: Path
) -> None:
    """The API changes the old entry after the move read it (between the create at the new path
    and the delete of the old one): the old entry is not deleted, the change wins and shows
    at the old path again; only a change inside the last read-to-delete round trip is lost."""
    api = FakeDatabricks()
    entry = api.put(ACTOR, "/m.md", "base\n")
    async with running_core(adapter(api), cache_dir) as core:  # type: ignore[arg-type]
        await core.vfs.rename(ROOT_INODE, "m.md", ROOT_INODE, "n.md")
        api.before_next("create_entry", lambda api: api.edit(entry.id, content="theirs\n"))
        await core.vfs.fsync_dir()
        assert api.calls["delete_entry"] == 0
        assert await core.read("n.md") == b"base\n"
        await core.vfs.resync()
        assert await core.read("m.md") == b"theirs\n"
    assert sorted((e.path, e.content) for e in api.entries.values()) == [
        ("/m.md", "theirs\n"),
        ("/n.md", "base\n"),
    ]


async def test_a_truncate_adding_nuls_fails_at_once_by_path_or_descriptor(
    autojump_clock: MockClock, cache_dir: Path
) -> None:
    """Issue 20 item 11: truncate(2) and ftruncate(2) alike: extending a file with NULs, which
    the API refuses, is EINVAL at once and changes nothing, the file open or not."""
    api = FakeDatabricks()
    api.put(ACTOR, "/a.md", "a\n")
    async with running_core(adapter(api), cache_dir) as core:  # type: ignore[arg-type]
        vfs = core.vfs
        ino = await core.ino("a.md")
        fh, _ = await vfs.open(ino, os.O_RDWR)
        for open_by in (fh, None):  # ftruncate, then truncate(path) of the file still open
            with pytest.raises(Exception) as raised:
                await vfs.setattr(ino, size=10, fh=open_by)
            assert errno_of(raised.value) == errno.EINVAL
            assert (await vfs.getattr(ino)).size == 2
        await vfs.release(fh)  # nothing changed: a clean close
        with pytest.raises(Exception) as raised:
            await vfs.setattr(ino, size=10)  # truncate(path), nobody has it open
        assert errno_of(raised.value) == errno.EINVAL
        assert await core.read("a.md") == b"a\n"


async def test_a_session_less_search_on_a_workspace_uses_the_mounts_own_index() -> None:
    """A Databricks workspace cannot search the session-less entries alone (no session means
    the whole actor), so a mount without a session searches them with its own index: every one
    of them can be found, none of another session's or actor's, and a change made elsewhere is
    seen by the next search."""
    api = FakeDatabricks()
    mine = api.put(ACTOR, "/mine.md", "one tomato among many other words of a long text")
    for i in range(101):
        api.put(ACTOR, f"/s/{i}.md", "tomato tomato tomato", session="s1")
    api.put("bob", "/bob.md", "tomato tomato")
    search = StoreSearch(adapter(api))
    assert [hit.path for hit in await search.search("tomato")] == ["/mine.md"]
    assert search.by_server is False and api.calls["capabilities"] == 1
    api.edit(mine.id, content="now about a potato")
    assert await search.search("tomato") == []
    assert [hit.path for hit in await search.search("potato")] == ["/mine.md"]
