"""Conflicts in the core (no FUSE): whoever loses a race is re-based on the winner, and no upload
ever goes out without the precondition of the content its writer saw."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memfs.contract.errors import RemoteConflictError
from memfs.core.model.inodes import ROOT_INODE
from memfs.writeback.journal import Journal, Record

from .helpers import Core


async def test_lost_create_race_shows_the_winner_and_keeps_ours_as_a_copy(core: Core) -> None:
    vfs = core.vfs
    fh, attr = await vfs.create(ROOT_INODE, "race.md", os.O_WRONLY | os.O_CREAT)
    await vfs.write(fh, 0, b"mine\n")
    await core.client.create_memory(vfs.store_id, "/race.md", "theirs\n")  # made elsewhere first
    await vfs.flush(fh)
    with pytest.raises(RemoteConflictError):
        await vfs.fsync_dir()
    # the writer that was open when its upload lost hears it, once
    with pytest.raises(RemoteConflictError):
        await vfs.fsync(fh)
    await vfs.fsync(fh)
    await vfs.release(fh)
    memories = await core.memories()
    assert [m.path for m in memories.values()].count("/race.md") == 1
    [copy] = [p for p in memories if p.startswith("/race.conflict-")]
    assert (await core.client.get_memory(vfs.store_id, memories[copy].id)).content == "mine\n"
    # the local file is now the winner's memory: same inode, its content, its sha as base
    node = vfs.parts.state.table.get(attr.ino)
    assert node is not None and node.memory_id == memories["/race.md"].id
    assert await core.read(ROOT_INODE, "race.md") == b"theirs\n"
    fh, _ = await vfs.open(attr.ino, os.O_WRONLY | os.O_APPEND)
    await vfs.write(fh, 0, b"and mine\n")
    await vfs.fsync(fh)  # an open made after the conflict: not its to hear
    await vfs.release(fh)
    winner = await core.client.get_memory(vfs.store_id, memories["/race.md"].id)
    assert winner.content == "theirs\nand mine\n"


async def test_replayed_record_without_a_base_never_replaces_the_head(
    core: Core, tmp_path: Path
) -> None:
    """A record an older memfs wrote for a save after a conflict (no precondition) must not
    overwrite what another writer made: its content becomes a conflict copy."""
    vfs = core.vfs
    memory = await core.client.create_memory(vfs.store_id, "/old.md", "the head\n")
    journal = Journal.open(tmp_path, vfs.store_id)
    try:
        record = Record(name="older-n5", op="put", path="/old.md", memory_id=memory.id)
        record.remote_path, record.data = "/old.md", b"written blind\n"
        journal.put(record)
        vfs.parts.durable.journal = journal
        assert vfs.load_journal() == 1
        with pytest.raises(RemoteConflictError):
            await vfs.fsync_dir()
        memories = await core.memories()
        head = await core.client.get_memory(vfs.store_id, memory.id)
        assert head.content == "the head\n"
        [copy] = [p for p in memories if p.startswith("/old.conflict-")]
        copied = await core.client.get_memory(vfs.store_id, memories[copy].id)
        assert copied.content == "written blind\n"
        assert journal.load() == []
    finally:
        vfs.parts.durable.journal = None
        journal.close()
