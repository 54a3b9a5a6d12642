"""The per-user state directory of mounts, and the mount point checks made before mounting.

One directory per user holds what a running mount leaves for the commands that ask about it:
``$XDG_RUNTIME_DIR/memfs``, else ``/tmp/memfs-<uid>/memfs``, made 0700 and refused if another
user could have planted it (``memfs.host.private``). Each mount's files are named by a hash of its
mount point: ``.pid`` (``memfs umount`` signals it), ``.status`` (``memfs status`` reads it, and
``.status.sock``, where the daemon answers with it at once: ``fresh_status``), ``.report.json``
(the unmount report) and ``.log`` (the daemon's log, unless ``--log-file`` names another; it
rotates at ``LOG_MAX_BYTES``, keeping ``LOG_BACKUPS`` old parts). A clean ``memfs umount``
removes them all (``remove_state``); after a problem the log stays, for the
person who reads the report. What mounts left behind without a clean ``memfs umount`` (a killed
daemon, ``fusermount3 -u``) is removed by the next ``memfs mount`` once it is a week old and no
daemon of that mount point runs (``prune_stale``).

This module must not start or stop daemons (``memfs.mount.daemon``, ``memfs.commands.mount``,
``memfs.commands.umount``).
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import re
import socket
import time
from pathlib import Path
from typing import Any

from memfs.contract.exit_codes import EXIT_ERROR
from memfs.host.portable import process_runs, user_id
from memfs.host.private import NotPrivateError, private_dir

log = logging.getLogger(__name__)

LOG_MAX_BYTES = 2 * 1024 * 1024  # a daemon's log rotates at this size...
LOG_BACKUPS = 2  # ...keeping this many older parts (.log.1, .log.2): at most 6 MiB a mount
STALE_AFTER = 7 * 24 * 3600.0  # seconds untouched before a gone mount's files are pruned
# the files of one mount (``state_path``), never a session's (``session-…``)
# (a leading dot and a random part: what a write cut short left, memfs.host.private.replace_file;
# tmp and report.json.tmp: what earlier versions wrote first)
MOUNT_FILE = re.compile(
    r"^\.?(?P<digest>[0-9a-f]{16})\.(pid|log(\.\d+)?|status(\.sock)?|tmp|report\.json(\.tmp)?)"
    r"(\.\w+\.tmp)?$"
)
# tmp: see above
STATE_SUFFIXES = ("pid", "status", "status.sock", "tmp", "report.json", "report.json.tmp")


class MountError(Exception):
    """A mount cannot start; the message is one line for a person, ``code`` the exit status of
    its kind of fault (``memfs.contract.exit_codes``: a refused key 5, an unknown store 3...)."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code

    def ready_line(self) -> str:
        """This failure as a background daemon reports it (``read_ready`` reads the code)."""
        return f"error {self.code}: {self}"


def _private_dir(path: Path) -> None:
    """Create ``path`` 0700, or refuse it unless ours and not group/world writable: anyone can
    make ``/tmp/memfs-<uid>``, and one planted by another user would let them read our logs and
    plant a pid file that ``memfs umount`` signals."""
    try:
        private_dir(path, "state directory")
    except NotPrivateError as exc:
        raise MountError(str(exc)) from None


def runtime_dir() -> Path:
    """``$XDG_RUNTIME_DIR/memfs``, else ``/tmp/memfs-<uid>/memfs``: private to this user
    (Windows, which has no uids: ``%LOCALAPPDATA%\\memfs\\run``, the user's own by its ACL)."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    uid = user_id()
    if xdg:
        path = Path(xdg) / "memfs"
    elif uid is None:
        path = Path(os.environ.get("LOCALAPPDATA") or os.path.expanduser("~")) / "memfs" / "run"
    else:
        base = Path(f"/tmp/memfs-{uid}")
        _private_dir(base)
        path = base / "memfs"
    _private_dir(path)
    return path


def state_path(mountpoint: str, suffix: str) -> Path:
    """``<runtime>/memfs/<hash of the mount point>.<suffix>`` (pid file, log)."""
    real = os.path.realpath(mountpoint)
    digest = hashlib.sha1(real.encode()).hexdigest()[:16]
    return runtime_dir() / f"{digest}.{suffix}"


def socket_path(status_file: Path) -> Path:
    """The socket on which the daemon that writes ``status_file`` answers with its status."""
    return status_file.with_name(status_file.name + ".sock")


def fresh_status(status_file: Path, *, timeout: float = 2.0) -> dict[str, Any] | None:
    """The status document of the daemon that publishes ``status_file``, as of now: asked on
    its socket, else (no socket, or no answer within ``timeout``: a stuck daemon) read from the
    file it last wrote. None if neither gives a document."""
    if hasattr(socket, "AF_UNIX"):
        chunks = []
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(timeout)
                conn.connect(str(socket_path(status_file)))
                while chunk := conn.recv(65536):
                    chunks.append(chunk)
            doc = json.loads(b"".join(chunks))
        except (OSError, ValueError):
            doc = None
        if isinstance(doc, dict):
            return doc
    try:
        doc = json.loads(status_file.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def remove_state(mountpoint: str, *, logs: bool) -> None:
    """Remove the state files of the mount on ``mountpoint`` (its daemon is gone), and with
    ``logs`` its default log and the log's rotated parts."""
    names = [state_path(mountpoint, suffix) for suffix in STATE_SUFFIXES]
    if logs:
        main = state_path(mountpoint, "log")
        names += [main] + [main.with_name(f"{main.name}.{n}") for n in range(1, LOG_BACKUPS + 1)]
    for path in names:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            log.debug("state file %s not removed: %s", path, exc)


def prune_stale() -> int:
    """Remove the files of mounts whose daemon is gone (its pid runs no more) and that nobody
    touched for ``STALE_AFTER``; how many. Problems are logged, never raised (housekeeping)."""
    removed = 0
    try:
        directory = runtime_dir()
        entries = list(os.scandir(directory))
    except (MountError, OSError) as exc:
        log.debug("state directory not pruned: %s", exc)
        return 0
    horizon = time.time() - STALE_AFTER
    for entry in entries:
        match = MOUNT_FILE.match(entry.name)
        if match is None or _daemon_runs(directory / f"{match['digest']}.pid"):
            continue
        try:
            if entry.stat(follow_symlinks=False).st_mtime < horizon:
                os.unlink(entry.path)
                removed += 1
        except OSError as exc:
            log.debug("stale state file %s not removed: %s", entry.path, exc)
    return removed


def mounts_of(store_id: str) -> list[str]:
    """The mount points where a running daemon of this user serves ``store_id`` (from the
    status files the daemons publish; ``memfs search`` reads their ``.search/``)."""
    found = []
    try:
        entries = sorted(runtime_dir().glob("*.status"))
    except (MountError, OSError):
        return []
    for status in entries:
        try:
            doc = json.loads(status.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(doc, dict) or not _daemon_runs(status.with_suffix(".pid")):
            continue
        # a mount of several stores has one section per store, its mount point inside the mount
        for section in doc.get("stores") or [doc]:
            mountpoint = section.get("mountpoint") if isinstance(section, dict) else None
            if (
                section.get("store_id") == store_id
                and isinstance(mountpoint, str)
                and os.path.isdir(mountpoint)
                and (section is not doc or os.path.ismount(mountpoint))
            ):
                found.append(mountpoint)
    return found


def mounted_elsewhere(store_id: str, described: str, *, but: str | None = None) -> str | None:
    """The warning (not a refusal) for a store that a running mount of this user (or a
    session's directory) other than ``but`` already serves; None when none does."""
    others = [mountpoint for mountpoint in mounts_of(store_id) if mountpoint != but]
    if not others:
        return None
    return (
        f"store {described} is also mounted at {', '.join(others)}; the mounts do not share "
        "their caches, and a file saved through both at once keeps one save, the other as a "
        "conflict copy"
    )


def _daemon_runs(pid_file: Path) -> bool:
    """True if the process a pid file names exists (a reused pid errs on the side of keeping)."""
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return False
    if os.path.isdir("/proc/self"):  # Linux
        return os.path.exists(f"/proc/{pid}")
    return process_runs(pid)  # macOS, Windows: no /proc


def is_dead_mount(path: str) -> bool:
    """True if ``path`` is a FUSE mount whose daemon is gone (ENOTCONN: killed, crashed;
    ECONNABORTED: a request the kernel held when the connection was aborted). A dead mount
    whose root attributes the kernel still caches answers lstat: False until they expire."""
    try:
        os.lstat(path)
    except OSError as exc:
        return exc.errno in (errno.ENOTCONN, errno.ECONNABORTED)
    return False


def check_mountpoint(mountpoint: str) -> None:
    """Refuse a missing, non-directory, mounted or non-empty mount point (left untouched)."""
    if is_dead_mount(mountpoint):
        raise MountError(
            f"{mountpoint} is still mounted by a memfs daemon that is gone (transport endpoint "
            f"is not connected); run: memfs umount {mountpoint}"
        )
    if not os.path.exists(mountpoint):
        raise MountError(f"mount point {mountpoint} does not exist")
    if not os.path.isdir(mountpoint):
        raise MountError(f"mount point {mountpoint} is not a directory")
    if os.path.ismount(mountpoint):
        raise MountError(f"{mountpoint} is already a mount point")
    try:
        if os.listdir(mountpoint):
            raise MountError(f"mount point {mountpoint} is not empty")
    except PermissionError:
        raise MountError(f"mount point {mountpoint} is not readable") from None
