"""What both kinds of session do at their end (a mount's, ``memfs.session.runner``; synced
directories', ``memfs.session.synced``): the stop report from each store's report, the root
removed with ``rmdir`` only, systemd told, and the cleanup after a session that died.

Nothing here imports pyfuse3: a synced session runs where it is not installed.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

from memfs.mount.report import report_sections
from memfs.mount.statedir import MountError, is_dead_mount, remove_state
from memfs.session.state import SessionState

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1

UNUPLOADED_NOTE = (
    "changes it had acknowledged stay in its write-back journal on disk and are uploaded by the "
    "next session or mount of this store"
)


def lazy_unmount(path: Path) -> bool:
    """Detach a (possibly dead) mount point now, whatever still uses it (blocking)."""
    tool = shutil.which("fusermount3") or shutil.which("fusermount")
    argv = [tool, "-uz", str(path)] if tool else ["umount", "-l", str(path)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=15)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        log.warning("lazy unmount of %s failed: %s", path, lines[-1] if lines else "")
    return done.returncode == 0


def clean_up_after(state: SessionState) -> list[str]:
    """What is left of a session whose process died without its teardown (``kill -9``): detach
    its dead mount, remove the root if that session created it. One line per thing done or not."""
    root = Path(state.root)
    problems = [f"the session daemon (pid {state.pid}) died without unmounting; cleaning up"]
    if is_dead_mount(str(root)) or os.path.ismount(root):
        lazy_unmount(root)
        problems.append(f"{root}: detached lazily; every store's {UNUPLOADED_NOTE}")
    try:
        remove_state(str(root), logs=False)
    except MountError as exc:
        log.debug("the daemon's state files of %s not removed: %s", root, exc)
    if state.created_root:
        remove_dir(root, problems)
    return problems


def remove_dir(path: Path, problems: list[str]) -> None:
    """``rmdir``: never a recursive delete (what is in a directory we did not fill is not ours)."""
    try:
        path.rmdir()
    except FileNotFoundError:
        pass
    except OSError as exc:
        problems.append(f"cannot remove {path}: {exc.strerror}")


def sd_notify(message: str) -> None:
    """Tell systemd (Type=notify) about our state; a no-op outside systemd."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(message.encode("utf-8"))
    except OSError as exc:
        log.warning("cannot notify systemd: %s", exc)


def stop_report(path: Path, report: dict[str, Any] | None) -> list[str]:
    """One problem line per error of the daemon's final flush and per change it could not
    upload as meant (not uploaded: with the journal directory that keeps it; refused; in
    conflict; of a deleted store), each once, from one store's unmount report."""
    if report is None:
        return []
    problems: dict[str, None] = {}
    for error in report.get("errors") or []:
        problems.setdefault(f"{path}: {' '.join(error.split())}", None)
    for kind, header, items in report_sections(report):
        if kind == "open":  # saved: a note (``stop_notes``); the rest has its own section
            lost = [e["saved"] == "not kept" for e in report.get("open_at_end") or []]
            items = [item for item, gone in zip(items, lost, strict=True) if gone]
        if kind == "gone":
            problems.setdefault(f"{path}: {header.rstrip(':')}", None)
        fates = [""] * len(items)  # a refused file's or a conflict's line says where it went
        if kind == "pending":
            fates = [
                f" (kept in {p['kept_in']}, uploaded by the next mount of this store)"
                if p["kept_in"]
                else " (lost: the mount had no journal)"
                for p in report["pending"]
            ]
        for item, fate in zip(items, fates, strict=True):
            problems.setdefault(f"{path}: {item}{fate}", None)
    return list(problems)


def stop_notes(path: Path, report: dict[str, Any] | None) -> list[str]:
    """One line per file open for writing when the session stopped, saying where what it
    held went (a version, a conflict copy, a kept copy, the journal): the programs holding
    them were cut off, and are told here."""
    for kind, _, items in report_sections(report or {}):
        if kind == "open":
            return [f"{path}: {item}" for item in items]
    return []
