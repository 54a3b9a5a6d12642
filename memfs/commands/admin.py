"""``memfs stores …`` and ``memfs memories …``: administer stores and memories over the API.

Owns the command line of these commands (actions, arguments, help); what each action does, its
output and its exit codes (0 ok, 1 error, 2 usage, 3 not found, 4 conflict, 5 auth, 6 server
unreachable) are ``memfs.commands.admin_actions``', imported only when an action runs: it needs
trio and httpx, which ``--help`` and usage errors do not.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from memfs.commands.api_options import DATABRICKS, MEMORY_STORES
from memfs.commands.parsing import complete_paths

log = logging.getLogger(__name__)


PATH_HELP = "a memory's path, such as /notes/todo.md (the leading / may be left out)"


def _at_least_one(text: str) -> int:
    """An argparse type: a whole number >= 1 (else a usage error, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"want a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _run(args: argparse.Namespace) -> int:
    """Run the chosen action (``memfs.commands.admin_actions.ACTIONS``)."""
    from memfs.commands.admin_actions import run

    return run(args)


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON for scripts")
    common.add_argument(
        "--api-key-file",
        metavar="FILE",
        help="read the API key from FILE (0600, the key alone on one line; default: "
        "$ANTHROPIC_API_KEY)",
    )
    common.add_argument(
        "--base-url", metavar="URL", help="API base URL (default: $ANTHROPIC_BASE_URL or hosted)"
    )
    complete_paths(common, files=("api_key_file",))
    return common


def register(subparsers: Any) -> None:
    """Add ``stores`` and ``memories`` with their actions."""
    common = _common()
    epilog = (
        "STORE is a store id (memstore_...) or an exact store name. Exit codes: 0 ok, 1 error, "
        "2 usage, 3 not found, 4 conflict, 5 auth, 6 server unreachable."
    )

    stores = subparsers.add_parser("stores", help="create, list, change and delete memory stores")
    actions = stores.add_subparsers(dest="action", metavar="ACTION", required=True)

    def add(
        parent: Any, name: str, help_text: str, aliases: tuple[str, ...] = ()
    ) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = parent.add_parser(
            name,
            aliases=list(aliases),
            parents=[common],
            help=help_text,
            description=help_text,
            epilog=epilog,
        )
        parser.set_defaults(func=_run, action=name)  # an alias runs its action
        return parser

    p = add(actions, "create", "create a memory store")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--description", metavar="D")
    p.add_argument("--metadata", metavar="KEY=VALUE", nargs="+", action="extend")

    p = add(actions, "list", "list memory stores", aliases=("ls",))
    p.add_argument("--archived", action="store_true", help="include archived stores")

    p = add(actions, "show", "show one memory store")
    p.add_argument("store", metavar="STORE")

    p = add(actions, "update", "rename a store or change its description/metadata")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--name", metavar="NAME")
    p.add_argument("--description", metavar="D")
    p.add_argument(
        "--metadata", metavar="KEY=VALUE", nargs="+", action="extend",
        help="set KEY to VALUE; KEY= deletes KEY",
    )  # fmt: skip

    p = add(actions, "archive", "archive a store (read-only, irreversible)")
    p.add_argument("store", metavar="STORE")

    p = add(actions, "delete", "delete a store with all memories and versions")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    memories = subparsers.add_parser("memories", help="list, read, write and remove memories")
    actions = memories.add_subparsers(dest="action", metavar="ACTION", required=True)

    p = add(actions, "ls", "list memories and directories", aliases=("list",))
    p.add_argument("store", metavar="STORE")
    p.add_argument("prefix", metavar="PREFIX", nargs="?", help="a directory such as /notes/")
    p.add_argument("-r", "--recursive", action="store_true", help="list the whole subtree")

    p = add(actions, "cat", "print a memory's content, or an old version's (--version)")
    p.add_argument("store", metavar="STORE")
    p.add_argument("path", metavar="PATH", help=PATH_HELP)
    p.add_argument(
        "--version",
        metavar="V",
        help="print version V instead (an id as `memories log` shows it, memver_…); a deleted "
        "memory's versions are kept at its last path",
    )
    _versions_api(p)

    p = add(actions, "put", "create or update a memory from FILE or stdin")
    p.add_argument("store", metavar="STORE")
    p.add_argument("path", metavar="PATH", help=PATH_HELP)
    p.add_argument("file", metavar="FILE", nargs="?", default="-", help="a file, or - for stdin")
    complete_paths(p, files=("file",))
    p.add_argument("--if-sha", metavar="SHA256", help="update only if the content has this hash")

    p = add(actions, "rm", "delete a memory (its versions are kept)")
    p.add_argument("store", metavar="STORE")
    p.add_argument("path", metavar="PATH", help=PATH_HELP)
    p.add_argument("--if-sha", metavar="SHA256", help="delete only if the content has this hash")

    p = add(actions, "mv", "rename a memory (it keeps its id)")
    p.add_argument("store", metavar="STORE")
    p.add_argument("source", metavar="SRC")
    p.add_argument("target", metavar="DST")

    p = add(actions, "log", "list versions, newest first", aliases=("history",))
    p.add_argument("store", metavar="STORE")
    p.add_argument("path", metavar="PATH", nargs="?")
    _versions_api(p)
    p.add_argument(
        "-n",
        "--limit",
        type=_at_least_one,
        metavar="N",
        help="show at most N versions (N >= 1; default: all)",
    )

    p = add(
        actions,
        "diff",
        "show what changed between two versions of a memory, as a unified diff",
    )
    p.add_argument("store", metavar="STORE")
    p.add_argument("path", metavar="PATH", help=PATH_HELP)
    p.add_argument(
        "--from",
        dest="from_version",
        metavar="V",
        help="the old version (default: the one before --to; before the first, an empty text)",
    )
    p.add_argument(
        "--to", dest="to_version", metavar="V", help="the new version (default: the current one)"
    )
    p.add_argument(
        "--exit-code",
        action="store_true",
        help="exit 1 when the versions differ, 0 when they are the same (as git diff); "
        "without it 0 either way",
    )
    p.epilog = (
        "Each header names the version's path and id, its time (UTC) and its writer. Coloured "
        "when stdout is a terminal and NO_COLOR is unset. Versions are ids as `memories log` "
        "shows them (memver_…). " + epilog
    )
    _versions_api(p)


def _versions_api(parser: argparse.ArgumentParser) -> None:
    """``--api``, for the commands that show versions: Databricks Agent Memory has none, which
    they say in one line (exit 2) rather than argparse's "unrecognized arguments"."""
    parser.add_argument(
        "--api",
        choices=[MEMORY_STORES, DATABRICKS],
        default=MEMORY_STORES,
        help="the store's API; versions are Memory Stores' only (Databricks keeps none)",
    )
