"""``memfs import DIR STORE [--delete] [--dry-run]``: upload a tree of files into a store.

DIR is laid out as ``memfs export`` writes it (``memfs.transfer.layout``): a file per memory,
``.memfs/descriptions.json`` for a Databricks store's descriptions. ``--api databricks --actor
A [--session S]`` imports into an actor's entries. The import plans first (the store listed
once, DIR walked: ``memfs.transfer.import_plan``), then writes a few requests at a time
(``memfs.transfer.import_tree``): creates what is missing, updates what differs (guarded by the
content it listed), leaves what is equal, deletes only with ``--delete``.

Output, one line per path, tab-separated (``ACTION PATH [REASON]``), in path order, then one
summary line; ``--dry-run`` prints the plan (``create``, ``update``, ``skip``, ``delete``,
``refuse``, ``keep``) and changes nothing; a real run prints what it did (``create``,
``update``, ``delete``), what it could not (``fail`` with the reason) and the plan's ``refuse``
and ``keep`` lines, not the unchanged files. Notes (descriptions a store cannot hold) go to
stderr, and a progress line while writing when stderr is a terminal.

Exit codes are those of the admin commands (``memfs.commands.admin_actions``), and 1 when some
file was refused or failed (the others were imported): 0 (everything of DIR is in the store, or
would be), 1 (refused or failed files; other errors), 2 (usage: DIR not a directory, options of
the other API, no key or workspace, the databricks extra missing), 3 (no such store), 5 (key
refused), 6 (server unreachable: the lines before say what was done).

Like every command module, its top imports only the standard library and ``memfs.commands``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from memfs.commands.api_options import (
    DATABRICKS,
    add_api_options,
    add_credential_options,
    api_usage_error,
)
from memfs.commands.extras import refuse_without
from memfs.commands.parsing import complete_paths, swapped_arguments
from memfs.contract.exit_codes import EXIT_ERROR, EXIT_OK, EXIT_USAGE, exit_code_for
from memfs.contract.paths import shown

if TYPE_CHECKING:
    from memfs.contract.store_api import StoreAPI
    from memfs.transfer.import_plan import Plan
    from memfs.transfer.import_tree import Results

log = logging.getLogger(__name__)

UPLOAD_RETRIES = 4  # a mount's background uploads' (memfs.mount.opening)

Opener = Callable[[], AbstractAsyncContextManager["StoreAPI"]]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "import",
        help="upload a directory tree into a store (what memfs export writes)",
        description="Make the memories of STORE those of the files below DIR: create what is "
        "missing, update what differs (never over a change made since the store was listed), "
        "leave what is equal; with --delete, delete the memories DIR lacks. Files that cannot "
        "be memories (not UTF-8, too large, a path the API refuses, a link) are listed with "
        "the reason and the rest is imported. Prints one line per path (ACTION, PATH, reason; "
        "tab-separated) and a summary.",
        epilog="STORE is a store id (memstore_...) or an exact store name. Exit codes: 0 all "
        "imported, 1 some file refused or failed (the rest imported) or another error, 2 usage, "
        "3 not found, 5 auth, 6 server unreachable.",
    )
    parser.add_argument("dir", metavar="DIR", help="the tree to import")
    parser.add_argument("store", metavar="STORE")
    parser.add_argument(
        "--delete", action="store_true", help="delete the memories that DIR does not have"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would be done, the unchanged files too, and change nothing",
    )
    add_credential_options(parser)
    add_api_options(parser, "import into")
    complete_paths(parser, files=("api_key_file",), directories=("dir",))
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from memfs.commands import admin_actions as actions

    usage = swapped_arguments("memfs import", ("DIR", "STORE"), (args.dir, args.store))
    usage = usage or api_usage_error(
        args, "import into", (("--api-key-file", args.api_key_file), ("--base-url", args.base_url))
    )
    if usage is not None:
        return actions.fail(usage, EXIT_USAGE, None)
    if args.api == DATABRICKS:
        refused = refuse_without("memfs import --api databricks", "databricks")
        if refused is not None:
            return refused
        return _import(args, _databricks_opener(args), secret=None)

    config = actions.cli_config(args)
    if isinstance(config, int):
        return config

    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def memory_stores() -> AsyncIterator[StoreAPI]:
        from memfs.api import StoreClient
        from memfs.api.store import MemoryStoresAPI, memory_stores_capabilities

        async with StoreClient(config) as client:
            store = await client.resolve_store(args.store)
            capabilities = await memory_stores_capabilities(client)
            # the uploads retry as a mount's do (a rate limit of the hosted API met by 2,000
            # writes is waited out, not a failed file); finding the store fails fast
            uploads = client.with_options(timeout=60.0, max_retries=UPLOAD_RETRIES)
            yield MemoryStoresAPI(uploads, store.id, capabilities)

    return _import(args, memory_stores, secret=config.api_key.reveal())


def _databricks_opener(args: argparse.Namespace) -> Opener:
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def databricks() -> AsyncIterator[StoreAPI]:
        from memfs.api.databricks import open_store

        async with open_store(args.store, args.actor, args.session, profile=args.profile) as opened:
            yield opened.uploads  # long deadlines: an import is a batch of uploads

    return databricks


def _import(args: argparse.Namespace, open_store: Opener, *, secret: str | None) -> int:
    """Open DIR and the store, plan, print or carry out; failures as one line."""
    import os

    import trio

    from memfs.api.config import ConfigError
    from memfs.commands import admin_actions as actions
    from memfs.contract.errors import ApiConnectionError, ApiError
    from memfs.transfer.import_tree import Results

    try:
        root_fd = os.open(args.dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        return actions.fail(f"{args.dir}: {exc.strerror}", EXIT_USAGE, secret)
    results = Results()
    plan_holder: list[Plan] = []
    try:
        trio.run(_main, args, open_store, root_fd, plan_holder, results)
    except ConfigError as exc:
        return actions.fail(str(exc), EXIT_USAGE, secret)
    except (ApiError, ApiConnectionError) as exc:
        if plan_holder and not args.dry_run:
            _print_results(plan_holder[0], results)  # what was done before the failure
        return actions.fail(actions.describe(exc), exit_code_for(exc), secret)
    except BrokenPipeError:
        return EXIT_ERROR
    finally:
        os.close(root_fd)
    plan = plan_holder[0]
    for note in plan.notes:
        print(f"memfs import: {note}", file=sys.stderr)
    try:
        if args.dry_run:
            _print_plan(plan)
            return EXIT_ERROR if plan.count("refuse") else EXIT_OK
        failed = _print_results(plan, results)
    except BrokenPipeError:
        return EXIT_ERROR
    return EXIT_ERROR if failed or plan.count("refuse") else EXIT_OK


async def _main(
    args: argparse.Namespace,
    open_store: Opener,
    root_fd: int,
    plan_holder: list[Plan],
    results: Results,
) -> None:
    from memfs.commands.progress import CountProgress
    from memfs.transfer.import_tree import carry_out, plan_import

    async with open_store() as store:
        plan = await plan_import(store, root_fd, delete=args.delete)
        plan_holder.append(plan)
        if args.dry_run:
            return
        with CountProgress("memfs import", "written") as progress:
            await carry_out(store, plan, root_fd, results, progress=progress.update)


def _print_plan(plan: Plan) -> None:
    for step in plan.steps:
        _line(step.action, step.path, step.reason)
    counts = {action: plan.count(action) for action in ("create", "update", "delete", "skip")}
    refused, kept = plan.count("refuse"), plan.count("keep")
    print(
        f"memfs import --dry-run: would create {counts['create']}, update {counts['update']}, "
        f"delete {counts['delete']}; {counts['skip']} unchanged, {refused} refused"
        + (f", {kept} kept" if kept else "")
        + "; nothing changed"
    )


def _print_results(plan: Plan, results: Results) -> int:
    """The plan's refusals and what became of each write; returns how many writes failed."""
    outcomes = {outcome.step.path: outcome for outcome in results.sorted()}
    done = {"create": 0, "update": 0, "delete": 0}
    failed = 0
    for step in plan.steps:
        if step.action in ("refuse", "keep"):
            _line(step.action, step.path, step.reason)
            continue
        outcome = outcomes.get(step.path)
        if outcome is None:
            continue  # a skip, or a write not made (the import stopped)
        if outcome.done:
            done[step.action] += 1
            _line(step.action, step.path, "")
        else:
            failed += 1
            _line("fail", step.path, f"{step.action}: {outcome.reason}")
    not_made = results.total - len(results.outcomes)
    print(
        f"memfs import: {done['create']} created, {done['update']} updated, "
        f"{done['delete']} deleted; {plan.count('skip')} unchanged, {plan.count('refuse')} "
        f"refused, {failed} failed"
        + (f", {plan.count('keep')} kept" if plan.count("keep") else "")
        + (f", {not_made} not attempted" if not_made else "")
    )
    return failed


def _line(action: str, path: str, reason: str) -> None:
    fields = [action, shown(path)] + ([shown(reason)] if reason else [])
    print("\t".join(fields))
