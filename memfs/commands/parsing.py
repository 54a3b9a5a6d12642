"""What every parser of the ``memfs`` command shares: help that shows each default, and the
shell-completion hints of arguments naming files and directories.

Building the parsers must stay cheap (``memfs --help`` and usage errors answer in well under
0.15 s), so this module, like every ``register`` of ``memfs.commands``, imports only the standard
library: no trio, httpx, shtab, nor any memfs layer below the commands.
"""

from __future__ import annotations

import argparse
from typing import Any

# shtab's FILE and DIRECTORY hints for bash and zsh, spelled out: importing shtab to build the
# parser would cost ~0.1 s (it reads its version from importlib.metadata). tests/commands checks
# they equal shtab's own.
FILE: dict[str, str] = {"bash": "_shtab_compgen_files", "zsh": "_files"}
DIRECTORY: dict[str, str] = {"bash": "_shtab_compgen_dirs", "zsh": "_files -/"}


def complete_paths(
    parser: argparse.ArgumentParser,
    *,
    files: tuple[str, ...] = (),
    directories: tuple[str, ...] = (),
) -> None:
    """Tell the completion script which arguments of ``parser`` (by ``dest``) name a file or a
    directory; a ``dest`` the parser does not have is a bug (KeyError when the parser is built)."""
    actions = {action.dest: action for action in parser._actions}
    for dests, hint in ((files, FILE), (directories, DIRECTORY)):
        for dest in dests:
            actions[dest].complete = hint  # type: ignore[attr-defined]  # read by shtab


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Help that ends every option's line with ``(default: …)`` when it has a default value.

    Unlike ``argparse.ArgumentDefaultsHelpFormatter`` it says nothing for flags (off unless
    given) and for options without a value (None): those whose default is not a value (the
    mounting user, an environment variable) say so in their own help, as ``(default: …)``.
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "(default" in text or "%(default)" in text or not _has_default(action):
            return action.help
        return f"{text} (default: %(default)s)".lstrip()


class RawDescriptionDefaultsHelpFormatter(
    DefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter
):
    """``DefaultsHelpFormatter`` keeping the line breaks of the description and epilog."""


def _has_default(action: argparse.Action) -> bool:
    default = action.default
    if default is None or default is argparse.SUPPRESS or isinstance(default, bool):
        return False
    if default == []:
        return False
    return bool(action.option_strings) or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE)


class Parser(argparse.ArgumentParser):
    """The parser of ``memfs`` and of each of its commands (``add_subparsers`` makes more of
    this class), showing defaults in ``--help``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)


_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def byte_size(text: str) -> int:
    """An argparse ``type``: a number of bytes, with an optional binary unit (``1048576``,
    ``512K``, ``64M``, ``64MiB``, ``1G``)."""
    spelled = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = spelled[-1:] if spelled[-1:] in _UNITS else ""
    number = spelled[: len(spelled) - len(unit)]
    if not number.isascii() or not number.isdigit():
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a size in bytes (e.g. 1048576, 512K, 64M, 1G)"
        )
    return int(number) * _UNITS[unit]


def megabytes(text: str) -> float:
    """An argparse ``type``: a number of megabytes (MiB), 0 or more (``--cache-size``)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 2**40:  # NaN and infinities too
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of megabytes (e.g. 64, 0.5)")
    return value


def swapped_arguments(
    command: str, order: tuple[str, str], given: tuple[str, str], *, made: bool = False
) -> str | None:
    """The line that says two arguments were given the wrong way round, and the right order,
    or None. ``order`` names them ("DIR", "STORE"), ``given`` is what was typed in that order:
    swapped when the one that must be a directory is not one and the other is. ``made``: the
    command makes a missing DIR, so the store must also be written as a path (``./notes``),
    not a name that a directory here happens to have, and DIR must not exist."""
    import os
    import shlex

    directory = order.index("DIR") if "DIR" in order else order.index("MOUNTPOINT")
    other = 1 - directory
    if os.path.isdir(given[directory]) or not os.path.isdir(given[other]):
        return None
    if made and (os.sep not in given[other] or os.path.lexists(given[directory])):
        return None
    right = f"{shlex.quote(given[1])} {shlex.quote(given[0])}"
    return (
        f"{given[directory]!r} is not a directory but {given[other]!r} is: the arguments are "
        f"swapped? {command} takes {order[0]} {order[1]}: {command} {right}"
    )
