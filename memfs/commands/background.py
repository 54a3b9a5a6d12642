"""What the commands that start a process in the background share (``memfs mount``,
``memfs sync --detach``): the child's log, and the line it reports readiness with.

The parent re-executes ``memfs`` with ``--ready-fd N`` and its output to a log file; the child
writes ``ok`` (or ``error: …``) to that pipe once it serves. Standard library only at the top
(``tests/commands/test_startup.py``).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path


def setup_logging(debug: bool, log_file: str | None) -> None:
    """Log to ``log_file`` (made 0600: logs name files and stores) or stderr."""
    from memfs.mount.logfile import PrivateRotatingFileHandler
    from memfs.mount.statedir import LOG_BACKUPS, LOG_MAX_BYTES

    handler: logging.Handler
    if log_file:  # size-bounded: a mount may run for months
        handler = PrivateRotatingFileHandler(
            Path(log_file), "log file", max_bytes=LOG_MAX_BYTES, backups=LOG_BACKUPS
        )
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else logging.INFO)
    if not debug:
        logging.getLogger("httpx").setLevel(logging.WARNING)
        logging.getLogger("httpcore").setLevel(logging.WARNING)


def read_ready(fd: int, child: subprocess.Popen[bytes], *, timeout: float) -> str:
    """The line a child started in the background writes to its readiness pipe (``ok``, or
    ``error: …``), or what it wrote before it died or ``timeout`` passed."""
    deadline = time.monotonic() + timeout
    data = b""
    os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as pipe:
        while time.monotonic() < deadline:
            chunk = pipe.readline()
            data += chunk
            if chunk.endswith(b"\n") or not chunk:
                break
    return data.decode("utf-8", "replace").strip()
