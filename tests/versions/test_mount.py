"""The .versions tree through a real mount on the real server: hidden from tree walkers,
point-in-time views, per-path history, redactions, restore by copy, read-only everywhere."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from kit.waiting import wait_for
from memfs.mount.router import ATTR_TIMEOUT, ENTRY_TIMEOUT
from memfs.versions.names import stamp

pytestmark = pytest.mark.fuse


def expect_errno(number, func, *args, **kwargs):
    with pytest.raises(OSError) as info:
        func(*args, **kwargs)
    assert info.value.errno == number, (
        f"{errno.errorcode[info.value.errno]} != {errno.errorcode[number]}"
    )


def test_hidden_from_tree_walkers_but_reachable(mount_factory, tmp_path):
    m = mount_factory(memories={"/notes/todo.md": "needle now"})
    todo = m.memories()["/notes/todo.md"]
    m.sdk.beta.memory_stores.memories.update(
        todo.id, memory_store_id=m.store_id, content="needle then, needle now"
    )
    versions = m.path / ".versions"
    assert stat.S_ISDIR(os.stat(versions).st_mode)
    assert len([n for n in os.listdir(versions) if n[0].isdigit()]) == 2
    assert ".versions" not in os.listdir(m.path)
    run = lambda *cmd: subprocess.run(cmd, capture_output=True, text=True, check=False)  # noqa: E731
    assert ".versions" not in run("ls", "-a", str(m.path)).stdout.split()
    found = run("find", str(m.path)).stdout
    assert "notes/todo.md" in found and ".versions" not in found
    grep = run("grep", "-r", "needle", str(m.path)).stdout.splitlines()
    assert len(grep) == 1 and "needle then" in grep[0]
    du = run("du", "-a", str(m.path)).stdout
    assert "todo.md" in du and ".versions" not in du
    copy = tmp_path / "copy"
    result = run("rsync", "-a", f"{m.path}/", str(copy))
    assert result.returncode == 0, result.stderr
    assert sorted(str(p.relative_to(copy)) for p in copy.rglob("*")) == ["notes", "notes/todo.md"]


def test_views_history_and_redaction(mount_factory):
    m = mount_factory()
    api = m.sdk.beta.memory_stores
    created = api.retrieve(m.store_id).created_at
    todo = api.memories.create(m.store_id, path="/notes/todo.md", content="secret v1")
    other = api.memories.create(m.store_id, path="/a.md", content="A")
    api.memories.update(todo.id, memory_store_id=m.store_id, content="todo v2")
    api.memories.update(other.id, memory_store_id=m.store_id, path="/b.md")
    api.memories.delete(todo.id, memory_store_id=m.store_id)
    versions = m.versions()[::-1]  # oldest first
    api.memory_versions.redact(versions[0].id, memory_store_id=m.store_id)
    at = [stamp(v.created_at) for v in versions]
    root = m.path / ".versions"

    assert os.listdir(root / stamp(created - timedelta(seconds=1))) == []
    assert sorted(os.listdir(root)) == [*at, "history", "log.txt"]
    # each instant as it was; another spelling of the same instant shows the same
    assert sorted(os.listdir(root / at[1])) == ["a.md", "notes"]
    assert (root / at[2] / "notes" / "todo.md").read_text() == "todo v2"
    iso = versions[2].created_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert (root / iso / "notes" / "todo.md").read_text() == "todo v2"
    assert sorted(os.listdir(root / at[3])) == ["b.md", "notes"]  # renamed: new path
    assert (root / at[3] / "b.md").read_text() == "A"
    assert os.listdir(root / at[4]) == ["b.md"]  # deleted
    assert not (root / at[4] / "notes").exists()
    # the redacted version: listed, mode 0000, unreadable with EACCES
    redacted = root / at[0] / "notes" / "todo.md"
    assert stat.S_IMODE(redacted.stat().st_mode) == 0
    expect_errno(errno.EACCES, redacted.read_text)
    # history of a deleted memory, oldest first, readable with cat
    history = root / "history" / "notes" / "todo.md"
    names = sorted(os.listdir(history))
    assert names[-1] == "log.txt"
    roles = [n.split("Z-", 1)[1] for n in names[:-1]]
    assert roles[0].startswith("created-api-") and roles[0].endswith("-redacted")
    assert roles[1].startswith("modified-api-") and roles[2].startswith("deleted-api-")
    result = subprocess.run(["cat", str(history / names[1])], capture_output=True, text=True)
    assert result.stdout == "todo v2"
    expect_errno(errno.EACCES, (history / names[0]).read_text)
    assert (history / names[2]).read_text() == ""
    assert "redacted at" in (history / "log.txt").read_text()
    a_names = sorted(os.listdir(root / "history" / "a.md"))
    assert "renamed-out" in a_names[1]
    assert "renamed from /a.md" in (root / "history" / "b.md" / "log.txt").read_text()
    # the whole store's log, and nothing of the redacted content anywhere
    log = (root / "log.txt").read_text()
    assert len(log.splitlines()) == 5 and "secret" not in log


def test_restore_by_copy(mount_factory):
    m = mount_factory(memories={"/keep.md": "good"})
    memory = m.memories()["/keep.md"]
    (m.path / "keep.md").write_text("bad edit")
    m.settle()
    assert m.content("/keep.md") == "bad edit"
    good = stamp(m.versions(memory.id)[-1].created_at)  # the created version
    shutil.copyfile(m.path / ".versions" / good / "keep.md", m.path / "keep.md")
    m.settle()
    assert m.content("/keep.md") == "good"
    assert [v.operation for v in m.versions(memory.id)] == ["modified", "modified", "created"]
    assert m.memories()["/keep.md"].id == memory.id


def refused_everywhere(m) -> None:
    root = m.path / ".versions"
    instant = sorted(n for n in os.listdir(root) if n[0].isdigit())[-1]
    view = root / instant
    assert (view / "a.md").read_text() == "A"
    expect_errno(errno.EROFS, open, view / "a.md", "w")
    expect_errno(errno.EROFS, open, view / "a.md", "a")
    expect_errno(errno.EROFS, open, view / "new.md", "w")
    expect_errno(errno.EROFS, os.truncate, view / "a.md", 0)
    expect_errno(errno.EROFS, os.unlink, view / "a.md")
    expect_errno(errno.EROFS, os.mkdir, view / "dir")
    expect_errno(errno.EROFS, os.rename, view / "a.md", view / "b.md")
    expect_errno(errno.EROFS, os.utime, view / "a.md")
    expect_errno(errno.EROFS, os.symlink, "a.md", view / "link")
    expect_errno(errno.EROFS, os.rmdir, view)
    expect_errno(errno.EROFS, os.rmdir, root)
    expect_errno(errno.EROFS, os.rename, root, m.path / "elsewhere")
    expect_errno(errno.EROFS, open, root / "history" / "x", "w")
    expect_errno(errno.EEXIST, os.mkdir, root)


def test_read_write_mount_refuses_changes_below(mount_factory):
    m = mount_factory(memories={"/a.md": "A"})
    refused_everywhere(m)
    expect_errno(errno.EROFS, os.rename, m.path / "a.md", m.path / ".versions" / "a.md")
    # the rest of the mount still writes
    (m.path / "b.md").write_text("B")
    m.settle()
    assert m.content("/b.md") == "B"


def test_read_only_mount(mount_factory):
    m = mount_factory("--read-only", memories={"/a.md": "A"})
    refused_everywhere(m)
    history = Path(m.path / ".versions" / "history" / "a.md")
    names = sorted(os.listdir(history))
    assert names[-1] == "log.txt" and "-created-api-" in names[0]
    assert (history / names[0]).read_text() == "A"


def test_redaction_made_after_listing_shows_within_seconds(mount_factory):
    m = mount_factory(memories={"/plan.md": "v1"})
    for content in ("v2 secret", "v3"):
        (m.path / "plan.md").write_text(content)
        m.settle()
    history = m.path / ".versions" / "history" / "plan.md"
    names = sorted(os.listdir(history))
    assert len(names) == 4 and "-modified-" in names[1] and names[-1] == "log.txt"
    assert (history / names[1]).read_text() == "v2 secret"
    middle = m.versions()[1]  # newest first: v3, v2, v1
    view = m.path / ".versions" / stamp(middle.created_at) / "plan.md"
    assert view.read_text() == "v2 secret" and stat.S_IMODE(view.stat().st_mode) == 0o644

    m.sdk.beta.memory_stores.memory_versions.redact(middle.id, memory_store_id=m.store_id)
    redacted = history / (names[1] + "-redacted")
    # listing the history directory re-lists that memory's versions (at most every 2 s)
    wait_for(lambda: redacted.name in os.listdir(history), timeout=4.0)
    assert sorted(os.listdir(history)) == [names[0], redacted.name, names[2], "log.txt"]
    assert stat.S_IMODE(redacted.stat().st_mode) == 0
    expect_errno(errno.EACCES, redacted.read_text)
    assert "v2 secret" not in (history / "log.txt").read_text()
    # the old name is gone once the kernel's cached entry expires (or is invalidated)
    wait_for(lambda: not os.path.lexists(history / names[1]), timeout=ENTRY_TIMEOUT + 3.0)
    # the point-in-time view: a full re-listing at most every 2 s, then the kernel's attributes
    wait_for(
        lambda: "plan.md" in os.listdir(view.parent) and stat.S_IMODE(view.stat().st_mode) == 0,
        timeout=ATTR_TIMEOUT + 4.0,
    )
    expect_errno(errno.EACCES, view.read_text)
    assert "v2 secret" not in (m.path / ".versions" / "log.txt").read_text()
