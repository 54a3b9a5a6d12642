"""One journal record per commit (docs/writeback.md, "Costs"): a close writes its record once
(one file fsync, one directory fsync), and content already journaled unchanged is never
journaled again: flush and release of one save, an fsync after it, a retry of the same state."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from memfs.core.model.inodes import ROOT_INODE
from memfs.writeback.journal import Journal

from .helpers import Core


@pytest.fixture
def journal(core: Core, tmp_path: Path) -> Iterator[Journal]:
    journal = Journal.open(tmp_path, core.vfs.store_id)
    core.vfs.parts.durable.journal = journal
    try:
        yield journal
    finally:
        core.vfs.parts.durable.journal = None
        journal.close()


async def test_a_close_journals_once_and_an_fsync_after_it_not_again(
    core: Core, journal: Journal
) -> None:
    vfs = core.vfs
    fh, attr = await vfs.create(ROOT_INODE, "new.md", os.O_WRONLY | os.O_CREAT)
    await vfs.write(fh, 0, b"first\n")
    await vfs.flush(fh)
    await vfs.release(fh)
    assert journal.writes == 1  # a new file: one record

    # another save of that file, with a changed content: one more record
    fh, _ = await vfs.open(attr.ino, os.O_WRONLY | os.O_TRUNC)
    await vfs.write(fh, 0, b"second\n")
    await vfs.flush(fh)
    await vfs.release(fh)
    assert journal.writes == 2

    # an fsync of a file already closed (and journaled): nothing new to journal
    fh, _ = await vfs.open(attr.ino, os.O_WRONLY)
    await vfs.fsync(fh)
    await vfs.flush(fh)
    await vfs.release(fh)
    assert journal.writes == 2

    # write, fsync, then close (what careful editors do): the fsync's record is the close's
    fh, _ = await vfs.open(attr.ino, os.O_WRONLY | os.O_TRUNC)
    await vfs.write(fh, 0, b"third\n")
    await vfs.fsync(fh)
    await vfs.flush(fh)
    await vfs.release(fh)
    assert journal.writes == 3
    assert (await core.memories())["/new.md"].content_sha256 is not None
    assert await core.read(ROOT_INODE, "new.md") == b"third\n"


async def test_a_save_of_an_existing_memory_journals_once(core: Core, journal: Journal) -> None:
    vfs = core.vfs
    await core.client.create_memory(vfs.store_id, "/old.md", "from the server\n")
    ino = await core.ino(ROOT_INODE, "old.md")
    fh, _ = await vfs.open(ino, os.O_WRONLY | os.O_TRUNC)
    await vfs.write(fh, 0, b"edited\n")
    await vfs.flush(fh)
    await vfs.release(fh)
    assert journal.writes == 1
    await vfs.fsync_dir()  # uploaded: the record is dropped
    assert journal.load() == []
    memory = (await core.memories())["/old.md"]
    assert (await core.client.get_memory(vfs.store_id, memory.id)).content == "edited\n"

    fh, _ = await vfs.open(ino, os.O_WRONLY | os.O_APPEND)
    await vfs.write(fh, 7, b"again\n")
    await vfs.flush(fh)
    await vfs.release(fh)
    assert journal.writes == 2


async def test_work_queued_again_for_the_same_state_is_not_journaled_again(
    core: Core, journal: Journal
) -> None:
    """The queue re-queues a key for a retry (room in a full store, the final flush): its
    record on disk already says it."""
    vfs = core.vfs
    fh, attr = await vfs.create(ROOT_INODE, "again.md", os.O_WRONLY | os.O_CREAT)
    await vfs.write(fh, 0, b"once\n")
    await vfs.flush(fh)
    assert journal.writes == 1
    vfs.parts.writeback.schedule(attr.ino, 0)
    vfs.parts.writeback.schedule(attr.ino, 0, debounce=True)
    assert journal.writes == 1
    await vfs.release(fh)
    await vfs.fsync_dir()
    assert journal.writes == 1 and journal.load() == []
