"""``memfs completion bash|zsh``: print the shell completion script of the whole command line.

The script is generated from the parser itself by shtab, so every command, option and choice
completes as ``--help`` describes it, and a new option needs no change here; arguments naming
files or directories carry hints (``memfs.commands.parsing.complete``). How to install the
script: README, *Shell completion*.
"""

from __future__ import annotations

import argparse
from typing import Any

from memfs.commands.parsing import RawDescriptionDefaultsHelpFormatter

SHELLS = ("bash", "zsh")

INSTALL = """install:
  bash  memfs completion bash > ~/.local/share/bash-completion/completions/memfs
        (or add `eval "$(memfs completion bash)"` to ~/.bashrc)
  zsh   memfs completion zsh > ~/.zfunc/_memfs
        (with `fpath+=(~/.zfunc)` before `compinit` in ~/.zshrc)
"""


def register(subparsers: Any, root: argparse.ArgumentParser) -> None:
    """Add ``completion``, which prints the script completing ``root``'s command line."""
    parser = subparsers.add_parser(
        "completion",
        help="print the shell completion script (bash or zsh)",
        description="Print a script that completes memfs commands, options and arguments.",
        epilog=INSTALL,
        formatter_class=RawDescriptionDefaultsHelpFormatter,
    )
    parser.add_argument(
        "shell", choices=SHELLS, metavar="SHELL", help="the shell to complete in: bash or zsh"
    )

    def run(args: argparse.Namespace) -> int:
        import shtab  # only here: its import costs more than building every parser

        print(shtab.complete(root, shell=args.shell), end="")
        return 0

    parser.set_defaults(func=run)
