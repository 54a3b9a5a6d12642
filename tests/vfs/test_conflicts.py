"""Conflicts in the core (no FUSE): whoever loses a race is re-based on the winner, and no upload
ever goes out without the precondition of the content its writer saw."""

from __future__ import annotations

import os

import pytest

from memfs.errors import RemoteConflictError
from memfs.inodes import ROOT_INODE

from .conftest import Core


async def test_lost_create_race_shows_the_winner_and_keeps_ours_as_a_copy(core: Core) -> None:
    vfs = core.vfs
    fh, attr = await vfs.create(ROOT_INODE, "race.md", os.O_WRONLY | os.O_CREAT)
    await vfs.write(fh, 0, b"mine\n")
    await core.client.create_memory(vfs.store_id, "/race.md", "theirs\n")  # made elsewhere first
    await vfs.flush(fh)
    await vfs.release(fh)
    with pytest.raises(RemoteConflictError):
        await vfs.fsync_dir()
    memories = await core.memories()
    assert [m.path for m in memories.values()].count("/race.md") == 1
    [copy] = [p for p in memories if p.startswith("/race.conflict-")]
    assert (await core.client.get_memory(vfs.store_id, memories[copy].id)).content == "mine\n"
    # the local file is now the winner's memory: same inode, its content, its sha as base
    node = vfs.table.get(attr.ino)
    assert node is not None and node.memory_id == memories["/race.md"].id
    assert await core.read(ROOT_INODE, "race.md") == b"theirs\n"
    fh, _ = await vfs.open(attr.ino, os.O_WRONLY | os.O_APPEND)
    await vfs.write(fh, 0, b"and mine\n")
    with pytest.raises(RemoteConflictError):  # the conflict is reported to a writer once
        await vfs.fsync(fh)
    await vfs.fsync(fh)
    await vfs.release(fh)
    winner = await core.client.get_memory(vfs.store_id, memories["/race.md"].id)
    assert winner.content == "theirs\nand mine\n"
