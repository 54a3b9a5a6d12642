"""The local budget of a mount (memfs.core.model.budget): local-only files, refused content and kept
copies are charged; past the budget creates and growing writes get ENOSPC; removing the files
frees it; refused content of a closed file lives in its kept copy, not in memory."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from kit.fake_store import FakeStore
from memfs.contract.errors import ApiConnectionError, FileTooLargeError, NoSpaceError, NotUtf8Error
from memfs.contract.store_api import Capabilities
from memfs.core.build import build_core
from memfs.core.model.budget import NODE_BYTES
from memfs.core.model.inodes import ROOT_INODE
from memfs.core.ops.vfs import Vfs

from .helpers import CONFIG, running_core

LIMIT = 20_000
NEW = os.O_WRONLY | os.O_CREAT | os.O_TRUNC


@asynccontextmanager
async def budget_core(
    store: FakeStore, kept: Path | None, limit: int = LIMIT
) -> AsyncIterator[Vfs]:
    vfs = build_core(store, dataclasses.replace(CONFIG, local_bytes=limit), kept_dir=kept)
    async with trio.open_nursery() as nursery:
        await nursery.start(vfs.parts.writeback.run)
        yield vfs
        nursery.cancel_scope.cancel()


async def write_new(vfs: Vfs, name: str, data: bytes) -> int:
    """``printf data > name``: returns the inode; raises what write or close raised."""
    fh, attr = await vfs.create(ROOT_INODE, name, NEW)
    try:
        await vfs.write(fh, 0, data)
        await vfs.flush(fh)
    finally:
        await vfs.release(fh)
    return attr.ino


async def read(vfs: Vfs, ino: int) -> bytes:
    fh, _ = await vfs.open(ino, os.O_RDONLY)
    try:
        return await vfs.read(fh, 0, 1 << 20)
    finally:
        await vfs.release(fh)


async def test_local_only_files_are_charged_until_removed(
    store: FakeStore, autojump_clock: trio.abc.Clock
) -> None:
    async with budget_core(store, None) as vfs:
        await write_new(vfs, "a~", b"a" * 6000)
        await write_new(vfs, "b~", b"b" * 6000)
        assert vfs.local_bytes == 2 * (6000 + NODE_BYTES)
        fh, _ = await vfs.create(ROOT_INODE, "c~", NEW)  # room for the name
        with pytest.raises(NoSpaceError):  # not for its content
            await vfs.write(fh, 0, b"c" * 6000)
        await vfs.write(fh, 0, b"c" * 1800)  # what fits is written
        await vfs.release(fh)
        assert vfs.local_bytes == 3 * NODE_BYTES + 13_800 and vfs.parts.budget.enospc == 1
        with pytest.raises(NoSpaceError):  # a truncate that grows is a write
            await vfs.setattr((await vfs.lookup(ROOT_INODE, "c~")).ino, size=4000)
        with pytest.raises(NoSpaceError):  # a directory is a name too
            await vfs.mkdir(ROOT_INODE, "d")
        await vfs.unlink(ROOT_INODE, "a~")
        assert vfs.local_bytes == 2 * NODE_BYTES + 7800
        await vfs.mkdir(ROOT_INODE, "d")  # the room is back
        await write_new(vfs, "d~", b"d" * 4000)
        assert vfs.local_bytes == 4 * NODE_BYTES + 11_800
        await vfs.rmdir(ROOT_INODE, "d")
        assert vfs.local_bytes == 3 * NODE_BYTES + 11_800


async def test_past_the_budget_every_create_and_growing_write_is_enospc(
    store: FakeStore, autojump_clock: trio.abc.Clock
) -> None:
    store.seed("/memory.md", "short\n")
    async with budget_core(store, None) as vfs:
        memory = (await vfs.lookup(ROOT_INODE, "memory.md")).ino
        await write_new(vfs, "fill~", b"f" * (LIMIT - NODE_BYTES))
        assert vfs.local_bytes == LIMIT and vfs.parts.budget.full
        assert (await vfs.statfs())["f_bavail"] == 0  # df agrees
        for attempt in (
            write_new(vfs, "new.md", b"text\n"),
            vfs.mkdir(ROOT_INODE, "dir"),
            vfs.symlink(ROOT_INODE, "link~", b"target"),
            vfs.setattr(memory, size=100),
        ):
            with pytest.raises(NoSpaceError):
                await attempt
        fh, _ = await vfs.open(memory, os.O_WRONLY)
        await vfs.write(fh, 0, b"SHORT\n")  # overwriting without growing is fine
        with pytest.raises(NoSpaceError):
            await vfs.write(fh, 6, b"more\n")
        await vfs.flush(fh)
        await vfs.release(fh)
        await vfs.setattr(memory, size=2)  # so is shrinking
        await vfs.unlink(ROOT_INODE, "fill~")
        assert vfs.local_bytes == 0 and not vfs.parts.budget.full
        assert (await vfs.statfs())["f_bavail"] > 0
        await write_new(vfs, "new.md", b"text\n")
        await vfs.fsync_dir()
    assert store.contents() == {"/memory.md": "SH", "/new.md": "text\n"}


async def test_a_file_counts_while_it_is_written_open(
    store: FakeStore, autojump_clock: trio.abc.Clock
) -> None:
    async with budget_core(store, None) as vfs:
        handles = [(await vfs.create(ROOT_INODE, f"f{i}.md", NEW))[0] for i in range(3)]
        for fh in handles[:2]:
            await vfs.write(fh, 0, b"x" * 9000)
        with pytest.raises(NoSpaceError):  # many open files are not a way around the budget
            await vfs.write(handles[2], 0, b"x" * 9000)
        assert vfs.local_bytes == 18_000
        for fh in handles:
            await vfs.flush(fh)
            await vfs.release(fh)
        assert vfs.local_bytes == 0  # valid text: queued for the store, not counted
        await vfs.fsync_dir()
    assert store.contents() == {"/f0.md": "x" * 9000, "/f1.md": "x" * 9000, "/f2.md": ""}


async def test_refused_content_lives_in_its_kept_copy_once_closed(
    store: FakeStore, tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    kept = tmp_path / "kept"
    content = b"\xff\xfe" * 2000
    async with budget_core(store, kept) as vfs:
        with pytest.raises(NotUtf8Error):
            ino = await write_new(vfs, "bin.md", content)
        ino = (await vfs.lookup(ROOT_INODE, "bin.md")).ino
        node = vfs.parts.state.table.nodes[ino]
        assert node.data is None and node.kept_size == len(content)  # not in memory
        (copy,) = kept.iterdir()
        assert copy.read_bytes() == content
        assert (await vfs.getattr(ino)).size == len(content)
        assert await read(vfs, ino) == content  # read from the copy
        assert node.data is None and vfs.local_bytes == len(content)  # counted once
        with pytest.raises(NotUtf8Error):  # loaded to be checked, then out of memory again
            await vfs.rename(ROOT_INODE, "bin.md", ROOT_INODE, "moved.md")
        with pytest.raises(NotUtf8Error):  # likewise
            await vfs.setattr(ino, size=3)
        assert node.data is None
        fh, _ = await vfs.open(ino, os.O_WRONLY | os.O_APPEND)  # loaded back to be written
        await vfs.write(fh, 0, b"\xff")
        with pytest.raises(NotUtf8Error):
            await vfs.flush(fh)
        await vfs.release(fh)
        assert node.data is None and vfs.local_bytes == len(content) + 1
        assert vfs.parts.durable.refusals.status()["copies"] == {
            "/bin.md": str(next(kept.iterdir()))
        }
        await vfs.unlink(ROOT_INODE, "bin.md")
        assert list(kept.iterdir()) == [] and vfs.local_bytes == 0


async def test_a_closed_file_refused_as_too_large_moves_with_its_copy(
    store: FakeStore, tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    kept = tmp_path / "kept"
    limit = store.capabilities.max_content_bytes
    async with budget_core(store, kept, limit=2 * limit) as vfs:
        fh, attr = await vfs.create(ROOT_INODE, "big.md", NEW)
        await vfs.write(fh, 0, b"a" * limit)
        with pytest.raises(FileTooLargeError):
            await vfs.write(fh, limit, b"a")
        with pytest.raises(FileTooLargeError):
            await vfs.flush(fh)
        await vfs.release(fh)
        node = vfs.parts.state.table.nodes[attr.ino]
        assert node.data is None and vfs.local_bytes == limit
        await vfs.rename(ROOT_INODE, "big.md", ROOT_INODE, "moved.md")  # still refused
        (copy,) = kept.iterdir()
        assert copy.name.endswith("moved.md") and copy.read_bytes() == b"a" * limit
        assert node.data is None and await read(vfs, attr.ino) == b"a" * limit


async def test_copies_of_earlier_mounts_make_room_oldest_first(
    store: FakeStore, tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    kept = tmp_path / "kept"
    kept.mkdir(mode=0o700)
    for age, name in enumerate(("newest", "middle", "oldest")):
        (kept / name).write_bytes(b"x" * 8000)
        os.utime(kept / name, (1_000_000 - age, 1_000_000 - age))
    async with budget_core(store, kept) as vfs:
        # 24,000 bytes left by earlier mounts: the oldest goes at once, the next when needed
        assert sorted(p.name for p in kept.iterdir()) == ["middle", "newest"]
        assert vfs.local_bytes == 16_000
        await write_new(vfs, "a~", b"a" * 2000)
        assert sorted(p.name for p in kept.iterdir()) == ["newest"]
        assert vfs.local_bytes == 8000 + 2000 + NODE_BYTES


async def test_files_waiting_for_room_are_charged_until_uploaded_or_removed(
    autojump_clock: trio.abc.Clock,
) -> None:
    """In a full store new files wait for room in the daemon's memory (and its journal): each is
    charged its content and its name, so a local user cannot pile up files (empty ones
    included) without end; past the budget the next create or growing write is ENOSPC, before
    anything is accepted; what was accepted is never dropped; their upload (room in the store)
    or their removal frees the budget."""
    store = FakeStore(capabilities=Capabilities(max_memories=3))
    seeded = [store.seed(f"/seed-{i}.md", "x\n") for i in range(3)]  # full
    waiting = 6000 + NODE_BYTES  # what a new file of 6,000 bytes waiting for room costs
    async with budget_core(store, None) as vfs:
        for i in range(2):
            await write_new(vfs, f"w{i}.md", b"w" * 6000)
        assert vfs.local_bytes == 0  # queued: the store may well take them
        with pytest.raises(NoSpaceError):  # it refused them: they wait for room
            await vfs.fsync_dir()
        assert len(vfs.waiting_for_room) == 2
        assert vfs.local_bytes == 2 * waiting and not vfs.parts.budget.full
        # the store is known to be full: a new file is charged from its create on
        fh, _ = await vfs.create(ROOT_INODE, "w2.md", NEW)
        assert vfs.local_bytes == 2 * waiting + NODE_BYTES
        with pytest.raises(NoSpaceError):  # would take the budget past its limit
            await vfs.write(fh, 0, b"w" * 6000)
        room = LIMIT - vfs.local_bytes
        await vfs.write(fh, 0, b"w" * room)  # what fits is accepted
        await vfs.flush(fh)
        await vfs.release(fh)
        assert vfs.local_bytes == LIMIT and vfs.parts.budget.full
        with pytest.raises(NoSpaceError):
            await vfs.fsync_dir()
        assert len(vfs.waiting_for_room) == 3 and vfs.local_bytes == LIMIT
        with pytest.raises(NoSpaceError):  # one more file that would wait, even empty
            await vfs.mknod(ROOT_INODE, "w3.md", mode=None, owner=None)
        w0 = (await vfs.lookup(ROOT_INODE, "w0.md")).ino
        with pytest.raises(NoSpaceError):  # a waiting file that would grow
            await vfs.setattr(w0, size=7000)
        assert vfs.parts.budget.enospc == 3 and (await vfs.statfs())["f_bavail"] == 0
        for name, size in (("w0.md", 6000), ("w1.md", 6000), ("w2.md", room)):
            ino = (await vfs.lookup(ROOT_INODE, name)).ino
            assert await read(vfs, ino) == b"w" * size  # nothing accepted was dropped
        await vfs.unlink(ROOT_INODE, "w0.md")  # removed: its charge goes
        assert vfs.local_bytes == LIMIT - waiting and not vfs.parts.budget.full
        await write_new(vfs, "w4.md", b"w" * 1000)  # room again
        assert vfs.local_bytes == LIMIT - waiting + 1000 + NODE_BYTES
        for memory in seeded:  # room in the store: the three are uploaded
            store.remove(memory.id)
        await vfs.fsync_dir()
        assert vfs.local_bytes == 0 and not vfs.waiting_for_room
    assert {p: len(c) for p, c in store.contents().items()} == {
        "/w1.md": 6000,
        "/w2.md": room,
        "/w4.md": 1000,
    }


async def test_files_retried_through_an_outage_are_charged_until_uploaded(
    store: FakeStore, autojump_clock: trio.abc.Clock
) -> None:
    """While the server is away, closed files wait in memory for their upload's retries: they
    are charged (an outage is no way around the budget), and once a request failed so is any
    file saved, from its create; a file in its first update delay while the server answers is
    not (a healthy store takes it within a second); uploaded, the charge goes."""
    store.fail_next("create", times=1000)  # unreachable until healed
    waiting = 6000 + NODE_BYTES
    async with budget_core(store, None) as vfs:
        inos = [await write_new(vfs, f"o{i}.md", b"o" * 6000) for i in range(2)]
        assert vfs.local_bytes == 0  # queued: the store may well take them
        for ino in inos:
            with pytest.raises(ApiConnectionError):  # the first attempt fails: retried
                await vfs.parts.writeback.flush(ino)
        assert vfs.local_bytes == 2 * waiting
        await write_new(vfs, "o2.md", b"o" * 1000)
        assert vfs.local_bytes == 2 * waiting + 1000 + NODE_BYTES  # the server is away
        with pytest.raises(NoSpaceError):
            await write_new(vfs, "o3.md", b"")
        store.heal()
        await vfs.fsync_dir()
        assert vfs.local_bytes == 0 and not vfs.parts.state.store_away
        await write_new(vfs, "o4.md", b"o" * 6000)
        assert vfs.local_bytes == 0  # back: queued, not charged
        await vfs.fsync_dir()
    assert {p: len(c) for p, c in store.contents().items()} == {
        "/o0.md": 6000,
        "/o1.md": 6000,
        "/o2.md": 1000,
        "/o4.md": 6000,
    }


async def test_a_replayed_journal_past_the_budget_is_charged_and_the_mount_goes_on(
    autojump_clock: trio.abc.Clock, tmp_path: Path
) -> None:
    """Files accepted by an earlier mount and still waiting for room are replayed whatever the
    budget (never dropped, the mount does not fail): charged, the budget reads full, and the
    next create is ENOSPC."""
    store = FakeStore(capabilities=Capabilities(max_memories=1))
    store.seed("/seed.md", "x\n")  # full
    async with running_core(store, tmp_path) as core:
        for i in range(4):
            await core.save(f"r{i}.md", b"r" * 8000)
        with pytest.raises(NoSpaceError):
            await core.vfs.fsync_dir()
        assert core.vfs.local_bytes == 4 * (8000 + NODE_BYTES)  # the default budget has room
    small = dataclasses.replace(CONFIG, local_bytes=LIMIT)
    async with running_core(store, tmp_path, config=small) as core:
        assert core.vfs.load_journal() == 4
        with pytest.raises(NoSpaceError):
            await core.vfs.fsync_dir()
        assert len(core.vfs.waiting_for_room) == 4
        assert core.vfs.local_bytes == 4 * (8000 + NODE_BYTES) and core.vfs.parts.budget.full
        assert [await core.read(f"r{i}.md") for i in range(4)] == [b"r" * 8000] * 4
        with pytest.raises(NoSpaceError):
            await core.save("r4.md", b"r")
        assert len(core.records()) == 4
