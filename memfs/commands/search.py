"""``memfs search STORE QUERY [--limit N] [--json]``: the memories of a store that best match
free text, ranked; ``--api databricks --actor A [--session S] [--profile P]``: the entries of
a Databricks store's actor (session-less ones, or one session's), ranked by ``entries:search``.

Who ranks, in this order: the server, when it offers search (a memfs extension: the reference
server); else a mount of the store by this user (its ``.search/`` file, read as any program
would: its index is warm and its pending writes are searched); else a copy of the store fetched
now and indexed locally (``memfs.search.engine``), which stderr says. The output is the text of
``.search/`` files (``memfs.search.engine.render``: path, relevance, description, best line;
tab-separated, one hit a line, best first), or ``--json``: a list of objects with ``path``,
``relevance`` (``memfs.search.engine.relevance``: 100 for the best), ``score`` (the ranker's
own; read from a mount, the relevance), ``description``, ``memory_id`` (empty when read from a
mount) and ``line``.

Exit codes are those of the admin commands (``memfs.commands.admin_actions``): 0 (searched,
even if nothing matched: the output is empty), 1 (other error), 2 (usage: a query without a
word, options of the other API, no key or workspace; the databricks extra missing), 3 (no
such store), 5 (key refused), 6 (server unreachable).

Like every command module, its top imports only the standard library and ``memfs.commands``;
what searching needs is imported when it runs.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from memfs.commands.api_options import (
    DATABRICKS,
    add_api_options,
    add_credential_options,
    api_usage_error,
)
from memfs.commands.extras import refuse_without
from memfs.commands.parsing import complete_paths
from memfs.contract.exit_codes import EXIT_ERROR, EXIT_OK, EXIT_USAGE, exit_code_for

if TYPE_CHECKING:
    from memfs.contract.store_api import StoreAPI
    from memfs.search.engine import Hit

log = logging.getLogger(__name__)

MAX_LIMIT = 100  # the server's, and the local index's


def _limit(text: str) -> int:
    """An argparse type: a whole number from 1 to ``MAX_LIMIT``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"want a whole number, got {text!r}") from None
    if not 1 <= value <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"must be from 1 to {MAX_LIMIT}, got {value}")
    return value


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "search",
        help="find the memories of a store that best match some words, ranked",
        description="Print the memories of STORE that best match QUERY, best first, one a "
        "line: path, relevance, description, and the line that matches best, separated by tabs "
        "(cut -f1 lists the paths). Every word of QUERY counts (any of them may match). The "
        "server ranks them if it can; else a mount of STORE does (its .search/ directory); "
        "else a copy of STORE is fetched and searched here, which stderr says.",
        epilog="Relevance: 100 for the best match, every other one its score as a percentage "
        "of the best's (50: half the best's score), from 1 to 100; it compares the results of "
        "one search, not two searches (the best of any search is 100). 0 throughout: the "
        "ranker gave no scores. --json gives it as relevance, beside score, the ranker's own "
        "(BM25 or rank fusion: its scale varies). .search/ files in a mount show the same "
        "relevance. STORE is a store id (memstore_...) or an exact store name. Exit codes: 0 "
        "searched (no output: nothing matched), 1 error, 2 usage, 3 not found, 5 auth, 6 "
        "server unreachable.",
    )
    parser.add_argument("store", metavar="STORE")
    parser.add_argument("query", metavar="QUERY", help="the words to look for")
    parser.add_argument(
        "-n", "--limit", type=_limit, default=10, metavar="N", help="at most N results (1-100)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    add_credential_options(parser)
    add_api_options(parser, "search")
    complete_paths(parser, files=("api_key_file",))
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    from memfs.api import StoreClient
    from memfs.commands import admin_actions as actions
    from memfs.contract.search_words import query_terms

    if not query_terms(args.query):
        return actions.fail("the query has no word to look for", EXIT_USAGE, None)
    usage = _api_usage_error(args)
    if usage is not None:
        return actions.fail(usage, EXIT_USAGE, None)
    if args.api == DATABRICKS:
        return _run_databricks(args)
    config = actions.cli_config(args)
    if isinstance(config, int):
        return config
    secret = config.api_key.reveal()

    async def main() -> list[Hit]:
        from memfs.api.store import MemoryStoresAPI

        async with StoreClient(config) as client:
            store = await client.resolve_store(args.store)
            return await search_store(MemoryStoresAPI(client, store.id), args.query, args.limit)

    return _search_and_print(main, as_json=args.json, secret=secret)


def _api_usage_error(args: argparse.Namespace) -> str | None:
    """The options that do not go with ``--api`` (one line), or None."""
    return api_usage_error(
        args, "search", (("--api-key-file", args.api_key_file), ("--base-url", args.base_url))
    )


def _run_databricks(args: argparse.Namespace) -> int:
    """``entries:search`` of the actor (and session) of a Databricks store."""

    refused = refuse_without("memfs search --api databricks", "databricks")
    if refused is not None:
        return refused
    from memfs.api.databricks import open_store
    from memfs.search.engine import StoreSearch

    async def main() -> list[Hit]:
        async with open_store(args.store, args.actor, args.session, profile=args.profile) as opened:
            return await StoreSearch(opened.quick).search(args.query, limit=args.limit)

    return _search_and_print(main, as_json=args.json, secret=None)


def _search_and_print(
    main: Callable[[], Awaitable[list[Hit]]], *, as_json: bool, secret: str | None
) -> int:
    """Run ``main`` and print its hits; a failure is one line (``secret`` redacted) with the
    admin commands' exit code."""
    import trio

    from memfs.api.config import ConfigError
    from memfs.commands import admin_actions as actions
    from memfs.contract.errors import ApiConnectionError, ApiError

    try:
        hits = trio.run(main)
    except ConfigError as exc:  # no workspace or credentials (Databricks)
        return actions.fail(str(exc), EXIT_USAGE, secret)
    except (ApiError, ApiConnectionError) as exc:
        return actions.fail(actions.describe(exc), exit_code_for(exc), secret)
    try:
        _print(hits, as_json=as_json)
    except BrokenPipeError:
        return EXIT_ERROR
    return EXIT_OK


async def search_store(store: StoreAPI, query: str, limit: int) -> list[Hit]:
    """By the server, else a mount's ``.search/`` file, else a copy fetched now."""
    import sys

    import trio

    from memfs.search.engine import DEFAULT_LIMIT, LocalSearch, StoreSearch

    if await store.offers_search():
        return await StoreSearch(store).search(query, limit=limit)
    if limit <= DEFAULT_LIMIT:  # a .search/ file holds that many
        for mountpoint in await trio.to_thread.run_sync(_mounts_of, store.store_id):
            hits = await trio.to_thread.run_sync(_read_mount, mountpoint, query)
            if hits is not None:
                print(
                    f"memfs search: the server has no search; searched by the mount at "
                    f"{mountpoint}",
                    file=sys.stderr,
                )
                return hits[:limit]
    local = LocalSearch(store)
    hits = await local.search(query, limit=limit)
    print(
        f"memfs search: the server has no search; fetched the store ({len(local.index)} "
        "memories) and searched it here",
        file=sys.stderr,
    )
    return hits


def _mounts_of(store_id: str) -> list[str]:
    from memfs.mount.statedir import mounts_of

    return mounts_of(store_id)


def _read_mount(mountpoint: str, query: str) -> list[Hit] | None:
    """The hits of ``MOUNTPOINT/.search/<query>``, or None if the mount cannot answer it (a
    query that is no file name, a mount that fails)."""
    import os

    from memfs.search.engine import parse
    from memfs.search.tree import SEARCH_NAME

    if "/" in query or "\0" in query or query in (".", ".."):
        return None
    try:
        with open(os.path.join(mountpoint, SEARCH_NAME, query), encoding="utf-8") as results:
            return parse(results.read())
    except (OSError, ValueError) as exc:
        log.debug("the mount at %s did not answer: %s", mountpoint, exc)
        return None


def _print(hits: list[Hit], *, as_json: bool) -> None:
    import json
    import sys

    from memfs.search.engine import relevance, render

    if as_json:
        shown = relevance(hits)
        rows = [{**hit.to_json(), "relevance": r} for hit, r in zip(hits, shown, strict=True)]
        print(json.dumps(rows, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(render(hits))
        sys.stdout.flush()
