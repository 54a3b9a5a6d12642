"""The ``memfs`` command: builds the argument parser from the command modules and dispatches.

Each command group lives in ``memfs/commands/`` and exposes ``register(subparsers)``, which adds
its subparsers and sets ``func`` (returning an exit code). Expected failures are printed as one
line on stderr with a meaningful exit code; only bugs produce a traceback.

Start-up is part of the interface: building the whole parser imports only the standard library
and the command modules' argument definitions, so ``--version``, ``--help`` and usage errors
answer at once; a command imports what it needs (trio, httpx, the daemon, the server) when it
runs. ``tests/commands/test_startup.py`` checks this, ``python -m bench cli`` measures it.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from memfs import __version__
from memfs.commands import COMMAND_MODULES, completion
from memfs.commands.parsing import Parser

log = logging.getLogger(__name__)


def build_parser() -> Parser:
    parser = Parser(
        prog="memfs",
        description="Mount a memory store as a directory, or serve the Memory Stores API.",
    )
    parser.add_argument("--version", action="version", version=f"memfs {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(subparsers)
    completion.register(subparsers, parser)
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
