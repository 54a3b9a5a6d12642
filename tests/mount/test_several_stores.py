"""One daemon, one FUSE mount, several stores (a session's): each store the directory named by
its slug at the root, with its own access, cache, journal and change feed; every other name at
the root is local scratch (tmpfs-like, in memory, never uploaded); renames and links between
two stores, or a store and scratch, are EXDEV (so ``mv`` copies); a store whose server is down
answers errors in its own subtree while the others work (``kit.memfs_daemon``).
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from kit.databricks import ACTOR, Workspace, databricks_env
from kit.memfs_daemon import SeveralStores
from kit.mounts import RENAME_WHITEOUT, MountedStore, fsync_dir, memfs, renameat2
from kit.servers import ServerProcess
from kit.waiting import wait_for
from memfs.contract.numbers import SLOT


def _key_file(directory: Path, server: ServerProcess) -> str:
    path = directory / f"key-{server.port}"
    path.write_text(server.api_key)
    path.chmod(0o600)
    return str(path)


def _store(sdk: anthropic.Anthropic, memories: dict[str, str]) -> str:
    store = sdk.beta.memory_stores.create(name=f"several-{uuid.uuid4().hex[:10]}")
    for path, content in memories.items():
        sdk.beta.memory_stores.memories.create(store.id, path=path, content=content)
    return store.id


def _store_on(server: ServerProcess, memories: dict[str, str]) -> str:
    """A new store on ``server`` (another than the session's ``sdk`` talks to)."""
    sdk = anthropic.Anthropic(api_key=server.api_key, base_url=server.base_url, max_retries=0)
    try:
        return _store(sdk, memories)
    finally:
        sdk.close()


def _health(mounted: SeveralStores) -> dict[str, str]:
    """Each store's health by slug, as ``memfs status ROOT --json`` shows it."""
    doc = json.loads(memfs("status", str(mounted.root), "--json", env=mounted.env).stdout)
    return {store["slug"]: store["health"] for store in doc["stores"]}


def _paths(sdk: anthropic.Anthropic, store_id: str) -> set[str]:
    return {m.path for m in sdk.beta.memory_stores.memories.list(store_id)}


def _errno(call: Callable[[], Any]) -> int:
    try:
        call()
    except OSError as exc:
        return exc.errno or 0
    return 0


@pytest.fixture
def several(server: ServerProcess, tmp_path: Path) -> Iterator[Callable[..., SeveralStores]]:
    made: list[SeveralStores] = []

    def start(stores: list[dict[str, Any]]) -> SeveralStores:
        root = tmp_path / f"root{len(made)}"
        root.mkdir()
        mounted = SeveralStores(
            root,
            stores,
            env=databricks_env(server, tmp_path),  # the Databricks stores' workspace
            log_file=tmp_path / f"root{len(made)}.log",
            cache_dir=str(tmp_path / "cache"),
            poll_interval=0.2,
            scratch_bytes=1024 * 1024,
        )
        made.append(mounted)
        mounted.start()
        return mounted

    try:
        yield start
    finally:
        for mounted in made:
            mounted.close()
        for mounted in made:
            log = mounted.log()
            assert "Traceback" not in log, log
            assert server.api_key not in log  # neither key nor token in the log


def test_stores_scratch_and_exdev_in_one_daemon(
    several: Callable[..., SeveralStores],
    server: ServerProcess,
    sdk: anthropic.Anthropic,
    tmp_path: Path,
) -> None:
    key = _key_file(tmp_path, server)
    notes = _store(sdk, {"/a.md": "alpha\n", "/sub/b.md": "beta\n"})
    reference = _store(sdk, {"/r.md": "read me\n"})
    with Workspace(server) as workspace:
        dbx = workspace.create_store()
        workspace.put(dbx, "/e.md", "entry\n", description="what it is")
        mounted = several(
            [
                {"slug": "notes", "store": notes, "base_url": server.base_url, "api_key_file": key},
                {
                    "slug": "ref",
                    "store": reference,
                    "base_url": server.base_url,
                    "api_key_file": key,
                    "read_only": True,
                },
                {"slug": "dbx", "store": dbx, "api": "databricks", "actor": ACTOR},
            ]
        )
        root = mounted.root
        assert sorted(os.listdir(root)) == ["dbx", "notes", "ref"]
        assert (root / "notes" / "a.md").read_text() == "alpha\n"
        assert (root / "ref" / "r.md").read_text() == "read me\n"
        assert (root / "dbx" / "e.md").read_text() == "entry\n"
        # each store has its own .versions/ and .search/, inside its directory
        assert os.listdir(root / "notes" / ".versions")
        assert "/a.md" in (root / "notes" / ".search" / "alpha").read_text()
        assert not (root / ".versions").exists() and not (root / ".search").exists()
        # a store without descriptions says ENOTSUP, never ENOSYS: the kernel keeps asking the
        # store that has them
        assert _errno(lambda: os.getxattr(root / "notes" / "a.md", "user.description")) == (
            errno.ENOTSUP
        )
        assert os.getxattr(root / "dbx" / "e.md", "user.description") == b"what it is"
        # a change made elsewhere reaches the store's files (its feed's invalidations carry
        # the store's own numbers)
        memory = next(m for m in sdk.beta.memory_stores.memories.list(notes) if m.path == "/a.md")
        sdk.beta.memory_stores.memories.update(memory.id, memory_store_id=notes, content="new\n")
        wait_for(lambda: (root / "notes" / "a.md").read_text() == "new\n", timeout=10)
        text = memfs("status", str(root), env=mounted.env).stdout
        assert "== notes: ok" in text and "== ref: ok" in text and "local scratch" in text
        # one process serves them all, under one pid file and one status document
        status = json.loads(memfs("status", str(root), "--json", env=mounted.env).stdout)
        assert [s["slug"] for s in status["stores"]] == ["notes", "ref", "dbx"]
        assert mounted.proc is not None and status["pid"] == mounted.proc.pid
        one = json.loads(memfs("status", str(root / "ref"), "--json", env=mounted.env).stdout)
        assert one["store_id"] == reference and one["read_only"] is True

        # every store's inodes in its own slot: no number is shown twice in the mount
        numbers: dict[int, str] = {}
        for directory, names, files in os.walk(root):
            for name in names + files:
                path = os.path.join(directory, name)
                number = os.lstat(path).st_ino
                assert number not in numbers, f"{path} and {numbers[number]} share {number}"
                numbers[number] = path
        slots = {os.stat(root / slug).st_ino // SLOT for slug in ("notes", "ref", "dbx")}
        assert len(slots) == 3 and 0 not in slots  # slot 0 is the root and scratch
        listed = subprocess.run(["ls", "-i", str(root)], capture_output=True, text=True).stdout
        assert len({line.split()[0] for line in listed.splitlines()}) == 3

        # access per store: EROFS in the read-only one only
        assert _errno(lambda: (root / "ref" / "new.md").write_text("x")) == errno.EROFS
        assert _errno(lambda: (root / "ref" / "r.md").unlink()) == errno.EROFS
        (root / "notes" / "new.md").write_text("written\n")
        workspace_dbx = root / "dbx" / "f.md"
        workspace_dbx.write_text("to databricks\n")

        # scratch: files, directories, modes, links, renames, all in memory
        scratch = root / "tmp"
        scratch.mkdir()
        (scratch / "f.txt").write_text("scratch\n")
        os.chmod(scratch / "f.txt", 0o600)
        assert stat.S_IMODE(os.stat(scratch / "f.txt").st_mode) == 0o600
        os.link(scratch / "f.txt", scratch / "hard.txt")
        assert os.stat(scratch / "f.txt").st_nlink == 2
        os.symlink("f.txt", scratch / "link")
        assert (scratch / "link").read_text() == "scratch\n"
        os.rename(scratch / "hard.txt", root / "moved.txt")
        assert (root / "moved.txt").read_text() == "scratch\n"
        assert _errno(lambda: os.rmdir(scratch)) == errno.ENOTEMPTY
        assert sorted(os.listdir(root)) == ["dbx", "moved.txt", "notes", "ref", "tmp"]
        # past its budget (1 MiB here): ENOSPC, and nothing is lost of what it holds
        with open(scratch / "big", "wb") as big:
            assert _errno(lambda: big.write(b"x" * 2 * 1024 * 1024) and big.flush()) == (
                errno.ENOSPC
            )
        (scratch / "big").unlink()

        # EXDEV between scratch and a store, and between two stores; mv copies instead
        assert _errno(lambda: os.rename(scratch / "f.txt", root / "notes" / "f.txt")) == (
            errno.EXDEV
        )
        assert _errno(lambda: os.rename(root / "notes" / "a.md", root / "dbx" / "a.md")) == (
            errno.EXDEV
        )
        assert _errno(lambda: os.link(scratch / "f.txt", root / "notes" / "l.txt")) == (errno.EXDEV)
        moved = subprocess.run(
            ["mv", str(scratch / "f.txt"), str(root / "notes" / "from-scratch.md")],
            capture_output=True,
            text=True,
        )
        assert moved.returncode == 0, moved.stderr
        assert not (scratch / "f.txt").exists()
        # a store's directory is never removed, renamed or made again
        assert _errno(lambda: os.rmdir(root / "notes")) == errno.EBUSY
        assert _errno(lambda: os.rename(root / "notes", root / "other")) == errno.EBUSY
        (root / "empty").mkdir()
        assert _errno(lambda: os.rename(root / "empty", root / "ref")) == errno.EBUSY
        os.rmdir(root / "empty")
        assert _errno(lambda: os.mkdir(root / "dbx")) == errno.EEXIST

        # what was written in the stores is uploaded, scratch never
        fd = os.open(root / "notes", os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        wait_for(lambda: {"/new.md", "/from-scratch.md"} <= _paths(sdk, notes), timeout=10)
        assert _paths(sdk, notes) == {"/a.md", "/sub/b.md", "/new.md", "/from-scratch.md"}
        assert (root / "notes" / "from-scratch.md").read_text() == "scratch\n"
        assert _paths(sdk, reference) == {"/r.md"}
        wait_for(lambda: workspace.content(dbx, "/f.md") == "to databricks\n", timeout=10)

        result = mounted.umount()
        assert result.returncode == 0, result.stderr + mounted.log()
        assert not os.listdir(root)  # scratch went with the daemon


def test_one_store_down_while_the_other_works(
    several: Callable[..., SeveralStores],
    server: ServerProcess,
    fresh_server: ServerProcess,
    sdk: anthropic.Anthropic,
    tmp_path: Path,
) -> None:
    up = _store(sdk, {"/a.md": "alpha\n"})
    down = _store_on(fresh_server, {"/d.md": "down\n", "/later.md": "never read\n"})
    mounted = several(
        [
            {
                "slug": "up",
                "store": up,
                "base_url": server.base_url,
                "api_key_file": _key_file(tmp_path, server),
            },
            {
                "slug": "down",
                "store": down,
                "base_url": fresh_server.base_url,
                "api_key_file": _key_file(tmp_path, fresh_server),
            },
            # a store that cannot be opened at start: its directory answers EIO, the rest serve
            {
                "slug": "missing",
                "store": "memstore_does_not_exist",
                "base_url": server.base_url,
                "api_key_file": _key_file(tmp_path, server),
            },
        ]
    )
    root = mounted.root
    assert sorted(os.listdir(root)) == ["down", "missing", "up"]
    assert _errno(lambda: os.listdir(root / "missing")) == errno.EIO
    assert _errno(lambda: (root / "missing" / "x.md").write_text("x")) == errno.EIO
    assert (root / "down" / "d.md").read_text() == "down\n"
    fresh_server.stop()
    # the stopped store's subtree answers errors: what it never fetched is EIO ...
    assert _errno(lambda: (root / "down" / "later.md").read_text()) == errno.EIO
    # ... a save there is journaled (close says 0) and waits for the server
    (root / "down" / "waits.md").write_text("waiting\n")

    def health() -> dict[str, str]:
        return _health(mounted)

    wait_for(lambda: health()["down"] != "ok", timeout=15)
    assert health()["up"] == "ok"
    assert health()["missing"].startswith("UNAVAILABLE: memory store 'memstore_does_not_exist'")
    # the log says which store each line is about
    assert "[missing] store missing cannot be served" in mounted.log()
    wait_for(lambda: re.search(r"WARNING \S+ \[down\] ", mounted.log()), timeout=20)
    # while the other store works as ever
    (root / "up" / "b.md").write_text("beta\n")
    fsync_dir(root / "up")
    assert _paths(sdk, up) == {"/a.md", "/b.md"}
    assert (root / "up" / "a.md").read_text() == "alpha\n"
    single = memfs("status", str(root / "down"), env=mounted.env)
    assert single.returncode == 0 and "waits.md" in single.stdout
    # the unmount report covers every store: the save that waits is in it, by store
    result = mounted.umount()
    assert result.returncode == 1
    assert "down: 1 change(s) not uploaded" in result.stderr, result.stderr
    assert "up:" not in result.stderr


def test_kill_9_then_a_restart_uploads_every_stores_saves(
    several: Callable[..., SeveralStores],
    server: ServerProcess,
    sdk: anthropic.Anthropic,
    tmp_path: Path,
) -> None:
    key = _key_file(tmp_path, server)
    first, second = _store(sdk, {}), _store(sdk, {})
    stores = [
        {"slug": "one", "store": first, "base_url": server.base_url, "api_key_file": key},
        {"slug": "two", "store": second, "base_url": server.base_url, "api_key_file": key},
    ]
    mounted = several(stores)
    # closed (so journaled) and killed before the daemon's upload delay has passed
    (mounted.root / "one" / "a.md").write_text("saved in one\n")
    (mounted.root / "two" / "b.md").write_text("saved in two\n")
    assert mounted.proc is not None
    mounted.proc.kill()
    mounted.proc.wait(10)
    subprocess.run(["fusermount3", "-uz", str(mounted.root)], capture_output=True, check=False)
    assert _paths(sdk, first) == set() and _paths(sdk, second) == set()
    # the next daemon (same cache directory) replays both stores' journals before serving
    several(stores)
    assert _paths(sdk, first) == {"/a.md"} and _paths(sdk, second) == {"/b.md"}


def test_a_mount_of_one_store_keeps_its_numbers(mount: MountedStore) -> None:
    """``memfs mount`` serves its store in slot 0: the numbers a mount always had."""
    assert os.stat(mount.path).st_ino == 1
    assert os.stat(mount.path / ".search").st_ino == 1 << 47
    assert os.stat(mount.path / ".versions").st_ino == 1 << 48
    (mount.path / "f.md").write_text("x")
    assert 1 < os.stat(mount.path / "f.md").st_ino < 1 << 47


def test_a_revoked_key_and_a_deleted_store_fail_in_their_own_subtrees(
    several: Callable[..., SeveralStores],
    server: ServerProcess,
    fresh_server: ServerProcess,
    sdk: anthropic.Anthropic,
    tmp_path: Path,
) -> None:
    """Mid-session: one store's key is refused (401), another store is deleted on the server;
    each answers its own errnos (EACCES, ENODEV: as a mount of it alone would) and shows its
    own health, while the third store reads and writes as ever."""
    up = _store(sdk, {"/a.md": "alpha\n"})
    deleted = _store(sdk, {"/d.md": "deleted soon\n"})
    revoked = _store_on(fresh_server, {"/r.md": "read before\n", "/later.md": "never read\n"})
    key = _key_file(tmp_path, server)
    mounted = several(
        [
            {"slug": "up", "store": up, "base_url": server.base_url, "api_key_file": key},
            {"slug": "deleted", "store": deleted, "base_url": server.base_url, "api_key_file": key},
            {
                "slug": "revoked",
                "store": revoked,
                "base_url": fresh_server.base_url,
                "api_key_file": _key_file(tmp_path, fresh_server),
            },
        ]
    )
    root = mounted.root
    assert (root / "revoked" / "r.md").read_text() == "read before\n"
    assert (root / "deleted" / "d.md").read_text() == "deleted soon\n"
    # the revoked store's server now takes another key only (same port, same database)
    fresh_server.keys = [server.keys[1]]
    fresh_server.restart()
    sdk.beta.memory_stores.delete(deleted)

    def health() -> dict[str, str]:
        return _health(mounted)

    wait_for(lambda: health()["deleted"].startswith("GONE"), timeout=15)
    wait_for(lambda: health()["revoked"] != "ok", timeout=15)
    shown = health()
    assert shown["up"] == "ok"
    assert shown["deleted"] == "GONE: deleted on the server (changes fail with ENODEV)"
    assert shown["revoked"].startswith("UNREACHABLE: "), shown
    # each failing store answers its own errno in its own subtree ...
    assert _errno(lambda: (root / "deleted" / "new.md").write_text("x")) == errno.ENODEV
    assert _errno(lambda: (root / "revoked" / "later.md").read_text()) == errno.EACCES
    assert (root / "revoked" / "r.md").read_text() == "read before\n"  # at hand: still read
    # ... while the other store reads and writes as ever
    assert (root / "up" / "a.md").read_text() == "alpha\n"
    (root / "up" / "b.md").write_text("beta\n")
    fsync_dir(root / "up")
    assert _paths(sdk, up) == {"/a.md", "/b.md"}
    one = memfs("status", str(root / "deleted"), env=mounted.env)
    assert one.returncode == 0 and "STORE GONE" in one.stdout, one.stdout
    assert deleted in one.stdout and revoked not in one.stdout and up not in one.stdout
    result = mounted.umount()
    assert f"the memory store {deleted} no longer exists" in result.stderr, result.stderr
    assert "up:" not in result.stderr


def test_scratch_answers_as_tmpfs_for_removed_open_files_sizes_and_rename_flags(
    several: Callable[..., SeveralStores],
    server: ServerProcess,
    sdk: anthropic.Anthropic,
    tmp_path: Path,
) -> None:
    """Issue 31: an unlinked file and a removed directory still open show ``st_nlink`` 0; a
    truncate that could never fit the scratch budget is EFBIG (one that could, ENOSPC); a
    renameat2 flag no tree serves (RENAME_WHITEOUT) is EINVAL in scratch, at the root and in a
    store, never a plain rename."""
    key = _key_file(tmp_path, server)
    notes = _store(sdk, {"/a.md": "alpha\n"})
    mounted = several(
        [{"slug": "notes", "store": notes, "base_url": server.base_url, "api_key_file": key}]
    )
    root = mounted.root
    scratch = root / "tmp"
    scratch.mkdir()
    (scratch / "f.txt").write_text("scratch\n")
    os.link(scratch / "f.txt", scratch / "hard.txt")
    with open(scratch / "f.txt", "rb") as held:
        (scratch / "hard.txt").unlink()
        assert os.fstat(held.fileno()).st_nlink == 1
        (scratch / "f.txt").unlink()
        assert os.fstat(held.fileno()).st_nlink == 0
        assert held.read() == b"scratch\n"  # still readable through the descriptor
    (scratch / "gone").mkdir()
    held_dir = os.open(scratch / "gone", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.rmdir(scratch / "gone")
        assert os.fstat(held_dir).st_nlink == 0
    finally:
        os.close(held_dir)

    (scratch / "sized").write_bytes(b"")
    assert _errno(lambda: os.truncate(scratch / "sized", 999_999_999_999_999)) == errno.EFBIG
    (scratch / "filler").write_bytes(b"x" * 600 * 1024)  # of 1 MiB
    assert _errno(lambda: os.truncate(scratch / "sized", 600 * 1024)) == errno.ENOSPC
    os.truncate(scratch / "sized", 100 * 1024)  # what fits, fits
    assert os.stat(scratch / "sized").st_size == 100 * 1024

    for source, target in [
        (scratch / "sized", scratch / "renamed"),
        (root / "moved-away", root / "moved"),
        (root / "notes" / "a.md", root / "notes" / "b.md"),
    ]:
        if not source.exists():
            source.write_text("x")
        with pytest.raises(OSError) as refused:
            renameat2(source, target, RENAME_WHITEOUT)
        assert refused.value.errno == errno.EINVAL
        assert source.exists() and not target.exists()
    mounted.close()
    assert _paths(sdk, notes) == {"/a.md"}  # the refused rename moved nothing in the store


def test_a_refused_file_says_why_in_an_extended_attribute_and_one_log_line(
    several: Callable[..., SeveralStores],
    sdk: anthropic.Anthropic,
    server: ServerProcess,
    tmp_path: Path,
) -> None:
    """Where the mount answers extended attributes (a session's stores, Databricks stores), a
    file the store refuses carries its reason in ``user.memfs.refused``; the log says it once."""
    notes, other = _store(sdk, {"/a.md": "A"}), _store(sdk, {})
    reach = {"base_url": server.base_url, "api_key_file": _key_file(tmp_path, server)}
    mounted = several(
        [{"slug": "notes", "store": notes, **reach}, {"slug": "other", "store": other, **reach}]
    )
    binary = mounted.root / "notes" / "photo.md"
    fd = os.open(binary, os.O_CREAT | os.O_WRONLY)
    os.write(fd, b"\x89PNG\r\n\x1a\n\xff")
    assert _errno(lambda: os.close(fd)) == errno.EILSEQ  # all a `cp` shows
    why = "not UTF-8 text (EILSEQ): kept locally, not uploaded"
    assert os.getxattr(binary, "user.memfs.refused") == why.encode()
    assert os.listxattr(binary) == ["user.memfs.refused"]
    lines = [line for line in mounted.log().splitlines() if "refused /photo.md" in line]
    assert len(lines) == 1 and lines[0].endswith(f"refused /photo.md: {why} (until a valid save)")
    # a file the store took has none; a valid save ends the refusal
    a_md = mounted.root / "notes" / "a.md"
    assert _errno(lambda: os.getxattr(a_md, "user.memfs.refused")) == errno.ENODATA
    assert _errno(lambda: os.listxattr(a_md)) == errno.ENOTSUP  # a store without descriptions
    binary.write_bytes(b"text now")
    assert _errno(lambda: os.getxattr(binary, "user.memfs.refused")) == errno.ENODATA
