"""What the commands that start a process in the background share (``memfs mount``,
``memfs sync --detach``): the child's log, and the line it reports readiness with.

The parent re-executes ``memfs`` with ``--ready-fd N`` and its output to a log file; the child
writes ``ok`` (or ``error: …``) to that pipe once it serves. Standard library only at the top
(``tests/commands/test_startup.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from memfs.contract.exit_codes import EXIT_ERROR, EXIT_OK

# a child's failure on its readiness pipe: "error 5: the API key ... was refused by ..."
_ERROR_LINE = re.compile(r"error(?: ([0-9]+))?: (.*)", re.DOTALL)


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


def readiness(ready_fd: int | None, command: str) -> Callable[[str], None]:
    """The child's side: a function that writes its readiness line once to ``ready_fd`` and
    closes it; in the foreground (no pipe), an ``error: …`` goes to stderr as ``command: …``."""

    def ready(message: str) -> None:
        nonlocal ready_fd
        if ready_fd is None:
            failed = parse_error(message)
            if failed is not None:
                print(f"{command}: {failed[1]}", file=sys.stderr)
            return
        with contextlib.suppress(OSError):
            os.write(ready_fd, (message + "\n").encode())
            os.close(ready_fd)
        ready_fd = None

    return ready


def parse_error(line: str) -> tuple[int, str] | None:
    """(exit status, message) of a readiness line ``error N: …`` (``error: …``: status 1),
    or None for any other line."""
    match = _ERROR_LINE.match(line)
    if match is None:
        return None
    return int(match.group(1) or EXIT_ERROR), match.group(2)


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


def store_arguments(args: argparse.Namespace, cache_dir: str | None) -> list[str]:
    """The options that name a store and its credentials, for the child (``--base-url`` is not
    among them: it goes by environment, ``start_in_background``)."""
    argv: list[str] = []
    for flag, value in (
        ("--api-key-file", args.api_key_file),
        ("--session-id", args.session_id),
        ("--cache-dir", cache_dir),
        ("--actor", args.actor),
        ("--session", args.session),
        ("--profile", args.profile),
    ):
        if value:
            argv += [flag, value]
    if args.read_only:
        argv.append("--read-only")
    if args.debug:
        argv.append("--debug")
    return argv


def start_in_background(
    command: str,
    argv: list[str],
    base_url: str | None,
    *,
    timeout: float,
    log_file: str,
    what: str,
) -> int:
    """Run a ``memfs`` command line as a child in a session of its own and wait for its
    readiness line (``--ready-fd``); 0 once it says ``ok``. Otherwise its error is printed,
    one line, the child ended, and the exit status of its kind of fault returned.

    Args:
        command: what the error is printed as ("memfs mount: ...").
        argv: the child's command line.
        base_url: handed over in the environment, never in argv: argv is world-readable and
            the URL may hold a password.
        timeout: seconds to wait for the readiness line.
        log_file: where the child logs, named when it fails without saying why.
        what: the child in that message ("the mount daemon").
    """
    read_end, write_end = os.pipe()
    env = None
    if base_url:
        env = dict(os.environ, ANTHROPIC_BASE_URL=base_url)
    with open(os.devnull, "rb") as devnull:
        child = subprocess.Popen(
            [*argv, "--ready-fd", str(write_end)],
            stdin=devnull,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(write_end,),
            start_new_session=True,
            env=env,
        )
    os.close(write_end)
    answer = read_ready(read_end, child, timeout=timeout)
    if answer == "ok":
        return EXIT_OK
    failed = parse_error(answer)
    if failed is not None:
        print(f"{command}: {failed[1]}", file=sys.stderr)
    else:
        print(f"{command}: {what} failed to start (see {log_file})", file=sys.stderr)
    if child.poll() is None:
        child.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(10)
    return EXIT_ERROR if failed is None else failed[0]
