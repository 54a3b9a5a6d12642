"""A directory fsync tells the truth about uploads that failed in the background before it ran:
it returns 0 only when nothing it covers is left off the server (docs/semantics.md)."""

from __future__ import annotations

import os

import pytest

from kit.waiting import wait_until
from memfs.contract.errors import StoreArchivedError
from memfs.core.model.inodes import ROOT_INODE

from .helpers import Core


async def save(core: Core, ino: int, data: bytes) -> None:
    fh, _ = await core.vfs.open(ino, os.O_WRONLY | os.O_TRUNC)
    await core.vfs.write(fh, 0, data)
    await core.vfs.flush(fh)
    await core.vfs.release(fh)


async def test_a_background_failure_is_reported_until_the_file_is_on_the_server(
    core: Core,
) -> None:
    vfs = core.vfs
    first = await core.write_file(ROOT_INODE, "a.md", b"one\n")
    second = await core.write_file(ROOT_INODE, "b.md", b"one\n")
    await vfs.fsync_dir()
    await core.client.archive_store(vfs.store_id)
    await save(core, first, b"two\n")
    await save(core, second, b"two\n")
    # both updates fail in the background (the store is archived) before anyone fsyncs
    await wait_until(lambda: vfs.read_only and vfs.pending_uploads == 0)
    with pytest.raises(StoreArchivedError):
        await vfs.fsync_dir()
    # still not on the server: asked again, the answer is the same (the second file too, which
    # failed after the store was known to be archived, and kept its journal state)
    with pytest.raises(StoreArchivedError):
        await vfs.fsync_dir()
    for memory in (await core.memories()).values():  # nothing of "two" reached the store
        assert (await core.client.get_memory(vfs.store_id, memory.id)).content == "one\n"
