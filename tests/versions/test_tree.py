"""The .versions tree on the real server, without FUSE: views, history, redactions, requests."""

from __future__ import annotations

import os
import stat
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
import trio

from memfs.api import StoreClient
from memfs.api.store import MemoryStoresAPI
from memfs.contract.errors import AccessDeniedError, NoEntryError, ReadOnlyError
from memfs.contract.models import MemoryVersion
from memfs.core.model.inodes import ROOT_INODE
from memfs.versions.names import parse_instant, stamp
from memfs.versions.tree import VersionCache, VersionsConfig, VersionsTree


@dataclass
class Story:
    """A store with a known history: create, modify, rename, delete, redact."""

    tree: VersionsTree
    client: StoreClient
    store_id: str
    versions: list[MemoryVersion]  # oldest first
    before: datetime  # before the first version

    async def ino(self, *names: str) -> int:
        ino = ROOT_INODE
        for name in (".versions", *names):
            ino = (await self.tree.lookup(ino, name)).ino
        return ino

    async def ls(self, *names: str) -> list[str]:
        return [name for name, _ in await self.tree.readdir(await self.ino(*names))]

    async def cat(self, *names: str) -> str:
        fh, _ = await self.tree.open(await self.ino(*names), os.O_RDONLY)
        try:
            return (await self.tree.read(fh, 0, 1 << 20)).decode()
        finally:
            await self.tree.release(fh)

    def at(self, index: int) -> str:
        return stamp(self.versions[index].created_at)


@pytest.fixture
async def story(client: StoreClient) -> Story:
    store = await client.create_store(f"versions-{uuid.uuid4().hex[:8]}")
    sid = store.id
    before = (await client.get_store(sid)).created_at - timedelta(seconds=1)
    todo = await client.create_memory(sid, "/notes/todo.md", "secret v1")  # 0
    other = await client.create_memory(sid, "/a.md", "A")  # 1
    await client.update_memory(sid, todo.id, content="todo v2")  # 2
    await client.update_memory(sid, other.id, path="/b.md")  # 3
    await client.delete_memory(sid, todo.id)  # 4
    versions = [v async for v in client.list_versions(sid, limit=100)][::-1]
    await client.redact_version(sid, versions[0].id)
    config = VersionsConfig(settled_after=0.0, refresh_interval=0.0, recheck=60.0)
    return Story(VersionsTree(MemoryStoresAPI(client, sid), config), client, sid, versions, before)


async def test_point_in_time_views(story):
    assert await story.ls(stamp(story.before)) == []  # before the store existed: empty
    assert await story.ls(story.at(1)) == ["a.md", "notes"]
    assert await story.ls(story.at(1), "notes") == ["todo.md"]
    assert await story.cat(story.at(2), "notes", "todo.md") == "todo v2"
    assert await story.cat(story.at(2), "a.md") == "A"
    # renamed: at the old path before, at the new one after
    assert await story.ls(story.at(3)) == ["b.md", "notes"]
    with pytest.raises(NoEntryError):
        await story.ino(story.at(3), "a.md")
    # deleted: absent from then on
    assert await story.ls(story.at(4)) == ["b.md"]
    # any spelling of an instant works; between changes shows the earlier state
    between = (
        story.versions[2].created_at
        + (story.versions[3].created_at - story.versions[2].created_at) / 2
    )
    iso = between.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert await story.ls(iso) == ["a.md", "notes"]
    assert await story.ls("-0s") == ["b.md"]


async def test_redacted_version_listed_but_unreadable(story):
    view = story.at(0)
    assert await story.ls(view, "notes") == ["todo.md"]
    attr = await story.tree.getattr(await story.ino(view, "notes", "todo.md"))
    assert stat.S_IMODE(attr.mode) == 0
    with pytest.raises(AccessDeniedError, match="redacted"):
        await story.cat(view, "notes", "todo.md")


async def test_timeline_lists_every_change(story):
    names = await story.ls()
    stamps = [story.at(i) for i in range(5)]
    assert names == [*stamps, "history", "log.txt"]
    assert [parse_instant(s) for s in stamps] == [v.created_at for v in story.versions]
    log = await story.cat("log.txt")
    lines = log.splitlines()
    assert len(lines) == 5
    assert lines[0].startswith(stamps[0]) and "created" in lines[0] and "redacted" in lines[0]
    assert "/b.md" in lines[3] and "deleted" in lines[4]
    assert "secret v1" not in log


async def test_history_per_path(story):
    assert await story.ls("history") == ["a.md", "b.md", "notes"]
    names = await story.ls("history", "notes", "todo.md")
    assert [n.split("Z-", 1)[1].split("-")[0] for n in names[:-1]] == [
        "created",
        "modified",
        "deleted",
    ]
    assert names[0].endswith("-redacted") and names[-1] == "log.txt"
    assert names[:-1] == sorted(names[:-1])  # oldest first
    assert names[1].startswith(story.at(2) + "-modified-api-")
    assert await story.cat("history", "notes", "todo.md", names[1]) == "todo v2"
    assert await story.cat("history", "notes", "todo.md", names[2]) == ""  # deleted
    with pytest.raises(AccessDeniedError):
        await story.cat("history", "notes", "todo.md", names[0])
    a_names = await story.ls("history", "a.md")
    assert ["created" in a_names[0], "renamed-out" in a_names[1]] == [True, True]
    assert await story.cat("history", "a.md", a_names[1]) == "A"
    b_names = await story.ls("history", "b.md")
    assert "renamed-in" in b_names[0]
    details = await story.cat("history", "b.md", "log.txt")
    assert "renamed from /a.md" in details and story.versions[3].id in details


async def test_every_change_is_refused(story):
    ino = await story.ino(story.at(2), "notes", "todo.md")
    for flags in (os.O_WRONLY, os.O_RDWR, os.O_RDONLY | os.O_TRUNC):
        with pytest.raises(ReadOnlyError):
            await story.tree.open(ino, flags)
    with pytest.raises(NoEntryError):
        await story.ino("not-a-time")


async def test_requests(story):
    story.tree.index.refresh_interval = 60.0  # "anything new?" at most once a minute here
    stats = story.client.stats
    before = stats.total
    await story.ls(story.at(2))
    assert stats.total - before == 1  # the whole history fits one page
    before = stats.total
    await story.ls(story.at(3))  # another instant in the past: nothing new to ask
    await story.ls(story.at(1), "notes")
    assert stats.total - before == 0
    before = stats.total
    assert await story.cat(story.at(2), "notes", "todo.md") == "todo v2"
    assert stats.total - before == 1  # the content (the full listing just covered the memory)
    before = stats.total
    assert (
        await story.cat(
            "history", "notes", "todo.md", (await story.ls("history", "notes", "todo.md"))[1]
        )
        == "todo v2"
    )
    assert stats.total - before == 0  # same content, memory re-listed recently


async def test_redaction_made_after_the_content_was_cached(story):
    story.tree.config.recheck = 0.0
    b_view = story.at(3)
    assert await story.cat(story.at(1), "a.md") == "A"
    # /b.md's rename version is head now; write a new one, then redact the old head
    memory_id = story.versions[3].memory_id
    await story.client.update_memory(story.store_id, memory_id, content="B2")
    await story.client.redact_version(story.store_id, story.versions[3].id)
    with pytest.raises(AccessDeniedError):
        await story.cat(b_view, "b.md")
    # the created version was not redacted and is still served (same sha, from the cache)
    assert await story.cat(story.at(1), "a.md") == "A"


def test_cache_is_bounded_by_bytes():
    cache = VersionCache(max_bytes=100)
    for i in range(10):
        cache.put(f"sha{i}", b"x" * 30)
    assert cache.size <= 100
    assert cache.get("sha9") == b"x" * 30
    assert cache.get("sha0") is None
    cache.put("big", b"y" * 101)
    assert cache.get("big") is None


async def test_redaction_learnt_by_listing_a_history_directory(story):
    story.tree.index.refresh_interval = 60.0
    story.tree.config.recheck = 0.5
    names = await story.ls("history", "notes", "todo.md")
    hdir = await story.ino("history", "notes", "todo.md")
    old = await story.ino("history", "notes", "todo.md", names[1])
    assert "-modified-" in names[1] and not names[1].endswith("-redacted")
    await story.client.redact_version(story.store_id, story.versions[2].id)
    # deliberate: step outside the ``recheck`` window, so the next listing re-lists this
    # memory (a loaded machine only sleeps longer, which keeps it outside)
    await trio.sleep(0.6)
    stats = story.client.stats
    before = stats.total
    after = await story.ls("history", "notes", "todo.md")
    assert stats.total - before == 1  # that memory's versions only, not the whole history
    assert after[1] == names[1] + "-redacted"
    attr = await story.tree.getattr(await story.ino("history", "notes", "todo.md", after[1]))
    assert stat.S_IMODE(attr.mode) == 0
    with pytest.raises(NoEntryError):  # the old name is gone
        await story.ino("history", "notes", "todo.md", names[1])
    assert stat.S_IMODE((await story.tree.getattr(old)).mode) == 0  # a held inode too
    with pytest.raises(AccessDeniedError):
        await story.cat("history", "notes", "todo.md", after[1])
    assert "todo v2" not in await story.cat("history", "notes", "todo.md", "log.txt")
    # the kernel is told to forget the old name and the held inode's attributes
    queued = story.tree.take_invalidations()
    assert ("entry", hdir, names[1].encode()) in queued and ("inode", old, b"") in queued
    assert story.tree.take_invalidations() == []


async def test_redaction_learnt_by_views_and_the_log(story):
    index = story.tree.index
    index.refresh_interval = 60.0
    view = story.at(2)
    assert await story.cat(view, "notes", "todo.md") == "todo v2"
    file = await story.ino(view, "notes", "todo.md")
    await story.client.redact_version(story.store_id, story.versions[2].id)
    stats = story.client.stats
    before = stats.total
    await story.ls(view, "notes")  # a full listing is not due yet: nothing asked
    assert stats.total - before == 0
    assert stat.S_IMODE((await story.tree.getattr(file)).mode) == 0o644
    index.swept_at -= 60.0  # as if the sweep interval had passed
    assert await story.ls(view, "notes") == ["todo.md"]  # listed, as redacted versions are
    assert stats.total - before == 1  # one page: the whole (short) history
    assert stat.S_IMODE((await story.tree.getattr(file)).mode) == 0
    with pytest.raises(AccessDeniedError):
        await story.cat(view, "notes", "todo.md")
    lines = (await story.cat("log.txt")).splitlines()
    assert "redacted at" in lines[2] and "todo v2" not in lines[2]


def test_sweep_interval_grows_with_the_history():
    index = VersionsTree(None).index  # type: ignore[arg-type]  # never asks
    assert index.sweep_due() == 2.0
    index.swept_pages = 30  # 3,000 versions: at most one full listing every 30 s
    assert index.sweep_due() == 30.0
