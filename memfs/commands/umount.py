"""``memfs umount MOUNTPOINT``: a mount's end, asked for from the command line.

Refused while files are open for writing (exit 7, each named with its processes:
``memfs.mount.busy``) unless ``--force`` (a ``syncfs`` first); then the daemon is asked to end
(SIGTERM: save what is open, flush, unmount, exit) and waited for (files left to upload shown on
a terminal: ``memfs.commands.progress``), its unmount report printed, and the mount's state files
and log removed when all went well (``memfs.mount.statedir``); a mount point whose daemon died is
detached. ``memfs umount`` of a session's root is ``memfs session stop``. It signals only a
process that ``/proc`` shows is the user's own daemon of that mount point.

It must not implement the end itself (``memfs.mount.daemon`` does).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from memfs.commands.extras import needs_extra
from memfs.commands.parsing import complete_paths
from memfs.contract.exit_codes import EXIT_BUSY
from memfs.host.private import NotPrivateError

log = logging.getLogger(__name__)

UMOUNT_TIMEOUT = 45.0
BUSY_STATUS_WAIT = 2.5  # seconds to wait for a status document newer than the /proc scan

UMOUNT_EPILOG = """exit status (the same for every memfs command: README, "Exit codes"):
  0  unmounted; everything was uploaded
  1  unmounted with something not uploaded as meant (the report says what and where it is
     kept), or the unmount failed
  2  a usage error, or the mount extra is missing
  7  files under MOUNTPOINT are open for writing (each named, with the processes holding it):
     nothing was done; close them, or use --force
"""


def register(subparsers: Any) -> None:
    umount = subparsers.add_parser(
        "umount",
        help="flush pending writes and unmount",
        description="Ask the mount daemon to upload pending writes, unmount and exit.\n"
        "A mount with files open for writing is refused (exit 7), each file named with the\n"
        "processes holding it. The root of a `memfs session` stops the session (memfs session\n"
        "stop); a store under it cannot be unmounted alone. A directory kept in step by `memfs\n"
        "sync` stops that sync (memfs sync --stop).",
        epilog=UMOUNT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    umount.add_argument("mountpoint", metavar="MOUNTPOINT")
    umount.add_argument(
        "--force",
        action="store_true",
        help="unmount even with files open for writing: the kernel first hands over every "
        "page written (syncfs), then what each open file holds is saved as a version (or, "
        "if the store refuses it, as a kept copy), and only then the mount goes; the report "
        "names each file so saved. The programs holding them get ENOTCONN afterwards",
    )
    umount.add_argument(
        "--json",
        action="store_true",
        help="print the daemon's unmount report (what was not uploaded, refused, conflicted) "
        "as JSON",
    )
    complete_paths(umount, directories=("mountpoint",))
    umount.set_defaults(func=needs_extra("mount", "memfs umount", run_umount))


def _stop_sync(directory: str, *, as_json: bool) -> int | None:
    """``memfs umount`` of a synced directory is ``memfs sync --stop`` (None: not one)."""
    from memfs.commands.sync import stop_sync
    from memfs.mount.statedir import MountError, state_path
    from memfs.sync.pidfile import sync_pid

    try:
        pid = sync_pid(state_path(directory, "pid"))
    except MountError:
        return None
    if pid is None:
        return None
    print(
        f"memfs umount: {directory} is a synced directory: stopping its memfs sync", file=sys.stderr
    )
    return stop_sync(Path(directory), as_json=as_json)


def _daemon_pid(mountpoint: str) -> int | None:
    """The pid of the memfs daemon serving ``mountpoint`` (None: none runs; MountError)."""
    from memfs.mount.statedir import state_path

    try:
        text = state_path(mountpoint, "pid").read_text()
        pid = int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    if not _alive(pid):  # killed, not yet reaped: a zombie has no command line to check
        return None
    if not _is_daemon_of(pid, mountpoint):
        print(
            f"memfs umount: the pid file names process {pid}, which is not the memfs daemon of "
            f"{mountpoint}; not signalled",
            file=sys.stderr,
        )
        return None
    return pid


def _is_daemon_of(pid: int, mountpoint: str) -> bool:
    """True if ``pid`` is our own ``memfs mount ... MOUNTPOINT`` process (``/proc``)."""
    proc = f"/proc/{pid}"
    try:
        if os.stat(proc).st_uid != os.getuid():
            return False
        with open(f"{proc}/cmdline", "rb") as cmdline:
            args = [a.decode("utf-8", "replace") for a in cmdline.read().split(b"\0") if a]
        cwd = os.readlink(f"{proc}/cwd")
    except OSError:
        return False
    if "mount" not in args or not any("memfs" in a for a in args[:3]):
        return False
    wanted = {os.path.normpath(mountpoint), os.path.realpath(mountpoint)}
    return any(os.path.normpath(os.path.join(cwd, a)) in wanted for a in args)


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat_file:
            state = stat_file.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def run_umount(args: argparse.Namespace) -> int:
    from memfs.commands.progress import FlushProgress
    from memfs.mount.statedir import MountError, is_dead_mount, remove_state, state_path

    mountpoint = os.path.abspath(args.mountpoint)
    held = _umount_session(mountpoint, as_json=args.json, force=args.force)
    if held is not None:
        return held
    stopped = _stop_sync(mountpoint, as_json=args.json)
    if stopped is not None:
        return stopped
    try:
        pid = _daemon_pid(mountpoint)
    except MountError as exc:
        print(f"memfs umount: {exc}", file=sys.stderr)
        return 1
    if pid is not None:
        busy = _refuse_busy(mountpoint, force=args.force)
        if busy is not None:
            return busy
    report = state_path(mountpoint, "report.json")
    if pid is None and is_dead_mount(mountpoint):
        return _detach_dead(mountpoint, report, args.json)
    if pid is None:
        if not os.path.ismount(mountpoint):
            print(f"memfs umount: {mountpoint} is not mounted", file=sys.stderr)
            if report.exists():  # its daemon left on its own (signalled, fusermount3 -u)
                _print_report(report, args.json)
            return 1
        fusermount = shutil.which("fusermount3") or "fusermount3"
        result = subprocess.run([fusermount, "-u", mountpoint], capture_output=True, text=True)
        if result.returncode != 0:
            reason = result.stderr.strip().splitlines()[-1:] or ["fusermount3 failed"]
            print(f"memfs umount: {reason[0]}", file=sys.stderr)
            return 1
        # A daemon whose connection was aborted exits after its final flush; its mount point
        # may still answer lstat from the kernel's attribute cache (not "dead" yet), and its
        # report waits here.
        return _consume_report(mountpoint, report, args.json) if report.exists() else 0
    report.unlink(missing_ok=True)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + UMOUNT_TIMEOUT
    with FlushProgress("memfs umount", [mountpoint]) as progress:
        while time.monotonic() < deadline and _alive(pid):
            progress.update()
            time.sleep(0.02)
    if _alive(pid):
        print(f"memfs umount: the daemon (pid {pid}) did not exit in time", file=sys.stderr)
        return 1
    if is_dead_mount(mountpoint):  # its connection was aborted: the daemon cannot unmount it
        return _detach_dead(mountpoint, report, args.json)
    code = _print_report(report, args.json)
    if code == 0:  # all uploaded: nothing of this mount is worth keeping, not even its log
        remove_state(mountpoint, logs=True)
    return code


def _refuse_busy(mountpoint: str, *, force: bool) -> int | None:
    """Refuse (``EXIT_BUSY``) a mount whose files are open for writing, naming each file and
    the processes holding it; with ``force``, make the kernel hand over the pages they wrote
    (``syncfs``) and let the unmount go on (the daemon saves what they hold). None: go on."""
    from memfs.mount.busy import sync_mount

    if force:
        sync_mount(mountpoint)
        return None
    held = _open_for_writing(mountpoint)
    if not held:
        return None
    from memfs.contract.paths import shown

    print(
        f"memfs umount: {len(held)} file(s) under {shown(mountpoint)} are open for writing; "
        "nothing was done. Close them, or unmount with --force (what they hold is saved "
        "first; their programs then get ENOTCONN):",
        file=sys.stderr,
    )
    for path, holders in sorted(held.items()):
        print(f"  {shown(path)}: {holders}", file=sys.stderr)
    return EXIT_BUSY


def _open_for_writing(mountpoint: str) -> dict[str, str]:
    """The files under ``mountpoint`` open for writing, each with its holders in words: the
    processes ``/proc`` shows (pid and command, escaped), and the files the daemon's status
    says are open by processes this user cannot see (another user's, through allow_other).
    The daemon's word is checked against a status document written after the ``/proc`` scan
    (it is rewritten every second): a file closed meanwhile does not hold the mount."""
    from memfs.contract.paths import shown
    from memfs.mount.busy import writers

    started = time.time()
    found = writers(mountpoint)
    held: dict[str, list[str]] = {}
    for writer in found:
        held.setdefault(writer.path, []).append(f"pid {writer.pid} ({shown(writer.command)})")
    unseen = _daemon_open_for_writing(mountpoint, newer_than=None) - set(held)
    if unseen:
        fresh = _daemon_open_for_writing(mountpoint, newer_than=started)
        for path in sorted(unseen & fresh):
            held[path] = ["a process this user cannot see (the daemon has it open for writing)"]
    return {path: ", ".join(holders) for path, holders in held.items()}


def _daemon_open_for_writing(mountpoint: str, *, newer_than: float | None) -> set[str]:
    """The files open for writing that the daemon's status document lists (relative to the
    mount point); ``newer_than``: from a document written after that time (waited for up to
    ``BUSY_STATUS_WAIT`` seconds, else nothing)."""
    from memfs.mount.statedir import MountError, state_path
    from memfs.mount.status import open_for_writing

    try:
        path = state_path(mountpoint, "status")
    except MountError:
        return set()
    deadline = time.monotonic() + BUSY_STATUS_WAIT
    while True:
        try:
            fresh = newer_than is None or path.stat().st_mtime > newer_than
            if fresh:
                doc = json.loads(path.read_bytes())
                return open_for_writing(doc) if isinstance(doc, dict) else set()
        except (OSError, ValueError):
            return set()
        if time.monotonic() > deadline:
            return set()
        time.sleep(0.05)


def _umount_session(mountpoint: str, *, as_json: bool, force: bool = False) -> int | None:
    """``memfs umount ROOT`` of a session's mount stops the session, as ``memfs session stop``
    does (its process serves nothing else; every store flushed, what was not uploaded printed
    store by store); a path inside it (``ROOT/<slug>``: its stores share one mount, none can
    leave alone) is refused with the command that stops it. None: no session holds the path."""
    from memfs.commands.session import STOP_TIMEOUT
    from memfs.commands.session_control import session_holding, stop_session

    root = session_holding(Path(mountpoint))
    if root is None:
        return None
    if root != Path(mountpoint):
        print(
            f"memfs umount: {mountpoint} is inside the session at {root}, whose stores share "
            f"one mount; stop the whole session: memfs session stop --root {root}",
            file=sys.stderr,
        )
        return 1
    busy = _refuse_busy(str(root), force=force)
    if busy is not None:
        return busy
    return stop_session(root, timeout=STOP_TIMEOUT, command="memfs umount", as_json=as_json)


def _detach_dead(mountpoint: str, report: Path, as_json: bool) -> int:
    """Unmount a mount point whose daemon is gone (ENOTCONN); its log stays, for the
    post-mortem. A daemon whose kernel connection was aborted exited after its final flush: its
    report says what it could not upload."""
    from memfs.mount.statedir import remove_state, state_path

    fusermount = shutil.which("fusermount3") or "fusermount3"
    result = subprocess.run([fusermount, "-u", mountpoint], capture_output=True, text=True)
    if result.returncode != 0:
        result = subprocess.run([fusermount, "-uz", mountpoint], capture_output=True, text=True)
    if result.returncode != 0:
        reason = result.stderr.strip().splitlines()[-1:] or ["fusermount3 failed"]
        print(f"memfs umount: {reason[0]}", file=sys.stderr)
        return 1
    if report.exists():
        return _consume_report(mountpoint, report, as_json)
    remove_state(mountpoint, logs=False)
    log_file = state_path(mountpoint, "log")
    print(
        f"memfs umount: unmounted {mountpoint}, whose daemon had died; what it had not uploaded "
        "stays in its journal for the next mount of the store"
        + (f" (its log: {log_file})" if log_file.exists() else ""),
        file=sys.stderr,
    )
    return 1


def _consume_report(mountpoint: str, report: Path, as_json: bool) -> int:
    """Print the report a daemon left behind; with nothing left to upload, the mount's state
    (its log too) is not worth keeping."""
    from memfs.mount.statedir import remove_state

    code = _print_report(report, as_json)
    if code == 0:
        remove_state(mountpoint, logs=True)
    return code


def _print_report(path: Path, as_json: bool) -> int:
    """Print the daemon's unmount report (``memfs.mount.report.unmount_report``) and consume it;
    exit status 1 if some changes were not uploaded as they were meant to be, or if there is
    no report (the daemon died before its final flush: its journal waits for the next mount)."""
    from memfs.host.private import check_private_file
    from memfs.mount.report import render_report, report_problems, report_saved_open

    if not path.exists():
        print(
            "memfs umount: the daemon exited without its report; what it had not uploaded stays "
            "in its journal for the next mount of the store",
            file=sys.stderr,
        )
        return 1
    try:
        check_private_file(path, "unmount report")
        report = json.loads(path.read_bytes())
    except (NotPrivateError, OSError, ValueError) as exc:
        print(f"memfs umount: the unmount report is unreadable: {exc}", file=sys.stderr)
        return 1
    path.unlink(missing_ok=True)
    if as_json:
        print(json.dumps(report, indent=1))
    elif report_problems(report) or report_saved_open(report):  # what was saved is told too
        print(f"memfs umount: {render_report(report).rstrip()}", file=sys.stderr)
    return 1 if report_problems(report) else 0
