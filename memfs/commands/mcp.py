"""``memfs mcp STORE``: the memory tools of one store, served to an agent over MCP on stdio.

The agent's host (Claude Desktop, Claude Code, Cursor...) starts it and speaks MCP on its
stdin and stdout; stderr carries warnings only. The store and its credentials are those of
``memfs mount`` (``--base-url``, ``--api-key-file`` or ``ANTHROPIC_API_KEY``,
``--session-id``, ``--read-only``; ``--api databricks --actor A [--session S]``): fixed by
whoever starts the server, never chosen by the model. The tools are ``memfs.mcp``'s
(docs/mcp.md). ``--print-config`` prints the clients' configurations for the same store and
options instead (``memfs.mcp.client_config``), once the store is found.

Exit codes: 0 (stdin ended), 1 (error), 2 (usage, no key or workspace, the mcp extra
missing), 3 (no such store), 5 (key refused), 6 (server unreachable).

Like every command module, its top imports only the standard library and ``memfs.commands``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Awaitable, Callable
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
from memfs.contract.exit_codes import EXIT_ERROR, EXIT_OK, EXIT_USAGE, exit_code_for

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
    parser.add_argument(
        "--print-config",
        action="store_true",
        help="print ready configurations of Claude Code, Claude Desktop and Cursor for STORE "
        "with these options (stdio; and HTTP where the server is memfs server) and exit; keys "
        "are named by their environment variable, never printed",
    )
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
    if args.print_config:
        return _run(args, _print_config)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING,
        stream=sys.stderr,
        format="memfs mcp: %(levelname)s %(name)s: %(message)s",
    )

    return _run(args, _serve)


async def _serve(args: argparse.Namespace) -> None:
    import trio

    from memfs.mcp.handshake import open_connection
    from memfs.mcp.store_backend import open_databricks, open_memory_stores

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


def _run(args: argparse.Namespace, work: Callable[[argparse.Namespace], Awaitable[None]]) -> int:
    """``work`` under trio; its failures as one line and ``memfs mcp``'s exit codes."""
    import trio

    from memfs.api.config import ConfigError
    from memfs.commands import admin_actions as actions
    from memfs.contract.errors import ApiConnectionError, ApiError
    from memfs.mcp.handshake import HandoverError

    try:
        trio.run(work, args)
    except ConfigError as exc:
        return actions.fail(f"mcp: {exc}", EXIT_USAGE, None)
    except (ApiError, ApiConnectionError) as exc:
        return actions.fail(f"mcp: {actions.describe(exc)}", exit_code_for(exc), None)
    except HandoverError as exc:
        return actions.fail(f"mcp: {exc}", EXIT_ERROR, None)
    return EXIT_OK


async def _print_config(args: argparse.Namespace) -> None:
    """The client configurations of ``memfs.mcp.client_config`` for STORE and these options,
    on stdout: the store is resolved first (its id in every block, an unknown one refused as
    serving it would be), and the server asked whether it serves MCP over HTTP."""
    from memfs.mcp import client_config

    if args.api == DATABRICKS:
        name, launch, http = await _databricks_launch(args)
    else:
        name, launch, http = await _memory_stores_launch(args)
    found = client_config.configurations(client_config.server_name(name), launch, http)
    print(client_config.render(found), end="")


def _memfs_command() -> tuple[str, list[str]]:
    """This memfs as a client starts it: its script beside the running Python (a venv), on
    ``PATH``, else this Python with ``-m memfs``; absolute, as a desktop app has no shell."""
    import shutil
    from pathlib import Path

    beside = Path(sys.executable).parent / "memfs"
    if beside.is_file():
        return str(beside), []
    found = shutil.which("memfs")
    if found is not None:
        return os.path.abspath(found), []
    return sys.executable, ["-m", "memfs"]


async def _memory_stores_launch(args: argparse.Namespace) -> tuple[str, Any, Any]:
    from urllib.parse import quote

    from memfs.api import StoreClient
    from memfs.api.capabilities import server_extensions
    from memfs.api.config import ClientConfig
    from memfs.mcp.client_config import HttpEndpoint, Launch

    config = ClientConfig.from_env(
        api_key_file=args.api_key_file, base_url=args.base_url, session_id=args.session_id
    )
    async with StoreClient(config) as client:
        quick = client.with_options(timeout=10.0, max_retries=2, deadline=30.0)
        store = await quick.resolve_store(args.store)
        memfs_server = bool(await server_extensions(quick))  # only memfs server has any
    base_url = str(config.base_url).rstrip("/")
    command, prefix = _memfs_command()
    options = ["--read-only"] * args.read_only
    if args.session_id:
        options += ["--session-id", args.session_id]
    variable = config.key_variable  # where from_env found the key, not asked again
    if variable is None:
        options += ["--api-key-file", os.path.abspath(args.api_key_file)]
    launch = Launch(
        command, [*prefix, "mcp", store.id, *options], {"ANTHROPIC_BASE_URL": base_url}, variable
    )
    http = None
    if memfs_server:
        query = "?read_only=true" if args.read_only else ""
        http = HttpEndpoint(
            url=f"{base_url}/v1/memory_stores/{quote(store.id, safe='')}/mcp{query}",
            key_variable=variable or "MEMFS_API_KEY",
            bearer=variable == "ANTHROPIC_AUTH_TOKEN",
            headers={"x-memfs-session-id": args.session_id} if args.session_id else {},
            note="" if variable else f"set MEMFS_API_KEY to the key in {args.api_key_file}",
        )
    return store.name, launch, http


async def _databricks_launch(args: argparse.Namespace) -> tuple[str, Any, Any]:
    from urllib.parse import quote, urlencode

    from memfs.api.capabilities import server_offers
    from memfs.api.databricks import open_store
    from memfs.api.databricks.store import SESSION_LESS_SEARCH
    from memfs.mcp.client_config import HttpEndpoint, Launch

    async with open_store(args.store, args.actor, args.session, profile=args.profile) as opened:
        host = opened.base_url.rstrip("/")
        # only memfs server offers its extensions, and the tools over HTTP
        memfs_server = await server_offers(opened.quick.client, SESSION_LESS_SEARCH)
    command, prefix = _memfs_command()
    options = ["--api", DATABRICKS, "--actor", args.actor]
    if args.session:
        options += ["--session", args.session]
    options += ["--read-only"] * args.read_only
    variable: str | None = None
    env: dict[str, str] = {}
    if args.profile:
        options += ["--profile", args.profile]
    elif os.environ.get("DATABRICKS_TOKEN"):
        variable, env = "DATABRICKS_TOKEN", {"DATABRICKS_HOST": host}
    launch = Launch(command, [*prefix, "mcp", args.store, *options], env, variable, DATABRICKS)
    http = None
    if memfs_server:
        scope = {"actor_id": args.actor}
        if args.session:
            scope["session_id"] = args.session
        if args.read_only:
            scope["read_only"] = "true"
        http = HttpEndpoint(
            url=f"{host}/api/2.0/agents/memory-stores/{quote(args.store, safe='')}/mcp?"
            + urlencode(scope),
            key_variable=variable or "MEMFS_API_KEY",
            bearer=True,
            note="" if variable else "set MEMFS_API_KEY to the workspace's token",
        )
    return args.store, launch, http
