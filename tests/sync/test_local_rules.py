"""The rules of the local side that need no server: names a case-folding file system cannot
hold apart, and DIR itself going away (then nothing is deleted)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from kit.synced import SyncedDir
from kit.waiting import wait_for
from memfs.sync.engine import name_clashes
from memfs.sync.localdir import LocalDir

Factory = Callable[..., SyncedDir]


def test_names_that_differ_only_in_case_clash_where_case_folds() -> None:
    paths = ["/notes/Todo.md", "/notes/todo.md", "/notes/TODO.md", "/other.md", "/Notes/x.md"]
    clashes = name_clashes(paths, str.casefold)
    assert set(clashes) == {"/notes/Todo.md", "/notes/todo.md"}  # "/notes/TODO.md" sorts first
    assert "/notes/TODO.md" in clashes["/notes/todo.md"]
    assert name_clashes(paths, str) == {}  # a file system that tells case apart: none


def test_a_case_sensitive_directory_is_seen_as_such(tmp_path: Path) -> None:
    local = LocalDir(tmp_path)
    assert local.case_insensitive is False  # ext4 here; the probe left nothing behind
    assert list(tmp_path.iterdir()) == []
    assert local.name_key("/A.md") != local.name_key("/a.md")


def test_dir_gone_deletes_nothing_and_syncing_resumes(sync_factory: Factory) -> None:
    synced = sync_factory(memories={"/a.md": "a\n", "/d/b.md": "b\n"})
    away = synced.path.with_name("moved-away")
    synced.path.rename(away)
    synced.path.mkdir()  # an empty directory in its place: not the one synced
    wait_for(lambda: synced.status()["sync"]["directory_gone"])  # a pass ran, and paused
    assert synced.paths() == {"/a.md", "/d/b.md"}
    synced.path.rmdir()
    away.rename(synced.path)
    synced.local("/c.md").write_text("after\n")
    synced.wait_content("/c.md", "after\n")
    assert synced.paths() == {"/a.md", "/d/b.md", "/c.md"}
    wait_for(lambda: synced.status()["sync"]["directory_gone"] is False)


def test_a_directory_made_again_is_filled_again_not_emptied_into_the_store(
    sync_factory: Factory,
) -> None:
    synced = sync_factory(memories={"/a.md": "a\n", "/d/b.md": "b\n"})
    assert synced.stop().returncode == 0
    shutil.rmtree(synced.path)  # the copies thrown away while no sync ran
    assert synced.start().returncode == 0, synced.log()
    assert synced.local("/a.md").read_text() == "a\n"
    assert synced.local("/d/b.md").read_text() == "b\n"
    assert synced.paths() == {"/a.md", "/d/b.md"}
    assert "not the directory last synced" in synced.log()
