"""Helpers of the FUSE-free core tests on a ``FakeStore``: ``Core`` and ``running_core``.

A ``Core`` is what a mount daemon holds: a core built by ``build_core``, its write-back journal
in ``cache_dir`` and (unless stopped) its write-back queue running. Leaving ``running_core``
releases the journal's slot and keeps its records, as the kernel does for a daemon killed with
``kill -9``: a "crash" is a core left with records on disk, replayed by the next core opened on
the same ``cache_dir`` (``Durable.load``, then the queue, as ``memfs.mount.daemon`` does).

The tests run on trio's autojump clock (the ``autojump_clock`` fixture of pytest-trio): delays,
grace windows and retry backoffs of the queue pass in virtual time, at once.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from kit.fake_store import FakeStore
from memfs.core.build import build_core
from memfs.core.model.inodes import ROOT_INODE
from memfs.core.ops.vfs import Vfs, VfsConfig
from memfs.writeback.journal import Journal, Record

# the daemon's delays, short enough to read a test by; fsync patience in virtual seconds
CONFIG = VfsConfig(grace=2.0, update_delay=0.5, new_file_delay=1.0, fsync_timeout=30.0)


class Core:
    def __init__(self, vfs: Vfs, journal: Journal, store: FakeStore) -> None:
        self.vfs = vfs
        self.journal = journal
        self.store = store

    async def ino(self, name: str, parent: int = ROOT_INODE) -> int:
        return (await self.vfs.lookup(parent, name)).ino

    async def save(self, name: str, data: bytes, parent: int = ROOT_INODE) -> int:
        """What ``echo data > name`` does: open (creating it) truncated, write, close."""
        fh, attr = await self.vfs.create(parent, name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        await self.vfs.write(fh, 0, data)
        await self.vfs.flush(fh)
        await self.vfs.release(fh)
        return attr.ino

    async def read(self, name: str, parent: int = ROOT_INODE) -> bytes:
        fh, _ = await self.vfs.open(await self.ino(name, parent), os.O_RDONLY)
        try:
            return await self.vfs.read(fh, 0, 1 << 20)
        finally:
            await self.vfs.release(fh)

    def records(self) -> list[Record]:
        return self.journal.load()

    def conflict_copies(self, stem: str) -> dict[str, str]:
        """Content by path of the store's conflict copies of ``/<stem>...``."""
        prefix = f"/{stem}.conflict-"
        return {p: c for p, c in self.store.contents().items() if p.startswith(prefix)}


@asynccontextmanager
async def running_core(
    store: FakeStore, cache_dir: Path, *, queue: bool = True, config: VfsConfig = CONFIG
) -> AsyncIterator[Core]:
    """A core on ``store`` with its journal in ``cache_dir``; ``queue`` False: nothing is
    uploaded in the background (a daemon about to be killed before its uploads ran)."""
    journal = Journal.open(cache_dir, store.store_id)
    vfs = build_core(store, config, journal=journal)
    try:
        async with trio.open_nursery() as nursery:
            if queue:
                await nursery.start(vfs.parts.writeback.run)
            yield Core(vfs, journal, store)
            nursery.cancel_scope.cancel()
    finally:
        journal.close()


async def replay(core: Core) -> int:
    """What a daemon does before mounting: queue the records left in the journal and upload
    them (transient failures retried as fsync does); returns how many there were. Errors that
    are left fail the test."""
    count = core.vfs.load_journal()
    errors = await core.vfs.parts.writeback.flush_all(
        patience=core.vfs.parts.state.config.fsync_timeout
    )
    assert errors == []
    return count
