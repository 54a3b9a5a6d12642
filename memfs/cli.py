"""The ``memfs`` command: builds the argument parser from the command modules and dispatches.

Each command group lives in ``memfs/commands/`` and exposes ``register(subparsers)``, which adds
its subparsers and sets ``func`` (returning an exit code). Expected failures are printed as one
line on stderr with a meaningful exit code; only bugs produce a traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from memfs import __version__
from memfs.commands import COMMAND_MODULES

log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memfs",
        description="Mount a memory store as a directory, or serve the Memory Stores API.",
    )
    parser.add_argument("--version", action="version", version=f"memfs {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(func(args) or 0)
    except KeyboardInterrupt:
        return 130
