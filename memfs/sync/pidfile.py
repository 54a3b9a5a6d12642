"""The pid file of a synced directory: which process keeps it in step.

``memfs sync`` writes it (``<pid>\\n<DIR>\\nsync\\n``, in the per-user state directory, never
through a link: ``memfs.host.private.replace_file``); a second ``memfs sync`` of the same directory
refuses to start while that process runs, and ``memfs sync --stop`` signals it. Portable: a
process is looked for with ``kill(pid, 0)``, and on Linux a zombie (killed, not yet reaped)
counts as gone; on Windows, where ``kill`` would end it, ``memfs.host.portable.process_runs``.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from memfs.host import portable
from memfs.host.private import replace_file

KIND = "sync"


def write_pid_file(pid_file: Path, directory: Path) -> None:
    replace_file(pid_file, f"{os.getpid()}\n{directory}\n{KIND}\n".encode(), "pid file")


def sync_pid(pid_file: Path) -> int | None:
    """The pid the file names, if it is a sync's and that process runs."""
    try:
        fields = pid_file.read_text().split("\n")
        pid = int(fields[0])
    except (OSError, ValueError, IndexError):
        return None
    if len(fields) < 3 or fields[2] != KIND:
        return None
    return pid if process_runs(pid) else None


def process_runs(pid: int) -> bool:
    """True while ``pid`` runs and is ours to signal (a zombie counts as gone)."""
    if portable.WINDOWS:
        return portable.process_runs(pid)
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    with contextlib.suppress(OSError, IndexError), open(f"/proc/{pid}/stat") as stat_file:
        return stat_file.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    return True
