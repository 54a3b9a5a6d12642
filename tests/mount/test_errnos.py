"""Every errno of the table (docs/semantics.md "Errors") through a real mount on a real server.

Faults the server can produce for real: a full store (seeded through the server's own storage
layer on a private server's database), a refused key (the private server restarted with other
keys), a server that is down (stopped), an archived store. Plain filesystem correctness (holes,
``O_EXCL``/``O_APPEND``/``O_TRUNC``) is compared side by side with a local directory.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
import trio
from conftest import OTHER_KEY

from memfs.models import Actor
from memfs.server.sqlite import SqliteStorage

from .conftest import MountedStore, wait_for

libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
LIMIT = 102_400


def renameat2(old: os.PathLike[str] | str, new: os.PathLike[str] | str, flags: int) -> None:
    rc = libc.renameat2(AT_FDCWD, os.fsencode(old), AT_FDCWD, os.fsencode(new), flags)
    if rc != 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))


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


@pytest.fixture
def private_mount(fresh_server: Any, tmp_path: Path) -> Iterator[Callable[..., MountedStore]]:
    """Like ``mount_factory``, on ``fresh_server`` (which a test may stop or restart)."""
    made: list[MountedStore] = []
    sdk = anthropic.Anthropic(
        api_key=fresh_server.api_key, base_url=fresh_server.base_url, max_retries=0
    )

    def make(*args: str, memories: dict[str, str] | None = None, mount: bool = True) -> Any:
        store = sdk.beta.memory_stores.create(name=f"errno-{uuid.uuid4().hex[:8]}")
        for path, content in (memories or {}).items():
            sdk.beta.memory_stores.memories.create(store.id, path=path, content=content)
        point = tmp_path / f"pmnt{len(made)}"
        point.mkdir()
        mounted = MountedStore(
            path=point,
            store_id=store.id,
            store_name=store.name,
            sdk=sdk,
            env=fresh_server.client_env(),
            log_file=tmp_path / f"pmount{len(made)}.log",
            extra_args=list(args),
        )
        made.append(mounted)
        if mount:
            result = mounted.mount()
            assert result.returncode == 0, f"mount failed: {result.stderr}\n{mounted.log()}"
        return mounted

    try:
        yield make
    finally:
        for mounted in made:
            mounted.cleanup()
        sdk.close()
        for mounted in made:
            assert "Traceback" not in mounted.log(), mounted.log()


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
    assert os.statvfs(m.path).f_ffree == 0
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


def test_key_refused_mid_mount_eacces(private_mount, fresh_server):
    m = private_mount(memories={"/a.md": "A", "/d/b.md": "B"})
    assert (m.path / "a.md").read_text() == "A"
    fd = os.open(m.path / "new.md", os.O_CREAT | os.O_RDWR)
    try:
        os.write(fd, b"refused")
        fresh_server.keys = [OTHER_KEY]  # the mount's key is no longer known
        fresh_server.restart()
        time.sleep(1.1)  # the cached listing and the kernel's entries expire
        expect_errno(errno.EACCES, os.listdir, m.path / "d")
        expect_errno(errno.EACCES, (m.path / "d" / "b.md").read_text)
        expect_errno(errno.EACCES, os.open, m.path / "other.md", os.O_CREAT | os.O_WRONLY)
        expect_errno(errno.EACCES, os.fsync, fd)
        assert os.pread(fd, 100, 0) == b"refused"  # kept locally
    finally:
        os.close(fd)
    assert fresh_server.api_key not in m.log() and OTHER_KEY not in m.log()


def test_server_down_eio_and_cached_data(private_mount, fresh_server):
    m = private_mount(memories={"/cached.md": "have it", "/uncached.md": "never read"})
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
        # an upload that cannot reach the server: EIO from fsync, the content kept
        started = time.monotonic()
        expect_errno(errno.EIO, os.fsync, new)
        print("fsync EIO after", time.monotonic() - started)
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
