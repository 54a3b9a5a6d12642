"""The end of a mount saves what files still open for writing hold (``StoreCore.save_open_files``)
and the unmount report says where each went (``open_at_end``): a version, a conflict copy when
another writer changed the memory meanwhile, the journal while the server is away, nothing for
a local-only name. What the store refuses (a kept copy) is tested on a real mount
(tests/mount/test_endings.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from trio.testing import MockClock

from kit.fake_store import FakeStore
from memfs.core.model.inodes import ROOT_INODE
from memfs.mount.report import render_report, report_problems, unmount_report

from .helpers import running_core


async def test_each_file_open_at_the_end_is_saved_and_said_where(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    theirs = store.seed("/theirs.md", "v1\n")
    store.seed("/quiet.md", "untouched\n")
    async with running_core(store, cache_dir) as core:
        vfs = core.vfs
        kept, _ = await vfs.create(ROOT_INODE, "kept.md", os.O_WRONLY | os.O_CREAT)
        raced, _ = await vfs.open(await core.ino("theirs.md"), os.O_WRONLY | os.O_APPEND)
        swap, _ = await vfs.create(ROOT_INODE, ".kept.md.swp", os.O_WRONLY | os.O_CREAT)
        await vfs.open(await core.ino("quiet.md"), os.O_WRONLY)  # open, nothing written
        for fh, data in ((kept, b"mine\n"), (raced, b"mine too\n"), (swap, b"scratch\n")):
            await vfs.write(fh, 0, data)
        store.edit(theirs.id, content="v2 by another writer\n")

        assert vfs.save_open_files() == 2
        assert vfs.save_open_files() == 0  # a second pass: nothing new was written
        await vfs.write(kept, 5, b"more\n")
        assert vfs.save_open_files() == 1  # ... and one that was
        assert await vfs.flush_all() == []
        report = unmount_report(vfs, orphaned=None, errors=[])

    [conflict] = core.conflict_copies("theirs")
    assert report["open_at_end"] == [
        {
            "path": "/.kept.md.swp",
            "saved": "not kept",
            "where": "a local-only name: never uploaded",
        },
        {"path": "/kept.md", "saved": "version", "where": None},
        {"path": "/theirs.md", "saved": "conflict copy", "where": conflict},
    ]
    assert store.contents()["/kept.md"] == "mine\nmore\n"
    assert store.contents()["/theirs.md"] == "v2 by another writer\n"
    assert report_problems(report)  # a conflict, and a file not kept
    assert "  /kept.md: saved as a version of the store\n" in render_report(report)


async def test_a_file_open_at_the_end_waits_in_the_journal_while_the_server_is_away(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    async with running_core(store, cache_dir) as core:
        vfs = core.vfs
        fh, _ = await vfs.create(ROOT_INODE, "away.md", os.O_WRONLY | os.O_CREAT)
        await vfs.write(fh, 0, b"written while it was away\n")
        store.fail_next("create", times=1000)  # unreachable until healed
        assert vfs.save_open_files() == 1
        assert await vfs.flush_all() != []
        report = unmount_report(vfs, orphaned=None, errors=[])
        assert [record.data for record in core.records()] == [b"written while it was away\n"]
    journal = str(core.journal.directory)
    assert report["open_at_end"] == [{"path": "/away.md", "saved": "journal", "where": journal}]
