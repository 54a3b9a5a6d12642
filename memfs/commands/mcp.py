"""``memfs mcp STORE``: the memory tools of one store, served to an agent over MCP on stdio.

The agent's host (Claude Desktop, Claude Code, Cursor...) starts it and speaks MCP on its
stdin and stdout; stderr carries warnings only. The store and its credentials are those of
``memfs mount`` (``--base-url``, ``--api-key-file`` or ``ANTHROPIC_API_KEY``,
``--session-id``, ``--read-only``; ``--api databricks --actor A [--session S]``): fixed by
whoever starts the server, never chosen by the model. The tools are ``memfs.mcp``'s
(docs/mcp.md).

Exit codes: 0 (stdin ended), 1 (error), 2 (usage, no key or workspace, the mcp extra
missing), 3 (no such store), 5 (key refused), 6 (server unreachable).

Like every command module, its top imports only the standard library and ``memfs.commands``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from functools import partial
from typing import Any

from memfs.commands.api_options import (
    DATABRICKS,
    add_api_options,
    add_credential_options,
    api_usage_error,
)
from memfs.commands.extras import refuse_without
from memfs.commands.parsing import complete_paths

log = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "mcp",
        help="serve a memory store's tools to an agent over MCP (stdio)",
        description="Serve the memory tool (view, create, str_replace, insert, delete, rename "
        "under /memories), search, and history and restore (Memory Stores) or the Databricks "
        "memory tools, of STORE, over MCP on stdin and stdout. Every edit is made over the "
        "content it read: a concurrent change is never overwritten.",
        epilog="STORE is a store id (memstore_...) or an exact store name; with --api "
        "databricks, the store's id. Exit codes: 0 stdin ended, 1 error, 2 usage, 3 not "
        "found, 5 auth, 6 server unreachable. See docs/mcp.md for client configurations.",
    )
    parser.add_argument("store", metavar="STORE")
    parser.add_argument(
        "--read-only", action="store_true", help="offer no tool that writes; writes refused"
    )
    add_credential_options(parser)
    parser.add_argument("--session-id", metavar="S", help="attribute writes to session S")
    parser.add_argument("--debug", action="store_true", help="log requests on stderr")
    add_api_options(parser, "serve")
    complete_paths(parser, files=("api_key_file",))
    parser.set_defaults(func=run)


def usage_error(args: argparse.Namespace) -> str | None:
    """The options that do not go with ``--api`` (one line), or None."""
    return api_usage_error(
        args,
        "serve",
        (
            ("--api-key-file", args.api_key_file),
            ("--base-url", args.base_url),
            ("--session-id", args.session_id),
        ),
    )


def run(args: argparse.Namespace) -> int:
    usage = usage_error(args)
    if usage is not None:
        print(f"memfs mcp: {usage}", file=sys.stderr)
        return 2
    for extra in ("mcp", DATABRICKS) if args.api == DATABRICKS else ("mcp",):
        refused = refuse_without(f"memfs mcp{' --api databricks' * (extra == DATABRICKS)}", extra)
        if refused is not None:
            return refused
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING,
        stream=sys.stderr,
        format="memfs mcp: %(levelname)s %(name)s: %(message)s",
    )

    import trio

    from memfs.api.config import ConfigError
    from memfs.commands import admin_actions as actions
    from memfs.contract.errors import ApiConnectionError, ApiError
    from memfs.mcp.handshake import HandoverError, open_connection
    from memfs.mcp.store_backend import open_databricks, open_memory_stores

    async def main() -> None:
        if args.api == DATABRICKS:
            opened = open_databricks(
                args.store, args.actor, args.session, read_only=args.read_only, profile=args.profile
            )
        else:
            opened = open_memory_stores(
                args.store,
                read_only=args.read_only,
                api_key_file=args.api_key_file,
                base_url=args.base_url,
                session_id=args.session_id,
            )
        async with opened as backend:
            feed = backend if await backend.offers_changes() else None
            # initialize answered before the SDK's import, most of the start-up
            # (docs/benchmarks.md "MCP server"): the client's host waits for nothing else
            opening = await trio.to_thread.run_sync(
                partial(open_connection, backend.info, subscriptions=feed is not None),
                abandon_on_cancel=True,
            )
            # Then the SDK, once the store is open (an unknown store or a refused key is
            # reported without it), in this thread: the client's next messages wait in the
            # pipe (in a thread beside the opening, under the GIL, it cost 1.12x the CPU).
            from memfs.mcp.app import serve_stdio

            await serve_stdio(backend, feed, opening)

    try:
        trio.run(main)
    except ConfigError as exc:
        return actions.fail(f"mcp: {exc}", actions.EXIT_USAGE, None)
    except (ApiError, ApiConnectionError) as exc:
        return actions.fail(f"mcp: {actions.describe(exc)}", actions.exit_code(exc), None)
    except HandoverError as exc:
        return actions.fail(f"mcp: {exc}", actions.EXIT_ERROR, None)
    return actions.EXIT_OK
