"""Running ``memfs export`` as a user does (a subprocess on a real server) and git in its DIR."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kit.servers import ServerProcess


def memfs(
    server: ServerProcess,
    *args: str,
    expect: int = 0,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``memfs ARGS`` (in ``cwd``) with the server's client environment (or ``env``): no
    traceback, no key in the output, the exit code ``expect``."""
    done = subprocess.run(
        [sys.executable, "-m", "memfs", *args],
        env=env or server.client_env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert server.api_key not in done.stdout + done.stderr
    assert done.returncode == expect, (done.returncode, done.stdout, done.stderr)
    return done


def git(root: Path, *args: str) -> str:
    """git as a user runs it in DIR (none of the machine's or user's configuration)."""
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    return subprocess.run(
        ["git", "-C", str(root), *args], env=env, capture_output=True, check=True, text=True
    ).stdout
