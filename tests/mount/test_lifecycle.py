"""Mounting, unmounting, read-only mounts, remote changes and conflicts through a real mount."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from kit.mounts import memfs
from kit.waiting import wait_for


def expect_errno(number: int, func, *args, **kwargs) -> None:
    with pytest.raises(OSError) as info:
        func(*args, **kwargs)
    assert info.value.errno == number, errno.errorcode[info.value.errno]


def daemon_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] in ("Z", "X")
    except OSError:
        return True


def test_umount_flushes_pending_writes(mount):
    (mount.path / "new.md").write_text("pending")
    result = mount.umount()
    assert result.returncode == 0, result.stderr
    assert not os.path.ismount(mount.path)
    assert mount.content("/new.md") == "pending"
    assert mount.pid is not None and daemon_gone(mount.pid)


def test_sigterm_flushes(mount_factory):
    m = mount_factory(memories={"/a.md": "old"})
    (m.path / "a.md").write_text("new")
    assert m.pid is not None
    os.kill(m.pid, signal.SIGTERM)
    wait_for(lambda: daemon_gone(m.pid), timeout=20)
    assert not os.path.ismount(m.path)
    assert m.content("/a.md") == "new"


def test_sigterm_right_after_mount_reports_ready_unmounts_cleanly(mount_factory):
    # The handlers are installed before the mount says "ok": a default SIGTERM would kill
    # the daemon and leave a dead mount ("transport endpoint is not connected").
    m = mount_factory()
    assert m.pid is not None
    os.kill(m.pid, signal.SIGTERM)
    wait_for(lambda: daemon_gone(m.pid), timeout=20)
    assert not os.path.ismount(m.path)
    assert "signal SIGTERM: flushing and unmounting" in m.log()


def test_fusermount_flushes(mount):
    (mount.path / "f.md").write_text("via fusermount")
    subprocess.run(["fusermount3", "-u", str(mount.path)], check=True)
    wait_for(lambda: mount.pid is not None and daemon_gone(mount.pid), timeout=20)
    assert mount.content("/f.md") == "via fusermount"


def test_remount_persistence(mount):
    (mount.path / "keep.md").write_text("kept")
    os.mkdir(mount.path / "d")
    (mount.path / "d" / "x.md").write_text("x")
    (mount.path / "scratch~").write_text("local only")
    assert mount.umount().returncode == 0
    assert os.listdir(mount.path) == []
    result = mount.mount()
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(mount.path)) == ["d", "keep.md"]
    assert (mount.path / "keep.md").read_text() == "kept"
    assert (mount.path / "d" / "x.md").read_text() == "x"


def test_read_only_mount(mount_factory):
    m = mount_factory("--read-only", memories={"/a.md": "A", "/d/b.md": "B"})
    assert (m.path / "a.md").read_text() == "A"
    result = subprocess.run(["bash", "-c", f"echo hi > {m.path}/new.md"], capture_output=True)
    assert result.returncode != 0 and b"Read-only file system" in result.stderr
    expect_errno(errno.EROFS, open, m.path / "a.md", "w")
    expect_errno(errno.EROFS, open, m.path / "a.md", "a")
    expect_errno(errno.EROFS, os.unlink, m.path / "a.md")
    expect_errno(errno.EROFS, os.rename, m.path / "a.md", m.path / "c.md")
    expect_errno(errno.EROFS, os.mkdir, m.path / "e")
    expect_errno(errno.EROFS, os.rmdir, m.path / "d")
    expect_errno(errno.EROFS, os.truncate, m.path / "a.md", 0)
    expect_errno(errno.EROFS, os.symlink, "x", m.path / ".#x")
    expect_errno(errno.EROFS, os.utime, m.path / "a.md", (1, 1))
    assert m.content("/a.md") == "A"
    assert [v.operation for v in m.versions()] == ["created", "created"]


def test_archived_store_mounts_read_only(mount_factory, sdk):
    m = mount_factory(mount=False, memories={"/a.md": "A"})
    sdk.beta.memory_stores.archive(m.store_id)
    assert m.mount().returncode == 0
    assert (m.path / "a.md").read_text() == "A"
    expect_errno(errno.EROFS, open, m.path / "b.md", "w")


def test_remote_changes_show_up(mount_factory):
    m = mount_factory(memories={"/a.md": "one"})
    assert (m.path / "a.md").read_text() == "one"
    assert (m.path / "a.md").read_text() == "one"  # second open: kernel cache kept
    m.put("/a.md", "two, longer")
    wait_for(lambda: (m.path / "a.md").read_text() == "two, longer", timeout=5)
    m.put("/b.md", "new remote")
    wait_for(lambda: "b.md" in os.listdir(m.path), timeout=5)
    memory = m.memories()["/a.md"]
    m.sdk.beta.memory_stores.memories.delete(memory.id, memory_store_id=m.store_id)
    wait_for(lambda: not (m.path / "a.md").exists(), timeout=5)


@pytest.mark.parametrize("feed", ["auto", "poll"])
def test_directories_made_and_emptied_elsewhere_follow(mount_factory, feed):
    # Cached listings are patched from the change feed: a memory in a new directory adds the
    # directory to its parent, at any depth; deleting the last memory of one removes it.
    m = mount_factory("--change-feed", feed, memories={"/a/x.md": "x", "/b.md": "b"})
    assert sorted(os.listdir(m.path)) == ["a", "b.md"] and os.listdir(m.path / "a") == ["x.md"]
    m.put("/a/new/deeper/y.md", "y")
    m.put("/c/z.md", "z")
    wait_for(lambda: sorted(os.listdir(m.path)) == ["a", "b.md", "c"], timeout=5)
    wait_for(lambda: sorted(os.listdir(m.path / "a")) == ["new", "x.md"], timeout=5)
    assert (m.path / "a" / "new" / "deeper" / "y.md").read_text() == "y"
    assert (m.path / "c" / "z.md").read_text() == "z"  # the kernel now holds entries for c
    memory = m.memories()["/a/x.md"]
    m.sdk.beta.memory_stores.memories.delete(memory.id, memory_store_id=m.store_id)
    memory = m.memories()["/c/z.md"]
    m.sdk.beta.memory_stores.memories.delete(memory.id, memory_store_id=m.store_id)
    wait_for(lambda: not (m.path / "c").exists(), timeout=5)  # a stat, not a listing
    assert sorted(os.listdir(m.path)) == ["a", "b.md"]
    assert os.listdir(m.path / "a") == ["new"]


def test_files_moved_elsewhere_to_a_new_directory_follow(mount_factory):
    m = mount_factory(memories={"/d/x.md": "x", "/d/y.md": "y", "/b.md": "b"})
    assert (m.path / "d" / "x.md").read_text() == "x" and (m.path / "d" / "y.md").exists()
    for path in ("/d/x.md", "/d/y.md"):
        memory = m.memories()[path]
        m.sdk.beta.memory_stores.memories.update(
            memory.id, memory_store_id=m.store_id, path=path.replace("/d/", "/e/f/")
        )
    wait_for(lambda: not (m.path / "d").exists(), timeout=5)
    wait_for(lambda: (m.path / "e" / "f" / "x.md").exists(), timeout=5)
    assert (m.path / "e" / "f" / "y.md").read_text() == "y"
    assert sorted(os.listdir(m.path)) == ["b.md", "e"]


@pytest.mark.parametrize("feed", ["auto", "poll"])
def test_a_name_looked_up_in_vain_appears_when_created(mount_factory, feed):
    m = mount_factory("--change-feed", feed, memories={"/a.md": "A"})
    remote, local = m.path / "later.md", m.path / "local.md"
    assert not remote.exists() and not local.exists()  # negative entries, kept for a second
    m.put("/later.md", "made elsewhere")
    wait_for(lambda: remote.exists() and remote.read_text() == "made elsewhere", timeout=5)
    local.write_text("made here")  # right after the failed lookup
    assert local.read_text() == "made here" and "local.md" in os.listdir(m.path)


def test_conflict_reports_estale_and_shows_the_remote_version(mount_factory):
    m = mount_factory(memories={"/a.md": "base"})
    fd = os.open(m.path / "a.md", os.O_RDWR)
    try:
        os.read(fd, 10)
        m.put("/a.md", "remote edit")
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, b"local edit")
        expect_errno(errno.ESTALE, os.fsync, fd)
        # the file is re-based on the remote version; the local content is the conflict copy
        wait_for(lambda: os.pread(fd, 100, 0) == b"remote edit", timeout=5)
    finally:
        os.close(fd)  # reported once: close after the fsync succeeds
    m.settle()
    assert m.content("/a.md") == "remote edit"
    [copy] = [p for p in m.paths() if p.startswith("/a.conflict-")]
    assert m.content(copy) == "local edit"
    assert "CONFLICT" in m.log()
    # a new save after the report is an update of the remote version (with its precondition)
    with open(m.path / "a.md", "w") as f:
        f.write("resolved")
    m.settle()
    assert m.content("/a.md") == "resolved"


def test_mount_point_not_empty_refused(mount_factory):
    m = mount_factory(mount=False)
    (m.path / "existing").write_text("mine")
    result = m.mount()
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0
    assert "not empty" in result.stderr
    assert (m.path / "existing").read_text() == "mine"
    assert not os.path.ismount(m.path)


def test_mount_point_missing(mount_factory, tmp_path):
    m = mount_factory(mount=False)
    result = memfs("mount", m.store_id, str(tmp_path / "nope"), env=m.env)
    assert result.returncode == 1
    assert "does not exist" in result.stderr and result.stderr.count("\n") == 1


def test_store_not_found(mount_factory):
    m = mount_factory(mount=False)
    name = m.sdk.beta.memory_stores.retrieve(m.store_id).name
    m.store_id = name + "x"  # a name one letter off: the real one is suggested
    result = m.mount()
    assert result.returncode == 3  # as `memfs stores show` (README, "Exit codes")
    # the closest first (other tests' stores may be near too)
    assert result.stderr.startswith(
        f"memfs mount: memory store {name + 'x'!r} not found; did you mean {name!r}"
    )
    assert result.stderr.endswith("? `memfs stores list` lists them\n")
    assert not os.path.ismount(m.path)


def test_bad_key(mount_factory):
    m = mount_factory(mount=False)
    m.env = dict(m.env, ANTHROPIC_API_KEY="sk-wrong-key-xxxxxxxxxxxxxxxxxxxx")
    result = m.mount()
    assert result.returncode == 5  # as `memfs stores list`
    base_url = m.env["ANTHROPIC_BASE_URL"]
    assert result.stderr == (
        f"memfs mount: the API key in ANTHROPIC_API_KEY was refused by {base_url} "
        "(401 authentication_error)\n"
    )
    assert "sk-wrong" not in result.stderr + m.log()
    listing = memfs("stores", "list", env=m.env)
    assert listing.returncode == 5 and "ANTHROPIC_API_KEY" in listing.stderr


def test_server_down(fresh_server, tmp_path):
    env = fresh_server.client_env()
    fresh_server.stop()
    point = tmp_path / "mnt"
    point.mkdir()
    start = time.monotonic()
    result = memfs("mount", "anything", str(point), env=env)
    assert result.returncode == 6  # as `memfs stores list`
    assert "cannot reach" in result.stderr and result.stderr.count("\n") == 1
    assert time.monotonic() - start < 30
    assert not os.path.ismount(point)


def test_by_name_and_session_attribution(mount_factory, sdk):
    m = mount_factory(mount=False)
    store_id, m.store_id = m.store_id, m.store_name
    assert m.mount("--session-id", "sesn_test123").returncode == 0
    m.store_id = store_id
    (m.path / "s.md").write_text("by session")
    m.settle()
    versions = m.versions()
    assert versions[0].created_by.type == "session_actor"
    assert versions[0].created_by.session_id == "sesn_test123"


# Runs `memfs mount` in this process, lists the mount at once, and prints (last line) its exit
# status, the listing, and the heavy modules this parent process imported.
MOUNT_AND_REPORT = """
import json, os, sys
from memfs.cli import main
status = main(sys.argv[1:])
heavy = ("pyfuse3", "trio", "httpx", "memfs.core", "memfs.mount.daemon")
loaded = sorted(m for m in heavy if m in sys.modules)
print(json.dumps({"status": status, "ls": sorted(os.listdir(sys.argv[3])), "loaded": loaded}))
"""


def test_mount_returns_usable_and_its_parent_leaves_the_filesystem_to_the_daemon(mount_factory):
    # Only the daemon imports pyfuse3, trio and the core: a mount pays for them once. When
    # `memfs mount` returns, the mount answers at once.
    m = mount_factory(mount=False, memories={"/a.md": "a", "/d/b.md": "b"})
    argv = ["mount", m.store_id, str(m.path), "--log-file", str(m.log_file)]
    proc = subprocess.run(
        [sys.executable, "-c", MOUNT_AND_REPORT, *argv],
        env=m.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.splitlines()[-1])
    assert report == {"status": 0, "ls": ["a.md", "d"], "loaded": []}, proc.stderr
    assert m.umount().returncode == 0
