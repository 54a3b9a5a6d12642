"""Editors driven for real on a mount, as a user would run them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def vim_append_line(path: Path, line: str, *, home: Path) -> None:
    """Open ``path`` in vim with its defaults (swap file, backup while writing), append
    ``line`` at the end and save (``:wq``). ``home``: a HOME of the test's, so no vimrc of the
    machine's user changes how vim saves."""
    subprocess.run(
        [
            *("vim", "-N", "-i", "NONE", "--not-a-term"),
            *("-c", f"normal Go{line}", "-c", "wq", str(path)),
        ],
        check=True,
        timeout=20,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        env=dict(os.environ, HOME=str(home)),
    )
