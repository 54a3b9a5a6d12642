"""A mount that programs still write to: who holds its files open for writing, and making the
kernel hand over the pages they wrote.

``writers`` finds, in ``/proc``, the processes with a file under a mount point open for writing
(a descriptor, or a shared writable mapping) for ``memfs umount``, which refuses such a mount
unless ``--force`` (docs/semantics.md, "Processes"). Everything read from ``/proc`` (link
targets, command names) is another user's or program's text: callers print it escaped
(``shown``). ``sync_filesystem`` is ``syncfs(2)`` on an open descriptor of the mount: dirty
pages of shared mappings go to the daemon as writes before the end saves what is open.

It must not signal or unmount anything, nor follow a link it reads (``readlink`` only).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
from dataclasses import dataclass

log = logging.getLogger(__name__)

_DELETED = " (deleted)"


@dataclass(frozen=True)
class Writer:
    """A process holding ``path`` (below the mount point, relative to it) open for writing."""

    path: str
    pid: int
    command: str  # its ``comm`` (a process chooses it: untrusted text)


def writers(mountpoint: str, *, proc: str = "/proc") -> list[Writer]:
    """The processes this user can see with a file below ``mountpoint`` open for writing, by
    path then pid (each pair once)."""
    root = os.path.normpath(mountpoint)
    found: set[Writer] = set()
    try:
        pids = [int(name) for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        return []
    for pid in pids:
        if pid == os.getpid():
            continue
        paths = _written_fds(f"{proc}/{pid}", root) | _written_maps(f"{proc}/{pid}", root)
        if paths:
            command = _command(f"{proc}/{pid}")
            found |= {Writer(path, pid, command) for path in paths}
    return sorted(found, key=lambda w: (w.path, w.pid))


def _below(target: str, root: str) -> str | None:
    """``target`` relative to ``root`` if it is ``root`` or below it, else None."""
    target = target.removesuffix(_DELETED)
    if target == root:
        return "."
    if target.startswith(root.rstrip("/") + "/"):
        return target[len(root.rstrip("/")) + 1 :]
    return None


def _written_fds(process: str, root: str) -> set[str]:
    paths: set[str] = set()
    try:
        fds = os.listdir(f"{process}/fd")
    except OSError:  # gone, or another user's
        return paths
    for fd in fds:
        try:
            path = _below(os.readlink(f"{process}/fd/{fd}"), root)
            if path is None:
                continue
            with open(f"{process}/fdinfo/{fd}", encoding="ascii", errors="replace") as info:
                flags = next(
                    (int(line.split()[1], 8) for line in info if line.startswith("flags:")), 0
                )
        except (OSError, ValueError, IndexError):
            continue
        if flags & os.O_ACCMODE != os.O_RDONLY:
            paths.add(path)
    return paths


def _written_maps(process: str, root: str) -> set[str]:
    """Files below ``root`` mapped shared and writable (``rw-s``): written without a write."""
    paths: set[str] = set()
    try:
        with open(f"{process}/maps", encoding="utf-8", errors="surrogateescape") as maps:
            for line in maps:
                fields = line.rstrip("\n").split(maxsplit=5)
                if len(fields) == 6 and fields[1][1] == "w" and fields[1][3] == "s":
                    path = _below(fields[5], root)
                    if path is not None:
                        paths.add(path)
    except OSError:
        pass
    return paths


def _command(process: str) -> str:
    try:
        with open(f"{process}/comm", encoding="utf-8", errors="replace") as comm:
            return comm.read().rstrip("\n")
    except OSError:
        return "?"


def sync_filesystem(fd: int) -> None:
    """``syncfs(2)`` on ``fd``: the kernel writes back every dirty page of its filesystem
    (``OSError`` if it fails). Python's ``os`` has no ``syncfs``: libc's, through ctypes."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if libc.syncfs(ctypes.c_int(fd)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def sync_mount(mountpoint: str, device: int | None = None) -> bool:
    """``syncfs`` of the filesystem mounted at ``mountpoint`` (blocking; from another process,
    or from a worker thread of its daemon); with ``device``, only if that filesystem is still
    the one there (a lazily detached mount is not). True if it was synced."""
    try:
        fd = os.open(mountpoint, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        log.info("no syncfs of %s: %s", mountpoint, exc)
        return False
    try:
        if device is not None and os.fstat(fd).st_dev != device:
            return False  # detached: what is there now is another filesystem
        sync_filesystem(fd)
        return True
    except OSError as exc:
        log.warning("syncfs of %s failed: %s", mountpoint, exc)
        return False
    finally:
        os.close(fd)
