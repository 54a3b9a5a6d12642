"""POSIX attributes through a real mount: link counts, modes, owners, mknod (issue 11, 9-11).

The store has no modes or owners: a mount keeps what create, mkdir, chmod and chown set for its
lifetime, like client-set times, and the kernel checks them (``default_permissions``).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat
import struct
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kit.mounts import MountedStore
from kit.waiting import wait_for

from .test_errnos import expect_errno

NOBODY = 65534


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def links(path: Path) -> int:
    return os.stat(path).st_nlink


# -- nlink ------------------------------------------------------------------------------------


def test_unlinked_open_file_has_no_links(mount_factory):
    m = mount_factory(memories={"/a.md": "A"})
    kept = os.open(m.path / "a.md", os.O_RDONLY)
    fresh = os.open(m.path / "new.md", os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.write(fresh, b"new")
        assert os.fstat(kept).st_nlink == 1 and os.fstat(fresh).st_nlink == 1
        os.unlink(m.path / "a.md")
        os.unlink(m.path / "new.md")
        assert os.fstat(kept).st_nlink == 0
        assert os.fstat(fresh).st_nlink == 0
        assert os.read(kept, 10) == b"A"  # still readable through the open file
    finally:
        os.close(kept)
        os.close(fresh)


def test_directory_nlink_counts_its_subdirectories(mount_factory):
    m = mount_factory(memories={"/p/a/x.md": "x", "/p/b/c/y.md": "y", "/p/z.md": "z"})
    root, p = m.path, m.path / "p"
    assert links(p) in (1, 4)  # not listed yet: 1 says "not counted", never too few
    assert sorted(os.listdir(root)) == ["p"]
    assert sorted(os.listdir(p)) == ["a", "b", "z.md"]
    assert links(root) == 3  # . and .. and p/..
    assert links(p) == 4  # a and b, not the file
    os.mkdir(p / "new")
    assert links(p) == 5 and links(p / "new") == 2
    os.mkdir(p / "new" / "deeper")
    assert links(p / "new") == 3
    os.rename(p / "new" / "deeper", root / "moved")
    assert links(p / "new") == 2 and links(root) == 4
    os.rmdir(root / "moved")
    os.rmdir(p / "new")
    assert links(p) == 4 and links(root) == 3
    fd = os.open(p / "a", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.unlink(p / "a" / "x.md")
        os.rmdir(p / "a")
        assert os.fstat(fd).st_nlink == 0  # a removed directory has no links
    finally:
        os.close(fd)
    assert links(p) == 3


# -- "." and ".." -------------------------------------------------------------------------------

libc = ctypes.CDLL(None, use_errno=True)
SYS_GETDENTS64 = {"x86_64": 217, "aarch64": 61}[platform.machine()]
DIRENT_HEAD = struct.Struct("QqHB")  # d_ino, d_off, d_reclen, d_type; then the name
DT_DIR = 4


def raw_listing(directory: Path, buffer: int = 4096) -> list[tuple[str, int, int]]:
    """(name, d_ino, d_type) of every entry getdents64(2) returns, "." and ".." included (which
    ``os.listdir`` and ``os.scandir`` drop). A small ``buffer`` takes a few entries per call, so
    every later call resumes from the offset of the last entry the one before returned."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    out: list[tuple[str, int, int]] = []
    try:
        buf = ctypes.create_string_buffer(buffer)
        while True:
            got = libc.syscall(SYS_GETDENTS64, fd, buf, buffer)
            if got < 0:
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
            if got == 0:
                return out
            at = 0
            while at < got:
                ino, _, reclen, kind = DIRENT_HEAD.unpack_from(buf.raw, at)
                name = buf.raw[at + DIRENT_HEAD.size : at + reclen].split(b"\0", 1)[0]
                out.append((name.decode(), ino, kind))
                at += reclen
    finally:
        os.close(fd)


def dots(directory: Path, parent: Path, *, buffer: int = 4096) -> list[str]:
    """The names of ``directory``'s raw listing after checking its "." and ".." entries: first,
    directories, with the inode numbers of ``directory`` and ``parent``."""
    listing = raw_listing(directory, buffer)
    assert listing[:2] == [
        (".", os.stat(directory).st_ino, DT_DIR),
        ("..", os.stat(parent).st_ino, DT_DIR),
    ], (directory, listing[:2])
    names = [name for name, _, _ in listing[2:]]
    assert len(names) == len(set(names)), names  # none repeated
    assert sorted(names) == sorted(os.listdir(directory))  # none skipped
    return names


def test_readdir_has_dot_and_dotdot_everywhere(mount_factory):
    """Issue 20 item 11: ``ls -a`` shows "." and ".." with the right inode numbers (the root's
    ".." is itself) in store directories, ``.versions/`` and ``.search/``, and a listing read
    a few entries at a time neither repeats nor skips one."""
    names = [f"/d/entry-{i:02d}.md" for i in range(30)]
    m = mount_factory(memories={path: "x" for path in [*names, "/d/e/f.md"]})
    root, d = m.path, m.path / "d"
    assert os.stat(root).st_ino == 1
    dots(root, root)
    assert len(dots(d, root, buffer=160)) == 31  # resumed about 15 times
    dots(d / "e", d)
    ls = subprocess.run(["ls", "-a1", str(d / "e")], capture_output=True, text=True, check=True)
    assert ls.stdout.split() == [".", "..", "f.md"]
    versions = root / ".versions"
    dots(versions, root)
    history = versions / "history"
    dots(history, versions)
    dots(history / "d", history)
    assert len(dots(history / "d" / "entry-00.md", history / "d")) == 2  # a version, the log
    [instant] = [n for n in os.listdir(versions) if n[0].isdigit()][-1:]
    dots(versions / instant, versions)
    assert len(dots(versions / instant / "d", versions / instant, buffer=160)) == 31
    dots(versions / instant / "d" / "e", versions / instant / "d")
    search = root / ".search"
    assert dots(search, root) == []


# -- mknod ------------------------------------------------------------------------------------


def test_mknod_makes_a_regular_file(mount_factory):
    m = mount_factory()
    os.mknod(m.path / "n.md", stat.S_IFREG | 0o640)
    st = os.stat(m.path / "n.md")
    assert stat.S_ISREG(st.st_mode) and st.st_size == 0 and mode(m.path / "n.md") == 0o640
    os.mknod(m.path / "plain.md")  # no type: a regular file too (POSIX)
    expect_errno(errno.EEXIST, os.mknod, m.path / "n.md", stat.S_IFREG | 0o644)
    expect_errno(errno.EPERM, os.mkfifo, m.path / "fifo")  # special files stay refused
    expect_errno(errno.EPERM, os.mknod, m.path / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    (m.path / "n.md").write_text("written\n")
    m.settle()
    wait_for(lambda: m.paths() == {"/n.md", "/plain.md"}, timeout=5)
    assert m.content("/n.md") == "written\n" and m.content("/plain.md") == ""


# -- modes ------------------------------------------------------------------------------------


@pytest.fixture
def umask() -> Iterator[Callable[[int], None]]:
    old = os.umask(0o022)
    try:
        yield os.umask
    finally:
        os.umask(old)


def test_chmod_is_kept_and_a_script_runs(mount_factory, umask):
    m = mount_factory(memories={"/a.md": "A"})
    script = m.path / "tool.sh"
    script.write_text("#!/bin/sh\necho ran\n")
    assert mode(script) == 0o644 and mode(m.path / "a.md") == 0o644
    expect_errno(errno.EACCES, subprocess.run, [str(script)])  # no x bit: root cannot run it
    subprocess.run(["chmod", "+x", str(script)], check=True)
    assert mode(script) == 0o755
    assert subprocess.run([str(script)], capture_output=True, text=True).stdout == "ran\n"
    os.chmod(m.path / "a.md", 0o600)
    assert mode(m.path / "a.md") == 0o600
    umask(0o077)  # the creator's umask is honoured at create and mkdir
    (m.path / "private.md").write_text("p")
    os.mkdir(m.path / "priv")
    assert mode(m.path / "private.md") == 0o600 and mode(m.path / "priv") == 0o700
    m.settle()
    assert [v.operation for v in m.versions(m.memories()["/a.md"].id)] == ["created"]
    # modes do not persist in the store: the next mount shows the defaults again
    assert m.umount().returncode == 0
    assert m.mount().returncode == 0
    assert mode(m.path / "a.md") == 0o644 and mode(m.path / "tool.sh") == 0o644


def test_a_save_keeps_the_mode(mount_factory, umask):
    m = mount_factory(memories={"/tool.sh": "#!/bin/sh\necho one\n"})
    script = m.path / "tool.sh"
    os.chmod(script, 0o755)
    # vim (backupcopy=no): renames to tool.sh~, writes a new file, gives it the old mode
    subprocess.run(
        ["vim", "-u", "NONE", "-i", "NONE", "-N", "--not-a-term", "--cmd",
         "set nocompatible backup writebackup backupskip= backupcopy=no",
         "-c", "%s/one/two/", "-c", "wq", str(script)],
        check=True, timeout=20, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    assert (m.path / "tool.sh~").exists()  # it really was a rename-and-write save
    assert mode(script) == 0o755
    assert subprocess.run([str(script)], capture_output=True, text=True).stdout == "two\n"
    # sed -i: a temp file given the target's mode, renamed over it
    subprocess.run(["sed", "-i", "s/two/three/", str(script)], check=True)
    assert mode(script) == 0o755
    m.settle()
    assert m.content("/tool.sh") == "#!/bin/sh\necho three\n"


def test_a_set_group_id_directory_passes_its_group_on(mount_factory, umask):
    m = mount_factory()
    team = m.path / "team"
    os.mkdir(team)
    os.chown(team, -1, 4242)
    os.chmod(team, 0o2775)
    (team / "f.md").write_text("f")
    os.mkdir(team / "sub")
    assert os.stat(team / "f.md").st_gid == 4242
    sub = os.stat(team / "sub")
    assert sub.st_gid == 4242 and stat.S_IMODE(sub.st_mode) == 0o2755


# -- owners, --uid/--gid/--umask, allow_other ----------------------------------------------------


def as_nobody(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "-c", script], cwd=cwd, user=NOBODY, group=NOBODY, extra_groups=[],
        capture_output=True, text=True, timeout=20,
    )  # fmt: skip


def test_another_user_writes_with_allow_other_and_uid(mount_factory, shared_dir, tmp_path):
    m = mount_factory(memories={"/a.md": "shared\n", "/d/b.md": "b\n"}, mount=False)
    point = shared_dir / "mnt"
    point.mkdir()
    mounted = MountedStore(
        path=point, store_id=m.store_id, store_name=m.store_name, sdk=m.sdk, env=m.env,
        log_file=tmp_path / "owner.log",
        extra_args=["--allow-other", "--uid", str(NOBODY), "--gid", str(NOBODY), "--umask", "027"],
    )  # fmt: skip
    try:
        assert mounted.mount().returncode == 0, mounted.log()
        st = os.stat(point / "a.md")
        assert (st.st_uid, st.st_gid, mode(point / "a.md")) == (NOBODY, NOBODY, 0o640)
        assert mode(point / "d") == 0o750
        done = as_nobody(
            "echo more >> a.md && echo new > new.md && mkdir e && echo e > e/f.md"
            " && chmod 600 new.md && mv d/b.md d/c.md && stat -c '%u %a' new.md",
            point,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"{NOBODY} 600\n"
        # what root makes belongs to root (the creator), as on any filesystem
        (point / "root.md").write_text("r\n")
        assert os.stat(point / "root.md").st_uid == 0
        refused = as_nobody("echo x >> root.md", point)
        assert refused.returncode != 0 and "Permission denied" in refused.stderr
        chown = as_nobody("chown 0 new.md", point)  # only root gives a file away
        assert chown.returncode != 0 and "Operation not permitted" in chown.stderr
        os.chown(point / "new.md", 0, 0)  # root may: kept locally
        assert os.stat(point / "new.md").st_uid == 0
        mounted.settle()
        assert m.content("/a.md") == "shared\nmore\n"
        assert m.content("/new.md") == "new\n" and m.content("/e/f.md") == "e\n"
        assert m.paths() == {"/a.md", "/new.md", "/e/f.md", "/d/c.md", "/root.md"}
    finally:
        mounted.cleanup()
