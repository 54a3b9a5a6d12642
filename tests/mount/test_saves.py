"""Saving files through a real mount: every save pattern leaves one memory, one new version.

Plain syscalls (and the real tools: sed, perl, vim) on a ``memfs mount`` subprocess; the store is
checked through the official SDK.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from datetime import UTC, datetime, timedelta

import pytest

from kit.mounts import MountedStore
from kit.waiting import wait_for


def modified_versions(m: MountedStore, memory_id: str) -> list[str]:
    return [v.operation for v in m.versions(memory_id)]


def test_read_existing_and_listing(mount_factory):
    m = mount_factory(memories={"/notes/a.md": "alpha\n", "/top.md": "top\n"})
    assert sorted(os.listdir(m.path)) == ["notes", "top.md"]
    assert os.listdir(m.path / "notes") == ["a.md"]
    assert (m.path / "notes" / "a.md").read_text() == "alpha\n"
    st = os.stat(m.path / "top.md")
    assert st.st_size == 4
    assert oct(st.st_mode & 0o7777) == "0o644"
    assert st.st_uid == os.getuid() and st.st_nlink == 1
    assert oct(os.stat(m.path / "notes").st_mode & 0o7777) == "0o755"


def test_create_write_close_uploads_once(mount):
    (mount.path / "new.md").write_text("hello\n")
    mount.settle()
    mems = mount.memories()
    assert set(mems) == {"/new.md"}
    assert mount.content("/new.md") == "hello\n"
    assert modified_versions(mount, mems["/new.md"].id) == ["created"]


def test_new_file_waits_until_left_alone(mount):
    before_close = datetime.now(UTC)
    (mount.path / "new.md").write_text("x")
    wait_for(lambda: mount.paths() == {"/new.md"}, timeout=5)
    # not before: a brand-new file waits 1 s after its close. The server's clock dates the
    # upload, so a slow test run can neither hide an early upload nor fail a punctual one.
    uploaded = mount.memories()["/new.md"].created_at
    assert uploaded - before_close >= timedelta(seconds=0.99)


def test_in_place_overwrite_keeps_id(mount_factory):
    m = mount_factory(memories={"/a.md": "one\n"})
    before = m.memories()["/a.md"].id
    (m.path / "a.md").write_text("two\n")
    m.settle()
    assert m.memories()["/a.md"].id == before
    assert m.content("/a.md") == "two\n"
    assert modified_versions(m, before) == ["modified", "created"]


def test_append_and_write_at_offset(mount_factory):
    m = mount_factory(memories={"/a.md": "abc"})
    with open(m.path / "a.md", "a") as f:
        f.write("def")
    with open(m.path / "a.md", "r+b") as f:
        f.seek(1)
        f.write(b"X")
        f.seek(8)  # past the end: the hole reads back as zeros... then truncate it away
        f.write(b"Z")
        f.flush()
        assert (m.path / "a.md").read_bytes() == b"aXcdef\0\0Z"
        # before the close: the server refuses a content holding NUL (test_errnos.py)
        f.truncate(6)
    assert (m.path / "a.md").read_bytes() == b"aXcdef"
    m.settle()
    assert m.content("/a.md") == "aXcdef"


def test_sed_in_place(mount_factory):
    m = mount_factory(memories={"/a.md": "hello world\n"})
    memory_id = m.memories()["/a.md"].id
    subprocess.run(["sed", "-i", "s/world/there/", str(m.path / "a.md")], check=True)
    assert (m.path / "a.md").read_text() == "hello there\n"
    m.settle()
    assert m.paths() == {"/a.md"}
    assert m.memories()["/a.md"].id == memory_id
    assert m.content("/a.md") == "hello there\n"
    assert modified_versions(m, memory_id) == ["modified", "created"]


@pytest.mark.skipif(shutil.which("perl") is None, reason="perl not installed")
def test_perl_pi(mount_factory):
    m = mount_factory(memories={"/a.md": "x=1\n"})
    memory_id = m.memories()["/a.md"].id
    subprocess.run(["perl", "-pi", "-e", "s/1/2/", str(m.path / "a.md")], check=True)
    m.settle()
    assert m.paths() == {"/a.md"}
    assert m.content("/a.md") == "x=2\n"
    assert modified_versions(m, memory_id) == ["modified", "created"]


def test_tempfile_os_replace(mount_factory):
    m = mount_factory(memories={"/d/a.md": "old\n"})
    memory_id = m.memories()["/d/a.md"].id
    fd, tmp = tempfile.mkstemp(dir=m.path / "d")
    os.write(fd, b"new\n")
    os.fsync(fd)  # even an fsync of the temp file must not leave it in the store
    os.close(fd)
    os.replace(tmp, m.path / "d" / "a.md")
    m.settle()
    wait_for(lambda: m.paths() == {"/d/a.md"}, timeout=6)
    assert m.memories()["/d/a.md"].id == memory_id
    assert m.content("/d/a.md") == "new\n"


def test_tempfile_os_replace_without_fsync_one_version(mount_factory):
    m = mount_factory(memories={"/a.md": "old\n"})
    memory_id = m.memories()["/a.md"].id
    fd, tmp = tempfile.mkstemp(dir=m.path)
    os.write(fd, b"new\n")
    os.close(fd)
    os.replace(tmp, m.path / "a.md")
    m.settle()
    assert m.paths() == {"/a.md"}
    assert modified_versions(m, memory_id) == ["modified", "created"]


@pytest.mark.parametrize("backupcopy", ["no", "auto", "yes"])
def test_vim_save(mount_factory, backupcopy):
    m = mount_factory(memories={"/notes.md": "line one\n"})
    memory_id = m.memories()["/notes.md"].id
    settings = f"set nocompatible backup writebackup backupskip= backupcopy={backupcopy}"
    subprocess.run(
        [
            "vim",
            "-u",
            "NONE",
            "-i",
            "NONE",
            "-N",
            "--not-a-term",
            "--cmd",
            settings,
            "-c",
            "normal Goline two",
            "-c",
            "wq",
            str(m.path / "notes.md"),
        ],
        check=True,
        timeout=20,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    assert (m.path / "notes.md").read_text() == "line one\nline two\n"
    m.settle()
    assert m.paths() == {"/notes.md"}  # no backup, swap or probe file uploaded
    assert m.memories()["/notes.md"].id == memory_id
    assert m.content("/notes.md") == "line one\nline two\n"
    assert modified_versions(m, memory_id) == ["modified", "created"]
    if backupcopy != "yes":
        # the backup stays local and is listed
        assert sorted(os.listdir(m.path)) == ["notes.md", "notes.md~"]
        assert (m.path / "notes.md~").read_text() == "line one\n"


def test_vim_new_file(mount):
    subprocess.run(
        [
            "vim",
            "-es",
            "-u",
            "NONE",
            "-i",
            "NONE",
            "-c",
            "normal ihello",
            "-c",
            "wq",
            str(mount.path / "fresh.md"),
        ],
        check=True,
        timeout=20,
    )
    mount.settle()
    wait_for(lambda: mount.paths() == {"/fresh.md"}, timeout=5)
    assert mount.content("/fresh.md") == "hello\n"


def test_tar_unlink_then_create_keeps_id(mount_factory, tmp_path):
    m = mount_factory(memories={"/a.md": "old\n"})
    memory_id = m.memories()["/a.md"].id
    os.unlink(m.path / "a.md")
    (m.path / "a.md").write_text("new\n")
    m.settle()
    assert m.paths() == {"/a.md"}
    assert m.memories()["/a.md"].id == memory_id
    assert modified_versions(m, memory_id) == ["modified", "created"]


def test_unchanged_save_uploads_nothing(mount_factory):
    m = mount_factory(memories={"/a.md": "same\n"})
    memory_id = m.memories()["/a.md"].id
    (m.path / "a.md").write_text("same\n")
    m.settle()
    assert modified_versions(m, memory_id) == ["created"]
