"""Links an attacker plants where memfs writes as root (issue 20), and the file they aim at.

``victim`` makes a file that root owns (the target); ``plant`` puts a symbolic or a hard link to
it at a name memfs writes, and returns the end of the one line memfs refuses it with (a log:
memfs appends to it; other files are replaced, which no link survives); ``untouched`` says
whether the victim is as ``victim`` made it; ``as_nobody`` runs a shell script as the attacker.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

NOBODY = 65534  # the attacker: an agent's user
PRECIOUS = "precious\n"


def victim(path: Path) -> Path:
    path.write_text(PRECIOUS)
    path.chmod(0o644)
    return path


def plant(kind: str, at: Path, target: Path) -> str:
    """A ``"symbolic link"`` (the attacker's own) or a ``"hard link"`` at ``at``."""
    if kind == "symbolic link":
        os.symlink(target, at)
        if os.getuid() == 0:
            os.lchown(at, NOBODY, NOBODY)
        return "is a symbolic link: memfs never writes through one"
    os.link(target, at)
    return "has 2 names (a hard link): memfs never writes to a file another name reaches"


def untouched(target: Path) -> bool:
    return target.read_text() == PRECIOUS and stat.S_IMODE(target.stat().st_mode) == 0o644


def as_nobody(script: str, cwd: Path, stdin: str = "") -> str:
    """``sh -c script`` as the attacker (``NOBODY``, no other group) in ``cwd``; its stdout."""
    done = subprocess.run(
        ["sh", "-c", script], cwd=cwd, input=stdin, user=NOBODY, group=NOBODY, extra_groups=[],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
