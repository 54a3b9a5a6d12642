"""The few system calls that differ between Linux, macOS and Windows, each with its fallback, so
that what runs without FUSE (``memfs sync``, ``memfs status``) runs on all three.

Linux keeps exactly the call it had; elsewhere the nearest equivalent, as docs/security.md
("Platforms without FUSE") says:

- ``user_id``: ``os.getuid()``; None on Windows, which has no uids (its per-user directories are
  protected by their ACLs, which memfs does not check);
- ``data_sync``: ``os.fdatasync`` (Linux); ``F_FULLFSYNC`` where it exists (macOS, whose
  ``fsync`` leaves the data in the drive's cache), else ``os.fsync``;
- ``process_runs``: ``/proc/<pid>/stat`` (Linux: a zombie is gone), else ``os.kill(pid, 0)``,
  else (Windows, where ``os.kill`` would terminate the process) ``OpenProcess``;
- ``lock_exclusive``: ``flock`` (POSIX), ``msvcrt.locking`` on Windows;
- ``NOFOLLOW``: ``O_NOFOLLOW``, 0 where the platform has none (the callers then ``lstat``);
- ``read_at``, ``write_at``: ``pread``, ``pwrite``; a seek then a read or write on Windows.

This module must not know what the files or processes are for.
"""

from __future__ import annotations

import contextlib
import os

WINDOWS = os.name == "nt"
NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)
BINARY: int = getattr(os, "O_BINARY", 0)  # Windows: no newline translation


def user_id() -> int | None:
    """This process's uid; None where the platform has none (Windows)."""
    getuid = getattr(os, "getuid", None)
    return getuid() if getuid is not None else None


def data_sync(fd: int) -> None:
    """Make the data written to ``fd`` durable: ``fdatasync`` where the platform has it."""
    fdatasync = getattr(os, "fdatasync", None)
    if fdatasync is not None:
        fdatasync(fd)
        return
    full_sync(fd)


def full_sync(fd: int) -> None:
    """``fsync``, or on macOS ``F_FULLFSYNC`` (its ``fsync`` stops at the drive's cache);
    plain ``fsync`` where the file system refuses ``F_FULLFSYNC`` (some network ones)."""
    try:
        import fcntl
    except ImportError:  # Windows: os.fsync is FlushFileBuffers
        os.fsync(fd)
        return
    command = getattr(fcntl, "F_FULLFSYNC", None)
    if command is not None:
        try:
            fcntl.fcntl(fd, command)
            return
        except OSError:
            pass
    os.fsync(fd)


def process_runs(pid: int) -> bool:
    """True while process ``pid`` runs (on Linux a zombie counts as gone). A process of
    another user counts as running where only ``os.kill`` can tell."""
    if pid <= 0:
        return False
    if WINDOWS:
        return _windows_process_runs(pid)
    stat_path = f"/proc/{pid}/stat"
    if os.path.isdir("/proc/self"):  # Linux: /proc tells a zombie from a live process
        try:
            with open(stat_path, encoding="ascii", errors="replace") as stat_file:
                return stat_file.read().rpartition(")")[2].split()[0] not in ("Z", "X")
        except (OSError, IndexError):
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, another user's
    return True


def _windows_process_runs(pid: int) -> bool:  # pragma: no cover - Windows only
    import ctypes

    kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined,unused-ignore]
    query_limited_information = 0x1000
    still_active = 259
    handle = kernel32.OpenProcess(query_limited_information, False, pid)
    if not handle:
        return False
    try:
        code = ctypes.c_ulong()
        if not kernel32.GetExitCodeProcess(handle, ctypes.byref(code)):
            return False
        return bool(code.value == still_active)
    finally:
        kernel32.CloseHandle(handle)


def lock_exclusive(fd: int) -> None:
    """Take an exclusive lock on the open file ``fd`` without waiting (``BlockingIOError``
    or ``PermissionError`` when another process holds it); it ends with the descriptor."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        import msvcrt

        with contextlib.suppress(OSError):
            os.lseek(fd, 0, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined,unused-ignore]
        except PermissionError as exc:  # held: what flock says with EWOULDBLOCK
            raise BlockingIOError(*exc.args) from None
        return
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def read_at(fd: int, size: int, offset: int) -> bytes:
    """``os.pread``; on Windows, which has none, a seek then a read (the callers own ``fd``
    alone, so nothing moves it between the two)."""
    if hasattr(os, "pread"):
        return os.pread(fd, size, offset)
    os.lseek(fd, offset, os.SEEK_SET)  # pragma: no cover - Windows
    return os.read(fd, size)  # pragma: no cover - Windows


def write_at(fd: int, data: bytes | memoryview, offset: int) -> int:
    """``os.pwrite``; on Windows a seek then a write (as ``read_at``)."""
    if not hasattr(os, "pwrite"):  # pragma: no cover - Windows
        os.lseek(fd, offset, os.SEEK_SET)
        return os.write(fd, data)
    return os.pwrite(fd, data, offset)
