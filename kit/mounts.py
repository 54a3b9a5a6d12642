"""Real FUSE mounts for tests: ``memfs`` (the CLI in a subprocess), ``MountedStore`` (a store,
its mount point and synchronous helpers to check the store behind it) and ``MountMaker`` (makes
them; ``close()`` unmounts them all). The fixtures are in ``tests/conftest.py``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic

from kit.waiting import wait_for

MOUNT_READY_TIMEOUT = 20.0

_libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
RENAME_WHITEOUT = 4


def renameat2(old: os.PathLike[str] | str, new: os.PathLike[str] | str, flags: int) -> None:
    """``renameat2(2)`` (Python has no binding); OSError with its errno on failure."""
    rc = _libc.renameat2(AT_FDCWD, os.fsencode(old), AT_FDCWD, os.fsencode(new), flags)
    if rc != 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))


def memfs(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memfs", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def daemon_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat_file:
            return stat_file.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _dead_mount(path: Path) -> bool:
    """A mount whose daemon died (ENOTCONN): ``os.path.ismount`` says False for it."""
    try:
        os.lstat(path)
    except OSError as exc:
        return exc.errno == errno.ENOTCONN
    return False


def fsync_dir(path: Path) -> None:
    """Return once the daemon has uploaded every change pending under ``path`` (a directory
    fsync of a mount, or of a store's directory in a mount of several, waits for it)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class StoreSide:
    """A store on the test server and synchronous helpers to check it through the SDK (the
    store behind a mount, or behind a synced directory: ``kit.synced``)."""

    path: Path
    store_id: str
    store_name: str
    sdk: anthropic.Anthropic
    env: dict[str, str]
    log_file: Path
    extra_args: list[str] = field(default_factory=list)
    pid: int | None = None

    def log(self) -> str:
        try:
            return self.log_file.read_text()
        except OSError:
            return ""

    # -- the store behind it ------------------------------------------------------------------

    def memories(self) -> dict[str, Any]:
        """path -> memory (basic view) of every memory in the store."""
        return {
            m.path: m
            for m in self.sdk.beta.memory_stores.memories.list(self.store_id, limit=100)
            if m.type == "memory"
        }

    def paths(self) -> set[str]:
        return set(self.memories())

    def content(self, path: str) -> str | None:
        memory = self.memories().get(path)
        if memory is None:
            return None
        full = self.sdk.beta.memory_stores.memories.retrieve(
            memory.id, memory_store_id=self.store_id
        )
        return full.content

    def versions(self, memory_id: str | None = None) -> list[Any]:
        kwargs: dict[str, Any] = {"limit": 100}
        if memory_id is not None:
            kwargs["memory_id"] = memory_id
        return list(self.sdk.beta.memory_stores.memory_versions.list(self.store_id, **kwargs))

    def put(self, path: str, content: str) -> Any:
        """Create or update a memory directly through the API (a remote change)."""
        existing = self.memories().get(path)
        if existing is None:
            return self.sdk.beta.memory_stores.memories.create(
                self.store_id, path=path, content=content
            )
        return self.sdk.beta.memory_stores.memories.update(
            existing.id, memory_store_id=self.store_id, content=content
        )

    def wait_content(self, path: str, content: str | None, timeout: float = 10.0) -> None:
        wait_for(lambda: self.content(path) == content, timeout=timeout)


@dataclass
class MountedStore(StoreSide):
    """A store, its mount point and helpers to check the store behind the mount."""

    # -- the mount --------------------------------------------------------------------------

    def mount(self, *args: str) -> subprocess.CompletedProcess[str]:
        result = memfs(
            "mount",
            self.store_id,
            str(self.path),
            "--log-file",
            str(self.log_file),
            *self.extra_args,
            *args,
            env=self.env,
        )
        if result.returncode == 0:
            assert os.path.ismount(self.path), "memfs mount returned 0 but nothing is mounted"
            self.pid = self._daemon_pid()
        return result

    def kill(self) -> None:
        """``kill -9`` the daemon (what it acknowledged stays in its journal), then detach the
        dead mount point as ``memfs umount`` would."""
        assert self.pid is not None
        os.kill(self.pid, signal.SIGKILL)
        wait_for(lambda: not daemon_alive(self.pid or 0), timeout=10)
        subprocess.run(["fusermount3", "-uz", str(self.path)], capture_output=True, check=False)
        wait_for(lambda: not os.path.ismount(self.path), timeout=10)

    def _daemon_pid(self) -> int | None:
        from memfs.mount.statedir import state_path

        try:
            return int(state_path(str(self.path), "pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def umount(self) -> subprocess.CompletedProcess[str]:
        result = memfs("umount", str(self.path), env=self.env)
        wait_for(lambda: not os.path.ismount(self.path), timeout=10)
        return result

    def cleanup(self) -> None:
        """Unmount whatever state the test left (never raises)."""
        if os.path.ismount(self.path):
            with contextlib.suppress(subprocess.TimeoutExpired):
                memfs("umount", str(self.path), env=self.env, timeout=40)
        if os.path.ismount(self.path) or _dead_mount(self.path):
            subprocess.run(["fusermount3", "-uz", str(self.path)], capture_output=True)
        if self.pid is not None and daemon_alive(self.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def settle(self) -> None:
        """Wait until the daemon has uploaded everything pending (fsync of the mount root)."""
        fsync_dir(self.path)

    def pass_marker(self, name: str = "marker.md") -> None:
        """Create ``name`` now, wait until the store has it, then settle: by then the daemon has
        handled every close before it, and an upload it scheduled (the 1 s rule of new files,
        due before the marker's) has run. A check that something was NOT uploaded waits here."""
        (self.path / name).write_text("marker\n")
        self.wait_content(f"/{name}", "marker\n")
        self.settle()

    def status(self) -> dict[str, Any]:
        """``memfs status --json`` of this mount."""
        result = memfs("status", str(self.path), "--json", env=self.env)
        assert result.returncode == 0, result.stderr
        document: dict[str, Any] = json.loads(result.stdout)
        return document


def new_store(
    sdk: anthropic.Anthropic, prefix: str, store_id: str | None, memories: dict[str, str] | None
) -> tuple[str, str]:
    """A fresh store named ``<prefix>-test-…`` (or ``store_id``), seeded with ``memories``;
    its id and name."""
    stores = sdk.beta.memory_stores
    if store_id is None:
        store = stores.create(name=f"{prefix}-test-{uuid.uuid4().hex[:10]}")
        store_id, name = store.id, store.name
    else:
        name = stores.retrieve(store_id).name
    for path, content in (memories or {}).items():
        stores.memories.create(store_id, path=path, content=content)
    return store_id, name


class MountMaker:
    """Makes ``MountedStore``s on one server: a fresh store (or ``store_id``) seeded with
    ``memories``, a mount point under ``tmp_path``; ``close()`` unmounts them all and fails if a
    daemon logged a traceback. The fixtures below (and other suites' fixtures) share it."""

    def __init__(
        self,
        sdk: anthropic.Anthropic,
        env: dict[str, str],
        tmp_path: Path,
        *,
        prefix: str = "mount",
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.sdk, self.env, self.tmp_path = sdk, env, tmp_path
        self.prefix, self.extra_args = prefix, extra_args
        self.made: list[MountedStore] = []

    @classmethod
    def with_cache(
        cls, sdk: anthropic.Anthropic, env: dict[str, str], tmp_path: Path, prefix: str
    ) -> MountMaker:
        """Mounts that keep their journal (and kept copies) in ``tmp_path/cache``."""
        return cls(
            sdk, env, tmp_path, prefix=prefix, extra_args=("--cache-dir", str(tmp_path / "cache"))
        )

    def __call__(
        self,
        *args: str,
        store_id: str | None = None,
        mount: bool = True,
        memories: dict[str, str] | None = None,
    ) -> MountedStore:
        store_id, name = new_store(self.sdk, self.prefix, store_id, memories)
        number = len(self.made)
        point = self.tmp_path / f"{self.prefix}{number}"
        point.mkdir()
        mounted = MountedStore(
            path=point,
            store_id=store_id,
            store_name=name,
            sdk=self.sdk,
            env=self.env,
            log_file=self.tmp_path / f"{self.prefix}{number}.log",
            extra_args=[*self.extra_args, *args],
        )
        self.made.append(mounted)
        if mount:
            result = mounted.mount()
            assert result.returncode == 0, f"mount failed: {result.stderr}\n{mounted.log()}"
        return mounted

    def close(self) -> None:
        for mounted in self.made:
            mounted.cleanup()
        for mounted in self.made:
            log = mounted.log()
            assert "Traceback" not in log, f"the daemon logged a traceback:\n{log}"
