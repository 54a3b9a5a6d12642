"""Renames, unlinks, directories, local-only names and the errno table through a real mount."""

from __future__ import annotations

import errno
import os
import subprocess

import pytest

from kit.mounts import renameat2
from kit.waiting import wait_for


def expect_errno(number: int, func, *args, **kwargs) -> None:
    with pytest.raises(OSError) as info:
        func(*args, **kwargs)
    assert info.value.errno == number, (
        f"{errno.errorcode[info.value.errno]} != {errno.errorcode[number]}"
    )


def test_rename_keeps_id(mount_factory):
    m = mount_factory(memories={"/a.md": "A"})
    memory_id = m.memories()["/a.md"].id
    os.rename(m.path / "a.md", m.path / "b.md")
    assert os.listdir(m.path) == ["b.md"]
    m.settle()
    assert set(m.memories()) == {"/b.md"}
    assert m.memories()["/b.md"].id == memory_id


def test_rename_over_existing_updates_target(mount_factory):
    m = mount_factory(memories={"/src.md": "S", "/dst.md": "D"})
    ids = {p: mem.id for p, mem in m.memories().items()}
    os.rename(m.path / "src.md", m.path / "dst.md")
    assert (m.path / "dst.md").read_text() == "S"
    m.settle()
    mems = m.memories()
    assert set(mems) == {"/dst.md"}
    assert mems["/dst.md"].id == ids["/dst.md"]  # the target keeps its id and history
    assert m.content("/dst.md") == "S"
    ops = [v.operation for v in m.versions(ids["/src.md"])]
    assert ops == ["deleted", "created"]


def test_rename_noreplace_and_exchange(mount_factory):
    m = mount_factory(memories={"/a.md": "A", "/b.md": "B"})
    expect_errno(errno.EEXIST, renameat2, m.path / "a.md", m.path / "b.md", 1)
    expect_errno(errno.EINVAL, renameat2, m.path / "a.md", m.path / "b.md", 2)
    renameat2(m.path / "a.md", m.path / "c.md", 1)
    assert sorted(os.listdir(m.path)) == ["b.md", "c.md"]


def test_unlink_is_deferred_then_deletes(mount_factory):
    m = mount_factory(memories={"/a.md": "A", "/b.md": "B"})
    os.unlink(m.path / "a.md")
    assert os.listdir(m.path) == ["b.md"]
    expect_errno(errno.ENOENT, os.stat, m.path / "a.md")
    wait_for(lambda: m.paths() == {"/b.md"}, timeout=8)


def test_open_file_follows_rename(mount):
    with open(mount.path / "x.md", "w") as f:
        f.write("first ")
        os.rename(mount.path / "x.md", mount.path / "y.md")
        f.write("second")
    mount.settle()
    wait_for(lambda: mount.paths() == {"/y.md"}, timeout=5)
    assert mount.content("/y.md") == "first second"


def test_directories(mount_factory):
    m = mount_factory(memories={"/d/one.md": "1", "/d/sub/two.md": "2"})
    os.mkdir(m.path / "empty")
    assert sorted(os.listdir(m.path)) == ["d", "empty"]
    expect_errno(errno.EEXIST, os.mkdir, m.path / "empty")
    expect_errno(errno.ENOTEMPTY, os.rmdir, m.path / "d")
    os.rmdir(m.path / "empty")
    assert os.listdir(m.path) == ["d"]
    # rm -r works: the directory stays while it is being emptied
    subprocess.run(["rm", "-r", str(m.path / "d")], check=True)
    assert os.listdir(m.path) == []
    wait_for(lambda: m.paths() == set(), timeout=8)


def test_directory_rename_moves_every_memory(mount_factory):
    m = mount_factory(memories={"/d/one.md": "1", "/d/sub/two.md": "2", "/other.md": "o"})
    ids = {p: mem.id for p, mem in m.memories().items()}
    os.rename(m.path / "d", m.path / "e")
    assert sorted(os.listdir(m.path / "e")) == ["one.md", "sub"]
    assert (m.path / "e" / "sub" / "two.md").read_text() == "2"
    m.settle()
    mems = m.memories()
    assert set(mems) == {"/e/one.md", "/e/sub/two.md", "/other.md"}
    assert mems["/e/one.md"].id == ids["/d/one.md"]
    assert mems["/e/sub/two.md"].id == ids["/d/sub/two.md"]


def test_a_directory_rename_past_20_segments_changes_nothing(mount_factory):
    """EINVAL, as for a create there (the store's limit), found for the whole tree before
    anything moves: the mount and the store stay as they were (docs/semantics.md "Errors")."""
    deep = "/t/" + "d/" * 18 + "f.md"  # 20 segments: one more level is one too many
    m = mount_factory(memories={"/t/a.md": "A", "/t/b/c.md": "C", deep: "F"})
    ids = {p: mem.id for p, mem in m.memories().items()}
    (m.path / "t" / "new.md").write_text("new\n")  # not uploaded yet
    os.mkdir(m.path / "u")
    expect_errno(errno.EINVAL, os.rename, m.path / "t", m.path / "u" / "t")
    assert sorted(os.listdir(m.path)) == ["t", "u"] and os.listdir(m.path / "u") == []
    assert sorted(os.listdir(m.path / "t")) == ["a.md", "b", "d", "new.md"]
    assert (m.path / deep[1:]).read_text() == "F"
    assert (m.path / "t" / "new.md").read_text() == "new\n"
    after = m.memories()
    assert {p: after[p].id for p in ids if p in after} == ids
    assert not [p for p in after if p.startswith("/u/")]
    # a rename that makes paths longer but valid moves as usual
    os.rename(m.path / "t" / "b", m.path / "u" / "bb")
    m.settle()
    assert set(m.memories()) == {"/t/a.md", "/u/bb/c.md", deep, "/t/new.md"}
    assert m.memories()["/u/bb/c.md"].id == ids["/t/b/c.md"]


def test_new_file_in_new_directory(mount):
    os.makedirs(mount.path / "a" / "b")
    (mount.path / "a" / "b" / "c.md").write_text("deep")
    mount.settle()
    wait_for(lambda: mount.paths() == {"/a/b/c.md"}, timeout=5)


def test_local_only_names_never_uploaded(mount):
    for name in [".x.md.swp", "x.md~", ".#x.md", "#x.md#", "4913", "y.kate-swp"]:
        (mount.path / name).write_text("scratch")
    os.makedirs(mount.path / ".git" / "objects")
    (mount.path / ".git" / "objects" / "blob").write_bytes(b"\x00\xffbinary")
    os.symlink("user@host.1234", mount.path / ".#lock.md")
    assert os.readlink(mount.path / ".#lock.md") == "user@host.1234"
    (mount.path / "real.md").write_text("real")
    assert ".git" in os.listdir(mount.path)
    mount.settle()
    wait_for(lambda: mount.paths() == {"/real.md"}, timeout=5)
    assert (mount.path / ".git" / "objects" / "blob").read_bytes() == b"\x00\xffbinary"


def test_git_init_inside_mount(mount):
    env = dict(os.environ, GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1")
    (mount.path / "doc.md").write_text("doc\n")
    subprocess.run(["git", "init", "-q", str(mount.path)], check=True, env=env)
    subprocess.run(["git", "-C", str(mount.path), "add", "doc.md"], check=True, env=env)
    mount.settle()
    wait_for(lambda: mount.paths() == {"/doc.md"}, timeout=5)


def test_touch_chmod_utime_accepted(mount_factory):
    m = mount_factory(memories={"/a.md": "A"})
    os.chmod(m.path / "a.md", 0o600)
    os.utime(m.path / "a.md", (1_000_000, 1_000_000))
    st = os.stat(m.path / "a.md")
    assert st.st_mtime == 1_000_000
    assert st.st_mode & 0o777 == 0o600  # kept locally, like the times
    subprocess.run(["touch", str(m.path / "a.md")], check=True)
    m.settle()
    assert [v.operation for v in m.versions()] == ["created"]


def test_errno_table(mount_factory):
    m = mount_factory(memories={"/a.md": "A"})
    p = m.path
    # > 102,400 bytes: EFBIG at the write that crosses, and at the close of that open (its
    # content was cut short: it is refused, not uploaded); absurd truncate: EFBIG
    fd = os.open(p / "big.md", os.O_CREAT | os.O_WRONLY)
    os.write(fd, b"x" * 102_400)
    expect_errno(errno.EFBIG, os.write, fd, b"y")
    expect_errno(errno.EFBIG, os.close, fd)
    expect_errno(errno.EFBIG, os.truncate, p / "a.md", 1 << 40)
    # invalid names
    expect_errno(errno.EINVAL, open, p / "bad\x01name", "w")
    expect_errno(errno.EINVAL, open, p / "cafe\u0301.md", "w")  # not NFC
    expect_errno(errno.ENAMETOOLONG, open, p / ("n" * 256), "w")
    # a path over 1,024 bytes
    deep = p
    for i in range(5):
        deep = deep / (f"{i}" * 200)
        os.mkdir(deep)
    expect_errno(errno.ENAMETOOLONG, open, deep / ("z" * 100), "w")
    # a path of more than 20 segments: EINVAL (the store's limit); local-only names may go deeper
    deep = p
    for _ in range(20):
        deep = deep / "s"
        os.mkdir(deep)
    expect_errno(errno.EINVAL, open, deep / "f.md", "w")
    expect_errno(errno.EINVAL, os.mkdir, deep / "s")
    (deep / "f.md~").write_text("local only")
    # the reserved root name holds the read-only history tree (tests/versions)
    expect_errno(errno.EEXIST, os.mkdir, p / ".versions")
    assert os.path.isdir(p / ".versions") and ".versions" not in os.listdir(p)
    # non-UTF-8 content: EILSEQ at fsync and at close, nothing stored, content kept
    fd = os.open(p / "bin.md", os.O_CREAT | os.O_WRONLY)
    os.write(fd, b"\xff\xfe")
    expect_errno(errno.EILSEQ, os.fsync, fd)
    expect_errno(errno.EILSEQ, os.close, fd)
    assert (p / "bin.md").read_bytes() == b"\xff\xfe"
    # ... and at rename onto a memory path
    (p / "bin.md~").write_bytes(b"\xff")
    expect_errno(errno.EILSEQ, os.rename, p / "bin.md~", p / "a.md")
    # unsupported: hard links, special files; xattrs ENOSYS (reported as ENOTSUP by libc)
    expect_errno(errno.EPERM, os.link, p / "a.md", p / "hard.md")
    expect_errno(errno.EPERM, os.symlink, "a.md", p / "sym.md")
    expect_errno(errno.EPERM, os.mkfifo, p / "fifo")
    with pytest.raises(OSError) as info:
        os.setxattr(p / "a.md", "user.x", b"1")
    assert info.value.errno in (errno.ENOSYS, errno.ENOTSUP)
    with pytest.raises(OSError):
        os.getxattr(p / "a.md", "user.x")
    expect_errno(errno.ENOENT, os.stat, p / "missing.md")
    expect_errno(errno.ENOTEMPTY, os.rmdir, p / ("0" * 200))
    assert m.content("/a.md") == "A"
    assert "/bin.md" not in m.paths()


def test_statfs(mount_factory):
    m = mount_factory(memories={"/a.md": "A", "/b.md": "BB"})
    st = os.statvfs(m.path)
    assert st.f_namemax == 255
    assert st.f_files == 2000
    assert st.f_ffree == 1998


def _status(m, *args: str) -> str:
    from kit.mounts import memfs

    result = memfs("status", str(m.path), *args, env=m.env)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_file_and_directory_with_one_name(mount_factory):
    """Memories /x and /x/y (made through the API): the directory keeps the name, the file is
    x.file-clash and reads, writes and renames the memory /x; the clash is logged once and
    listed by memfs status."""
    import json

    m = mount_factory(memories={"/x": "file x\n", "/x/y": "below\n"})
    memory_id = m.memories()["/x"].id
    assert sorted(os.listdir(m.path)) == ["x", "x.file-clash"]
    assert (m.path / "x").is_dir()
    assert (m.path / "x" / "y").read_text() == "below\n"
    assert (m.path / "x.file-clash").read_text() == "file x\n"
    with open(m.path / "x.file-clash", "a") as f:
        f.write("more\n")
        f.flush()
        os.fsync(f.fileno())
    assert m.content("/x") == "file x\nmore\n"
    assert m.paths() == {"/x", "/x/y"} and m.memories()["/x"].id == memory_id
    warnings = [line for line in m.log().splitlines() if "name clash" in line]
    assert len(warnings) == 1 and "/x/" in warnings[0] and "/x.file-clash" in warnings[0]
    [clash] = wait_for(lambda: json.loads(_status(m, "--json"))["clashes"])  # written each 1 s
    assert clash == {"file": "/x", "directory": "/x/", "shown_as": "/x.file-clash"}
    assert "/x.file-clash" in _status(m)
    # renaming the file away ends the clash; it keeps its id
    os.rename(m.path / "x.file-clash", m.path / "x.md")
    m.settle()
    assert m.paths() == {"/x.md", "/x/y"} and m.memories()["/x.md"].id == memory_id
    assert sorted(os.listdir(m.path)) == ["x", "x.md"]
    wait_for(lambda: json.loads(_status(m, "--json"))["clashes"] == [])


def test_clash_made_while_mounted_and_derived_name_taken(mount_factory):
    """A directory appearing over a file shown as x (change feed), with x.file-clash already a
    real memory: the file becomes x.file-clash-2; renaming the directory away ends the clash
    (the file is x again); unlinking it deletes the memory /x."""
    m = mount_factory(memories={"/x": "file x\n", "/x.file-clash": "a real one\n"})
    assert (m.path / "x").read_text() == "file x\n"
    m.put("/x/y", "below\n")
    wait_for(lambda: (m.path / "x").is_dir(), timeout=10)
    assert sorted(os.listdir(m.path)) == ["x", "x.file-clash", "x.file-clash-2"]
    assert (m.path / "x" / "y").read_text() == "below\n"
    assert (m.path / "x.file-clash").read_text() == "a real one\n"
    assert (m.path / "x.file-clash-2").read_text() == "file x\n"
    os.rename(m.path / "x", m.path / "dir")
    m.settle()
    assert sorted(os.listdir(m.path)) == ["dir", "x", "x.file-clash"]
    assert (m.path / "x").read_text() == "file x\n"
    os.unlink(m.path / "x")
    m.settle()
    assert m.paths() == {"/x.file-clash", "/dir/y"}
