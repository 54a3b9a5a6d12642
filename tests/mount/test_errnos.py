"""Every errno of the table (docs/semantics.md "Errors") through a real mount on a real server.

Faults the server can produce for real: a full store (seeded through the server's own storage
layer on a private server's database), a refused key (the private server restarted with other
keys), a server that is down (stopped), an archived store. Plain filesystem correctness (holes,
``O_EXCL``/``O_APPEND``/``O_TRUNC``) is compared side by side with a local directory.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import pytest
import trio

from kit.mounts import (
    RENAME_EXCHANGE,
    RENAME_NOREPLACE,
    RENAME_WHITEOUT,
    MountedStore,
    memfs,
    renameat2,
)
from kit.servers import OTHER_KEY
from kit.waiting import wait_for
from memfs.contract.models import Actor
from memfs.server.backends.sqlite import SqliteStorage

LIMIT = 102_400


def expect_errno(number: int, func: Callable[..., Any], *args: Any, **kwargs: Any) -> OSError:
    with pytest.raises(OSError) as info:
        func(*args, **kwargs)
    got = info.value.errno
    assert got == number, (
        f"{func.__name__}{args}: {errno.errorcode.get(got)} != " + (errno.errorcode[number])
    )
    return info.value


def write_file(path: Path, data: bytes, flags: int = os.O_CREAT | os.O_WRONLY | os.O_TRUNC) -> None:
    fd = os.open(path, flags, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def mount_options(point: Path) -> set[str]:
    """The kernel's options of the mount at ``point`` (from /proc/mounts)."""
    with open("/proc/mounts") as mounts:
        for line in mounts:
            fields = line.split()
            if fields[1] == str(point):
                return set(fields[3].split(","))
    raise AssertionError(f"{point} is not mounted")


# -- mounts on a private server ----------------------------------------------------------------


def seed(db: Path, store_id: str, count: int, prefix: str = "/seed/") -> list[str]:
    """Create ``count`` memories through the server's storage layer (fast, same transactions);
    return their ids."""

    async def run() -> list[str]:
        storage = await SqliteStorage.open(db)
        actor = Actor(type="api_actor", id="seed")
        try:
            return [
                (
                    await storage.create_memory(
                        store_id, path=f"{prefix}m{i:04d}.md", content=str(i), actor=actor
                    )
                ).id
                for i in range(count)
            ]
        finally:
            await storage.aclose()

    return trio.run(run)


def exists(m: MountedStore, memory_id: str) -> bool:
    try:
        m.sdk.beta.memory_stores.memories.retrieve(memory_id, memory_store_id=m.store_id)
    except anthropic.NotFoundError:
        return False
    return True


# -- the store behind the mount refuses ----------------------------------------------------------


def test_store_full_enospc(private_mount, fresh_server):
    m = private_mount(mount=False)
    ids = seed(fresh_server.db, m.store_id, 2_000)
    assert m.mount().returncode == 0
    # statfs counts the store (20 pages) and answers a partial count if that takes > 0.5 s
    wait_for(lambda: os.statvfs(m.path).f_ffree == 0, timeout=10)
    fd = os.open(m.path / "one-too-many.md", os.O_CREAT | os.O_WRONLY)
    try:
        os.write(fd, b"no room")
        expect_errno(errno.ENOSPC, os.fsync, fd)
    finally:
        os.close(fd)  # reported once (by the fsync)
    assert (m.path / "one-too-many.md").read_bytes() == b"no room"  # kept locally
    assert "one-too-many.md" in os.listdir(m.path)
    # an existing memory can still be edited: the limit counts memories, not saves
    with open(m.path / "seed" / "m0000.md", "w") as f:
        f.write("edited")
        f.flush()
        os.fsync(f.fileno())
    edited = m.sdk.beta.memory_stores.memories.retrieve(ids[0], memory_store_id=m.store_id)
    assert edited.content == "edited"
    # nothing lost: once there is room, the kept file uploads (a failure is reported once)
    os.unlink(m.path / "seed" / "m0001.md")
    wait_for(lambda: not exists(m, ids[1]), timeout=8)

    def fsync_ok() -> bool:
        fd = os.open(m.path / "one-too-many.md", os.O_WRONLY)
        try:
            os.fsync(fd)
            return True
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
            return False
        finally:
            os.close(fd)

    wait_for(fsync_ok, timeout=5, interval=0.2)
    assert m.content("/one-too-many.md") == "no room"


def test_full_store_uploads_waiting_creates_once_room_appears(private_mount, fresh_server):
    """Issue 11 item 6: a create refused because the store is full waits for room; directory
    fsync (of any directory) says ENOSPC while it waits and retries it; an unmount meanwhile
    says so and keeps it in the journal for the next mount; the change feed's deletes retry it
    too."""
    waiting = "waits for room"
    # a mount whose change feed would not notice deletes for 30 s: room found by fsync alone
    slow_feed = ("--change-feed", "poll", "--poll-interval", "30", "--idle-poll-interval", "30")
    m = private_mount(*slow_feed, mount=False)
    ids = seed(fresh_server.db, m.store_id, 2_000)
    assert m.mount().returncode == 0
    os.mkdir(m.path / "sub")
    (m.path / "sub" / "newfile.md").write_text("new\n")  # closed: uploaded in the background
    wait_for(lambda: m.log().count(waiting) == 1, timeout=10)
    expect_errno(errno.ENOSPC, m.settle)  # still waiting: directory fsync says so
    sub = os.open(m.path / "sub", os.O_RDONLY | os.O_DIRECTORY)
    try:
        expect_errno(errno.ENOSPC, os.fsync, sub)  # ... the fsync of its own directory too
    finally:
        os.close(sub)
    line = "waiting for room (the store is full): /sub/newfile.md"
    wait_for(lambda: line in memfs("status", str(m.path), env=m.env).stdout, timeout=5)
    result = m.umount()  # still no room: it names the file, kept for the next mount
    assert result.returncode == 1
    assert "/sub/newfile.md: waiting for room (the store is full)" in result.stderr, result.stderr
    assert "(replayed at next mount)" in result.stderr
    assert m.mount().returncode == 0  # replays it: it waits for room again
    wait_for(lambda: line in memfs("status", str(m.path), env=m.env).stdout, timeout=5)
    m.sdk.beta.memory_stores.memories.delete(ids[0], memory_store_id=m.store_id)
    m.settle()  # retries the waiting create
    assert m.content("/sub/newfile.md") == "new\n"
    assert m.umount().returncode == 0
    # a mount that follows the change feed: deletes made elsewhere retry it with no fsync
    m2 = private_mount(store_id=m.store_id)
    (m2.path / "other.md").write_text("other\n")
    wait_for(lambda: m2.log().count(waiting) == 1, timeout=10)
    expect_errno(errno.ENOSPC, m2.settle)
    m2.sdk.beta.memory_stores.memories.delete(ids[1], memory_store_id=m.store_id)
    wait_for(lambda: m2.content("/other.md") == "other\n", timeout=10)
    m2.settle()
    result = m2.umount()
    assert result.returncode == 0, result.stderr


def test_key_refused_mid_mount_eacces(private_mount, fresh_server):
    m = private_mount(memories={"/a.md": "A", "/d/b.md": "B"})
    assert (m.path / "a.md").read_text() == "A"
    fd = os.open(m.path / "new.md", os.O_CREAT | os.O_RDWR)
    try:
        os.write(fd, b"refused")
        fresh_server.keys = [OTHER_KEY]  # the mount's key is no longer known
        fresh_server.restart()

        def refused(directory: Path) -> bool:  # the mount noticed: feed down, listing expired
            try:
                os.listdir(directory)
            except PermissionError:
                return True
            return False

        wait_for(lambda: refused(m.path / "d") and refused(m.path), timeout=15)
        expect_errno(errno.EACCES, (m.path / "d" / "b.md").read_text)
        expect_errno(errno.EACCES, os.open, m.path / "other.md", os.O_CREAT | os.O_WRONLY)
        expect_errno(errno.EACCES, os.fsync, fd)
        assert os.pread(fd, 100, 0) == b"refused"  # kept locally
    finally:
        # a background retry of the upload may be refused again, and close says so
        with contextlib.suppress(PermissionError):
            os.close(fd)
    assert fresh_server.api_key not in m.log() and OTHER_KEY not in m.log()


def test_server_down_eio_and_cached_data(private_mount, fresh_server):
    m = private_mount(
        "--fsync-timeout", "2", memories={"/cached.md": "have it", "/uncached.md": "never read"}
    )
    held = os.open(m.path / "cached.md", os.O_RDONLY)
    new = os.open(m.path / "new.md", os.O_CREAT | os.O_RDWR)
    try:
        assert os.read(held, 100) == b"have it"
        os.stat(m.path / "uncached.md")  # known by name, content never fetched
        os.write(new, b"written while down")
        fresh_server.stop()
        started = time.monotonic()
        expect_errno(errno.EIO, (m.path / "uncached.md").read_bytes)
        print("read EIO after", time.monotonic() - started)
        # data at hand is still readable: an open file keeps its content
        assert os.pread(held, 100, 0) == b"have it"
        # an upload that cannot reach the server: EIO from fsync after --fsync-timeout of
        # retries, the content kept
        started = time.monotonic()
        expect_errno(errno.EIO, os.fsync, new)
        assert 1.5 <= time.monotonic() - started < 15
        assert os.pread(new, 100, 0) == b"written while down"
        fresh_server.start()
        os.fsync(new)
        assert m.content("/new.md") == "written while down"
    finally:
        os.close(held)
        os.close(new)


# -- read-only: every mutation by every process -----------------------------------------------


def mutations(p: Path) -> list[tuple[str, Callable[[], Any]]]:
    """Every kind of change, on a tree holding ``a.md`` and ``d/b.md``."""
    return [
        ("create", lambda: os.open(p / "new.md", os.O_CREAT | os.O_WRONLY)),
        ("create local-only", lambda: os.open(p / ".a.md.swp", os.O_CREAT | os.O_WRONLY)),
        ("open O_WRONLY", lambda: os.open(p / "a.md", os.O_WRONLY)),
        ("open O_RDWR", lambda: os.open(p / "a.md", os.O_RDWR)),
        ("open O_APPEND", lambda: os.open(p / "a.md", os.O_WRONLY | os.O_APPEND)),
        ("open O_TRUNC", lambda: os.open(p / "a.md", os.O_RDONLY | os.O_TRUNC)),
        ("truncate", lambda: os.truncate(p / "a.md", 0)),
        ("unlink", lambda: os.unlink(p / "a.md")),
        ("rename", lambda: os.rename(p / "a.md", p / "c.md")),
        ("rename over", lambda: os.rename(p / "a.md", p / "d" / "b.md")),
        ("rename dir", lambda: os.rename(p / "d", p / "e")),
        ("rename noreplace", lambda: renameat2(p / "a.md", p / "f.md", RENAME_NOREPLACE)),
        ("mkdir", lambda: os.mkdir(p / "e")),
        ("rmdir", lambda: os.rmdir(p / "d")),
        ("utime", lambda: os.utime(p / "a.md", (1, 1))),
        ("chmod", lambda: os.chmod(p / "a.md", 0o600)),
        ("chown", lambda: os.chown(p / "a.md", 0, 0)),
        ("symlink", lambda: os.symlink("x", p / ".#a.md")),
        ("link", lambda: os.link(p / "a.md", p / "hard.md")),
        ("mkfifo", lambda: os.mkfifo(p / "fifo")),
        ("mknod", lambda: os.mknod(p / "dev", stat.S_IFCHR | 0o600, os.makedev(1, 3))),
    ]


def assert_every_mutation_erofs(p: Path) -> None:
    wrong = {}
    for name, change in mutations(p):
        try:
            result = change()
        except OSError as exc:
            if exc.errno != errno.EROFS:
                wrong[name] = errno.errorcode.get(exc.errno or 0)
            continue
        if isinstance(result, int):
            os.close(result)
        wrong[name] = "succeeded"
    assert wrong == {}
    shell = subprocess.run(
        ["bash", "-c", f"echo hi >> {p}/a.md; touch {p}/t.md; mkdir {p}/x; cp {p}/a.md {p}/y.md"],
        capture_output=True,
        text=True,
    )
    assert shell.returncode != 0
    assert shell.stderr.count("Read-only file system") == 4, shell.stderr
    assert sorted(os.listdir(p)) == ["a.md", "d"]
    assert (p / "a.md").read_text() == "A"


def test_read_only_mount_every_mutation_erofs(mount_factory):
    m = mount_factory("--read-only", memories={"/a.md": "A", "/d/b.md": "B"})
    assert_every_mutation_erofs(m.path)
    assert [v.operation for v in m.versions()] == ["created", "created"]
    assert "ro" in mount_options(m.path)


def test_archived_store_every_mutation_erofs(mount_factory, sdk):
    m = mount_factory(mount=False, memories={"/a.md": "A", "/d/b.md": "B"})
    sdk.beta.memory_stores.archive(m.store_id)
    assert m.mount().returncode == 0
    assert_every_mutation_erofs(m.path)


def test_store_archived_while_mounted(mount_factory, sdk):
    m = mount_factory(memories={"/a.md": "A", "/d/b.md": "B"})
    assert (m.path / "a.md").read_text() == "A"
    fd = os.open(m.path / "a.md", os.O_RDWR)
    try:
        sdk.beta.memory_stores.archive(m.store_id)
        os.write(fd, b"Z")  # still accepted: nothing has told the mount yet
        expect_errno(errno.EROFS, os.fsync, fd)  # the first refused upload
        expect_errno(errno.EROFS, os.write, fd, b"more")
    finally:
        os.close(fd)
    # the content kept locally is still what reads back; the store is unchanged
    assert m.content("/a.md") == "A"
    # the rest is refused by the daemon itself (the kernel mount is not ro)
    wrong = {}
    for name, change in mutations(m.path):
        if name in ("open O_TRUNC", "truncate"):
            continue  # checked below on the other file (a.md holds local content)
        try:
            result = change()
        except OSError as exc:
            if exc.errno != errno.EROFS:
                wrong[name] = errno.errorcode.get(exc.errno or 0)
            continue
        if isinstance(result, int):
            os.close(result)
        wrong[name] = "succeeded"
    assert wrong == {}
    expect_errno(errno.EROFS, os.truncate, m.path / "d" / "b.md", 0)
    assert [v.operation for v in m.versions()] == ["created", "created"]
    assert "read-only" in m.log()


# -- names ------------------------------------------------------------------------------------


def test_name_errors(mount_factory):
    m = mount_factory(memories={"/a.md": "A", "/d/b.md": "B"})
    p = m.path
    long_name = "n" * 256
    for make in (
        lambda q: os.open(q, os.O_CREAT | os.O_WRONLY),
        os.mkdir,
        lambda q: os.rename(p / "a.md", q),
        lambda q: os.symlink("x", q),
    ):
        expect_errno(errno.ENAMETOOLONG, make, p / long_name)
        expect_errno(errno.ENAMETOOLONG, make, p / ("é" * 128))  # 256 bytes, 128 characters
    os.close(os.open(p / ("n" * 255), os.O_CREAT | os.O_WRONLY))  # 255 bytes is fine
    # a path over 1,024 bytes (each name fine on its own)
    deep = p
    for i in range(4):
        deep = deep / (str(i) * 250)
        os.mkdir(deep)
    assert len(str(deep.relative_to(p))) + 1 == 1_004
    expect_errno(errno.ENAMETOOLONG, os.open, deep / ("z" * 30), os.O_CREAT | os.O_WRONLY)
    expect_errno(errno.ENAMETOOLONG, os.mkdir, deep / ("z" * 30))
    expect_errno(errno.ENAMETOOLONG, os.rename, p / "a.md", deep / ("z" * 30))
    os.close(os.open(deep / ("z" * 19), os.O_CREAT | os.O_WRONLY))  # exactly 1,024 bytes
    # control and format characters, names that are not NFC: EINVAL everywhere
    for bad in ("tab\there", "nl\nx", "del\x7f", "esc\x1b", "zw\u200bsp", "bom\ufeff", "e\u0301"):
        for make in (
            lambda q: os.open(q, os.O_CREAT | os.O_WRONLY),
            os.mkdir,
            lambda q: os.rename(p / "a.md", q),
        ):
            expect_errno(errno.EINVAL, make, p / bad)
    expect_errno(errno.EINVAL, os.mkdir, p / "d" / "bad\x01")
    m.settle()
    assert m.paths() == {
        "/a.md",
        "/d/b.md",
        "/" + "n" * 255,
        "/" + str(deep.relative_to(p)) + "/" + "z" * 19,
    }


# -- content ----------------------------------------------------------------------------------


def test_not_utf8_eilseq_kept_locally(mount_factory):
    m = mount_factory(memories={"/a.md": "A"})
    p = m.path
    # fsync, then close: refused once each, nothing stored, the bytes stay readable
    fd = os.open(p / "bin.md", os.O_CREAT | os.O_RDWR)
    os.write(fd, b"ok \xff\xfe")
    expect_errno(errno.EILSEQ, os.fsync, fd)
    expect_errno(errno.EILSEQ, os.close, fd)
    assert (p / "bin.md").read_bytes() == b"ok \xff\xfe"
    # an existing memory made invalid in place: refused at close, the memory unchanged
    with pytest.raises(OSError) as info, open(p / "a.md", "ab") as f:
        f.write(b"\xc3")  # a truncated two-byte sequence
    assert info.value.errno == errno.EILSEQ
    assert (p / "a.md").read_bytes() == b"A\xc3"
    # a temp file renamed onto a memory path (the sed/perl/Python pattern), or a free one
    write_file(p / "tmp~", b"\x80")
    expect_errno(errno.EILSEQ, os.rename, p / "tmp~", p / "other.md")
    expect_errno(errno.EILSEQ, renameat2, p / "tmp~", p / "a.md", RENAME_NOREPLACE * 0)
    assert (p / "tmp~").read_bytes() == b"\x80"
    # a shell redirection swallows the error, but the refusal is in the log and nothing stored
    subprocess.run(["bash", "-c", f"printf '\\xff' > {p}/shell.md"], check=True)
    m.pass_marker()  # an upload of shell.md would have run before the marker's
    assert m.paths() == {"/a.md", "/marker.md"}
    assert m.content("/a.md") == "A"
    assert "not UTF-8" in m.log()
    # fixing the content uploads it
    write_file(p / "bin.md", b"fixed")
    m.settle()
    assert m.content("/bin.md") == "fixed"


def test_truncate_and_ftruncate_of_refused_content_alike(mount_factory):
    """Issue 20 item 11: ``truncate(2)`` and ``ftruncate(2)`` to content the store refuses
    (not UTF-8) fail alike, at once, changing nothing; to valid text, both end the refusal."""
    m = mount_factory()

    def truncate_by_path(path: Path, size: int) -> list[object]:
        try:
            os.truncate(path, size)
        except OSError as exc:
            return ["truncate", errno.errorcode[exc.errno or 0]]
        return ["truncate", 0]

    def truncate_by_fd(path: Path, size: int) -> list[object]:
        seen: list[object] = []
        fd = os.open(path, os.O_WRONLY)
        try:
            os.ftruncate(fd, size)
            seen += ["truncate", 0]
        except OSError as exc:
            seen += ["truncate", errno.errorcode[exc.errno or 0]]
        finally:
            try:
                os.close(fd)  # an open for writing hears a refusal still standing
            except OSError as exc:
                seen += ["close", errno.errorcode[exc.errno or 0]]
        return seen

    outcomes = {}
    for name, cut in (("path", truncate_by_path), ("fd", truncate_by_fd)):
        t = m.path / name
        subprocess.run(["bash", "-c", f"printf 'a\\xff\\xfe' > {t}"], check=True)
        refused = cut(t, 2)  # still not UTF-8
        after_refused = t.read_bytes()
        valid = cut(t, 1)  # valid text: the refusal ends
        outcomes[name] = (refused, after_refused, valid, t.read_bytes())
    assert outcomes["path"][0] == ["truncate", "EILSEQ"]
    assert outcomes["fd"] == (
        ["truncate", "EILSEQ", "close", "EILSEQ"],
        b"a\xff\xfe",
        ["truncate", 0],
        b"a",
    )
    assert outcomes["path"][1:] == outcomes["fd"][1:]
    m.settle()
    assert (m.content("/path"), m.content("/fd")) == ("a", "a")
    wait_for(lambda: m.status()["refused"]["files"] == [], timeout=5)


def test_nul_is_stored_and_truncate_grows_files(mount_factory):
    """Issue 31: memfs server stores any content the API allows, NUL included (escaped on
    PostgreSQL: tests/postgres), and no longer announces ``refuses_nul``: a Memory Stores mount
    grows files by ``truncate`` and ``ftruncate`` again (the NULs they add are saved, as
    pjdfstest and libfuse's test_syscalls expect), and a content ending in NUL round-trips.
    (Before: each was EINVAL, the refusal of a character the store refused.)"""
    m = mount_factory(memories={"/a.md": "one\n"})
    p = m.path
    os.truncate(p / "a.md", 10)
    assert (p / "a.md").read_bytes() == b"one\n" + b"\0" * 6
    fd = os.open(p / "b.md", os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.write(fd, b"x")
        os.ftruncate(fd, 4)
        os.fsync(fd)  # on the server now
    finally:
        os.close(fd)
    assert m.content("/b.md") == "x\0\0\0"
    write_file(p / "c.md", b"a\0b ends in NUL\0")  # printf 'a\0b ends in NUL\0' > c.md
    m.settle()
    assert m.content("/a.md") == "one\n" + "\0" * 6
    assert m.content("/c.md") == "a\0b ends in NUL\0"
    assert m.status()["refused"]["files"] == []
    assert (p / "c.md").read_bytes() == b"a\0b ends in NUL\0"


def write_or_efbig(fd: int, data: bytes) -> int:
    """Bytes written by a write that crosses the limit: 0 for EFBIG, or a short count.

    The kernel splits a large write that starts inside a page into the rest of that page and
    then big pieces; the daemon refuses the piece that crosses the limit (EFBIG), so a caller
    sees EFBIG or, when an earlier piece was taken, a short write. Never more than the limit.
    """
    try:
        return os.write(fd, data)
    except OSError as exc:
        assert exc.errno == errno.EFBIG
        return 0


def test_efbig_at_the_crossing_write(mount_factory):
    m = mount_factory(memories={"/a.md": "A"})
    p = m.path
    fd = os.open(p / "big.md", os.O_CREAT | os.O_RDWR)
    try:
        assert os.write(fd, b"x" * 100_000) == 100_000
        assert write_or_efbig(fd, b"y" * 2_401) < 2_401  # would end at 102,401
        assert os.fstat(fd).st_size <= LIMIT
        os.pwrite(fd, b"y" * 2_400, 100_000)  # exactly 102,400: fine
        expect_errno(errno.EFBIG, os.write, fd, b"z")
        expect_errno(errno.EFBIG, os.pwrite, fd, b"z", LIMIT)
        expect_errno(errno.EFBIG, os.pwrite, fd, b"z", 1 << 40)
        expect_errno(errno.EFBIG, os.ftruncate, fd, LIMIT + 1)
        assert os.fstat(fd).st_size == LIMIT
    finally:
        # what this open left is refused (never uploaded): its close says so
        expect_errno(errno.EFBIG, os.close, fd)
    fd = os.open(p / "a.md", os.O_WRONLY | os.O_APPEND)
    try:
        assert write_or_efbig(fd, b"q" * LIMIT) < LIMIT  # appended, it would cross
        assert os.fstat(fd).st_size <= LIMIT
        os.ftruncate(fd, 1)  # back to "A": nothing is uploaded
    finally:
        os.close(fd)
    for size in (LIMIT + 1, 1 << 40, (1 << 63) - 1):
        expect_errno(errno.EFBIG, os.truncate, p / "a.md", size)
    # cp of a file over the limit fails loudly
    source = m.path.parent / "large.txt"
    source.write_bytes(b"L" * (LIMIT + 10))
    cp = subprocess.run(["cp", str(source), str(p / "copy.md")], capture_output=True, text=True)
    assert cp.returncode != 0 and "File too large" in cp.stderr
    m.settle()
    assert m.content("/a.md") == "A"
    # big.md's last writes were refused: it is not uploaded (docs/semantics.md, Refused files)
    assert m.content("/big.md") is None
    os.truncate(p / "big.md", LIMIT)  # a truncate ends the refusal: uploaded at once
    m.settle()
    assert m.content("/big.md") == "x" * 100_000 + "y" * 2_400
    assert max(x.content_size_bytes for x in m.memories().values()) == LIMIT
    assert os.stat(p).st_ino == 1  # the daemon is alive


# -- namespace refusals -----------------------------------------------------------------------


def test_renameat2_flags(mount_factory):
    m = mount_factory(memories={"/a.md": "A", "/b.md": "B", "/d/c.md": "C"})
    p = m.path
    write_file(p / "x.md~", b"local")
    os.mkdir(p / "e")
    for target in ("b.md", "x.md~", "d", "e"):
        expect_errno(errno.EEXIST, renameat2, p / "a.md", p / target, RENAME_NOREPLACE)
        expect_errno(errno.EINVAL, renameat2, p / "a.md", p / target, RENAME_EXCHANGE)
    expect_errno(errno.EINVAL, renameat2, p / "d", p / "e", RENAME_EXCHANGE)
    # a flag no tree serves is EINVAL, never a plain rename (issue 31)
    expect_errno(errno.EINVAL, renameat2, p / "a.md", p / "w.md", RENAME_WHITEOUT)
    versions = p / ".versions"
    moment = versions / sorted(os.listdir(versions))[0]
    expect_errno(errno.EINVAL, renameat2, moment, versions / "y", RENAME_WHITEOUT)
    renameat2(p / "a.md", p / "new.md", RENAME_NOREPLACE)
    renameat2(p / "d", p / "f", RENAME_NOREPLACE)
    assert sorted(os.listdir(p)) == ["b.md", "e", "f", "new.md", "x.md~"]
    m.settle()
    assert m.paths() == {"/b.md", "/new.md", "/f/c.md"}
    assert m.content("/b.md") == "B"


def test_links_special_files_symlinks_eperm(mount_factory):
    m = mount_factory(memories={"/a.md": "A"})
    p = m.path
    write_file(p / "a.md~", b"backup")
    expect_errno(errno.EPERM, os.link, p / "a.md", p / "hard.md")
    expect_errno(errno.EPERM, os.link, p / "a.md~", p / "b.md~")  # local-only too
    expect_errno(errno.EPERM, os.mkfifo, p / "fifo")
    expect_errno(errno.EPERM, os.mknod, p / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    expect_errno(errno.EPERM, os.symlink, "a.md", p / "sym.md")
    expect_errno(errno.EPERM, os.symlink, "a.md", p / "4912")
    ln = subprocess.run(["ln", "-s", "a.md", str(p / "l.md")], capture_output=True, text=True)
    assert ln.returncode != 0 and "Operation not permitted" in ln.stderr
    os.symlink("user@host.42:1", p / ".#a.md")  # an Emacs lock is local-only: allowed
    assert os.readlink(p / ".#a.md") == "user@host.42:1"
    expect_errno(errno.EPERM, os.rename, p / ".#a.md", p / "lock.md")  # no symlink memories
    os.unlink(p / ".#a.md")
    m.settle()
    assert m.paths() == {"/a.md"}


def test_xattrs_not_supported(mount_factory):
    m = mount_factory(memories={"/a.md": "A"})
    target = m.path / "a.md"
    for call in (
        lambda: os.setxattr(target, "user.x", b"1"),
        lambda: os.getxattr(target, "user.x"),
        lambda: os.removexattr(target, "user.x"),
    ):
        with pytest.raises(OSError) as info:
            call()
        assert info.value.errno in (errno.ENOSYS, errno.ENOTSUP), info.value
    with pytest.raises(OSError) as info:
        os.listxattr(target)
    assert info.value.errno == errno.ENOTSUP  # the kernel turns ENOSYS into ENOTSUP here
    if shutil.which("setfattr") is None:
        return  # the Debian package "attr"
    for command in (
        ["setfattr", "-n", "user.x", "-v", "1", str(target)],
        ["getfattr", "-n", "user.x", str(target)],
        ["getfattr", "-d", str(target)],
    ):
        tool = subprocess.run(command, capture_output=True, text=True)
        assert tool.returncode == 1 and tool.stdout == "", command
        assert tool.stderr.endswith(": Operation not supported\n"), tool.stderr
    assert (m.path / "a.md").read_text() == "A"


def test_rmdir_enotempty(mount_factory):
    m = mount_factory(memories={"/d/a.md": "A", "/e/sub/b.md": "B"})
    p = m.path
    expect_errno(errno.ENOTEMPTY, os.rmdir, p / "d")
    expect_errno(errno.ENOTEMPTY, os.rmdir, p / "e")  # only a subdirectory inside
    os.mkdir(p / "f")
    write_file(p / "f" / ".x.md.swp", b"swap")  # only a local-only file inside
    expect_errno(errno.ENOTEMPTY, os.rmdir, p / "f")
    os.mkdir(p / "g")
    write_file(p / "g" / "new.md", b"not uploaded yet")
    expect_errno(errno.ENOTEMPTY, os.rmdir, p / "g")
    expect_errno(errno.ENOTEMPTY, os.rename, p / "f", p / "d")  # over a non-empty directory
    expect_errno(errno.ENOTDIR, os.rmdir, p / "d" / "a.md")
    os.unlink(p / "f" / ".x.md.swp")
    os.rmdir(p / "f")
    m.settle()
    assert m.paths() == {"/d/a.md", "/e/sub/b.md", "/g/new.md"}


# -- plain filesystem correctness, side by side with a local directory ------------------------


def posix_scenario(root: Path) -> list[Any]:
    """Run the same calls under ``root``; return what a caller observes (data and errnos)."""
    seen: list[Any] = []

    def attempt(label: str, func: Callable[[], Any]) -> Any:
        try:
            result = func()
        except OSError as exc:
            seen.append((label, errno.errorcode.get(exc.errno or 0)))
            return None
        seen.append(
            (label, "ok" if isinstance(result, int) and label.startswith("open") else result)
        )
        return result

    f = root / "f.md"
    fd = attempt("open excl", lambda: os.open(f, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    os.write(fd, b"hello")
    os.close(fd)
    attempt("open excl again", lambda: os.open(f, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    attempt("open excl dir", lambda: os.open(root / "dir", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    attempt("open missing", lambda: os.open(root / "missing.md", os.O_RDONLY))
    attempt("open dir for write", lambda: os.open(root / "dir", os.O_WRONLY))
    # O_APPEND ignores the offset: every write goes to the end
    fd = os.open(f, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b" world")
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, b"!")
    seen.append(("append pos", os.lseek(fd, 0, os.SEEK_CUR)))
    os.close(fd)
    seen.append(("after append", f.read_bytes()))
    # an appender and a plain writer on the same file
    appender = os.open(f, os.O_WRONLY | os.O_APPEND)
    writer = os.open(f, os.O_WRONLY)
    os.write(writer, b"HE")
    os.write(appender, b"<")
    os.write(writer, b"LL")
    os.write(appender, b">")
    os.close(appender)
    os.close(writer)
    seen.append(("interleaved", f.read_bytes()))
    # O_TRUNC empties at open; reading shows nothing, then new data
    fd = os.open(f, os.O_RDWR | os.O_TRUNC)
    seen.append(("trunc size", os.fstat(fd).st_size))
    seen.append(("trunc read", os.read(fd, 10)))
    os.write(fd, b"abc")
    # a write past the end zero-fills the hole
    os.pwrite(fd, b"Z", 10)
    seen.append(("hole", os.pread(fd, 100, 0)))
    seen.append(("read past end", os.pread(fd, 10, 50)))
    # grown again by a write (an ftruncate that grows a file: test_nul_is_stored_and_truncate_…)
    os.pwrite(fd, b"!", 13)
    seen.append(("grown", os.pread(fd, 100, 0)))
    os.ftruncate(fd, 2)
    seen.append(("shrunk", os.pread(fd, 100, 0)))
    seen.append(("end", os.lseek(fd, 0, os.SEEK_END)))
    os.close(fd)
    # O_TRUNC with nothing written leaves an empty file; O_CREAT|O_APPEND on a new file
    os.close(os.open(root / "g.md", os.O_CREAT | os.O_WRONLY, 0o644))
    write_file(root / "g.md", b"gone", os.O_WRONLY | os.O_TRUNC)
    os.close(os.open(root / "g.md", os.O_WRONLY | os.O_TRUNC))
    seen.append(("truncated", (root / "g.md").read_bytes()))
    fd = os.open(root / "h.md", os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
    os.write(fd, b"1")
    os.write(fd, b"2")
    os.close(fd)
    seen.append(("new append", (root / "h.md").read_bytes()))
    seen.append(("listing", sorted(os.listdir(root))))
    return seen


def test_open_flags_and_holes_match_a_local_disk(mount, tmp_path):
    local = tmp_path / "local"
    local.mkdir()
    for root in (local, mount.path):
        os.mkdir(root / "dir")
    expected = posix_scenario(local)
    assert posix_scenario(mount.path) == expected
    mount.settle()
    for name in ("f.md", "g.md", "h.md"):
        assert mount.content(f"/{name}") == (local / name).read_text()


# -- inodes and directory times ---------------------------------------------------------------


def test_inode_numbers_stable_per_memory(mount_factory):
    m = mount_factory(memories={"/a.md": "A", "/d/b.md": "B"})
    p = m.path
    ino = os.stat(p / "a.md").st_ino
    listed = {e.name: e.inode() for e in os.scandir(p)}
    assert listed["a.md"] == ino
    m.put("/a.md", "changed remotely")
    wait_for(lambda: (p / "a.md").read_text() == "changed remotely", timeout=5)
    assert os.stat(p / "a.md").st_ino == ino
    (p / "a.md").write_text("changed here")
    assert os.stat(p / "a.md").st_ino == ino
    os.rename(p / "a.md", p / "d" / "moved.md")
    assert os.stat(p / "d" / "moved.md").st_ino == ino
    # the kernel forgets its inodes; the daemon still answers the same number for the memory
    with open("/proc/sys/vm/drop_caches", "w") as caches:
        caches.write("2")
    # a later request answered: the kernel hands queued FORGETs to the daemon before the
    # requests behind them, and the daemon handles a FORGET as soon as it reads it
    os.statvfs(p)
    assert os.stat(p / "d" / "moved.md").st_ino == ino
    # numbers are never reused: files created and removed get fresh ones
    seen = {ino, os.stat(p / "d" / "b.md").st_ino, os.stat(p / "d").st_ino, os.stat(p).st_ino}
    for i in range(20):
        path = p / f"t{i}.md~" if i % 2 else p / f"t{i}.md"
        path.write_text("t")
        number = os.stat(path).st_ino
        assert number not in seen
        seen.add(number)
        os.unlink(path)
    m.settle()
    assert m.memories()["/d/moved.md"].id
    assert m.content("/d/moved.md") == "changed here"


def test_parent_directory_mtime_changes(mount_factory):
    m = mount_factory(memories={"/d/a.md": "A"})
    p = m.path

    def changes(directory: Path, action: Callable[[], Any]) -> None:
        before = os.stat(directory).st_mtime_ns
        # deliberate: step past the timestamp granularity so "changed" is visible (a loaded
        # machine only sleeps longer, which keeps it true)
        time.sleep(0.02)
        action()
        after = os.stat(directory).st_mtime_ns
        assert after > before, action

    for directory in (p, p / "d"):
        changes(directory, lambda d=directory: write_file(d / "new.md", b"n"))
        changes(directory, lambda d=directory: os.unlink(d / "new.md"))
        changes(directory, lambda d=directory: os.mkdir(d / "sub"))
        changes(directory, lambda d=directory: os.rmdir(d / "sub"))
        changes(directory, lambda d=directory: write_file(d / "x.md~", b"local"))
        changes(directory, lambda d=directory: os.rename(d / "x.md~", d / "y.md~"))
    changes(p / "d", lambda: os.rename(p / "d" / "a.md", p / "a.md"))
    changes(p / "d", lambda: os.rename(p / "a.md", p / "d" / "a.md"))


# -- allow_other --------------------------------------------------------------------------------


def test_allow_other(mount_factory, sdk, server, tmp_path):
    nobody = 65534
    m = mount_factory(memories={"/a.md": "shared"})
    store_id = m.store_id
    m.umount()
    shared = Path(tempfile.mkdtemp(prefix="memfs-allow-other-"))
    try:
        os.chmod(shared, 0o755)

        def read_as_nobody(point: Path) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                ["cat", str(point / "a.md")], user=nobody, capture_output=True, text=True
            )

        for allow, point in ((False, shared / "private"), (True, shared / "open")):
            point.mkdir()
            mounted = MountedStore(
                path=point,
                store_id=store_id,
                store_name=m.store_name,
                sdk=sdk,
                env=m.env,  # its own cache directory (mount_factory)
                log_file=tmp_path / f"allow-{allow}.log",
                extra_args=["--allow-other"] if allow else [],
            )
            try:
                assert mounted.mount().returncode == 0, mounted.log()
                options = mount_options(point)
                assert ("allow_other" in options) is allow
                assert "default_permissions" in options  # always: the kernel checks modes
                assert {"nosuid", "nodev"} <= options  # root's mounts too (docs/security.md)
                result = read_as_nobody(point)
                if allow:
                    assert result.returncode == 0 and result.stdout == "shared", result.stderr
                    assert "every user of this machine can read" in mounted.log()
                    refused = subprocess.run(
                        ["bash", "-c", f"echo x > {point}/a.md"], user=nobody, capture_output=True
                    )
                    assert refused.returncode != 0  # files are 0644: only the owner writes
                else:
                    assert result.returncode != 0 and "Permission denied" in result.stderr
                    assert "every user" not in mounted.log()
            finally:
                mounted.cleanup()
        assert m.content("/a.md") == "shared"
    finally:
        shutil.rmtree(shared, ignore_errors=True)
