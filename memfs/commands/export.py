"""``memfs export STORE DIR [--git]``: a store's memories as files under DIR; with ``--git``, its
versions as a git repository of one commit per version (``memfs.transfer.export`` and
``export_history``; the tree format is ``memfs.transfer.layout``'s, docs/export-import.md the
user's guide).

Owns the command line, the progress line (``commands.progress.PhaseProgress``: stderr, only on
a terminal) and the output: one
summary line on stdout (memories, versions, commits, files, what was skipped), then one line on
stderr per thing a person must know (a path not exported and why, a file left in DIR, a version
redacted after it was exported); ``--json``: all of it as one JSON object on stdout. Exit codes
are the admin commands' (0 ok, 1 error or a file that could not be written, 2 usage, 3 no such
store, 5 auth, 6 server unreachable).

Like every command module, its top imports only the standard library and ``memfs.commands``;
what exporting needs is imported when it runs.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections import Counter
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

if TYPE_CHECKING:
    from memfs.commands.progress import PhaseProgress
    from memfs.transfer.export import ExportReport

log = logging.getLogger(__name__)

MAX_DETAIL_LINES = 20  # lines of details on stderr; the rest is counted


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "export",
        help="write a store's memories as files under DIR (--git: its history as commits)",
        description="Write the memories of STORE as files under DIR (the memory /a/b.md is "
        "DIR/a/b.md), with memfs's own files in DIR/.memfs/. Run again, DIR follows the store: "
        "files of memories gone since are removed (only files the last export wrote, unchanged "
        "since). With --git, DIR is a git repository with one commit per version of the store, "
        "oldest first (author: the session or API key that wrote it; date: when), and a run "
        "adds only the versions made since the last one.",
        epilog="STORE is a store id (memstore_...) or an exact store name; with --api "
        "databricks, a store id. Exit codes: 0 ok, 1 error or a file not written, 2 usage, "
        "3 not found, 5 auth, 6 server unreachable.",
    )
    parser.add_argument("store", metavar="STORE")
    parser.add_argument("dir", metavar="DIR", help="the directory to write (created if missing)")
    parser.add_argument(
        "--git",
        action="store_true",
        help="make DIR a git repository holding the store's versions as commits (Databricks, "
        "which keeps no versions: one commit per run, of what changed)",
    )
    parser.add_argument(
        "--find-redacted",
        action="store_true",
        help="--git: also list every version (without contents, 100 a request) to report all "
        "those redacted on the server since they were exported, whose content the git history "
        "still holds (by default only those among the versions made since the last export)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the report as JSON (for scripts) on stdout"
    )
    add_credential_options(parser)
    add_api_options(parser, "export")
    complete_paths(parser, files=("api_key_file",), directories=("dir",))
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from memfs.commands import admin_actions as actions

    usage = swapped_arguments("memfs export", ("STORE", "DIR"), (args.store, args.dir), made=True)
    usage = usage or api_usage_error(
        args, "export", (("--api-key-file", args.api_key_file), ("--base-url", args.base_url))
    )
    if usage is None and args.find_redacted and (not args.git or args.api == DATABRICKS):
        usage = "--find-redacted goes with --git on a Memory Stores store (its versions)"
    if usage is not None:
        return actions.fail(usage, EXIT_USAGE, None)
    root = Path(args.dir)
    from memfs.commands.progress import PhaseProgress

    progress = PhaseProgress("memfs export")
    if args.api == DATABRICKS:
        refused = refuse_without("memfs export --api databricks", "databricks")
        if refused is not None:
            return refused
        return _finish(lambda: _export_databricks(args, root, progress), progress, None, args.json)

    config = actions.cli_config(args)
    if isinstance(config, int):
        return config
    return _finish(
        lambda: _export_memory_stores(config, args, root, progress),
        progress,
        config.api_key.reveal(),
        args.json,
    )


async def _export_memory_stores(
    config: Any, args: argparse.Namespace, root: Any, progress: PhaseProgress
) -> ExportReport:
    from memfs.api import StoreClient
    from memfs.api.store import MemoryStoresAPI
    from memfs.transfer.export import export_memories
    from memfs.transfer.export_history import export_history, store_info

    async with StoreClient(config) as client:
        store = await client.resolve_store(args.store)
        if args.git:
            return await export_history(
                client, store, root, progress=progress.update, find_redacted=args.find_redacted
            )
        api = MemoryStoresAPI(client, store.id)
        return await export_memories(api, store_info(store), root, progress=progress.update)


async def _export_databricks(
    args: argparse.Namespace, root: Any, progress: PhaseProgress
) -> ExportReport:
    from memfs.api.databricks import open_store
    from memfs.transfer.export import export_memories
    from memfs.transfer.layout import API_DATABRICKS, StoreInfo

    async with open_store(args.store, args.actor, args.session, profile=args.profile) as opened:
        info = StoreInfo(
            API_DATABRICKS,
            args.store,
            name=args.store,
            description=opened.description,
            actor_id=args.actor,
            session_id=args.session,
        )
        return await export_memories(
            opened.quick, info, root, progress=progress.update, snapshot=args.git
        )


def _finish(main: Any, progress: PhaseProgress, secret: str | None, as_json: bool) -> int:
    """Run ``main`` under trio; print its report, or its failure as one line."""
    import trio

    from memfs.api.config import ConfigError
    from memfs.commands import admin_actions as actions
    from memfs.contract.errors import ApiConnectionError, ApiError
    from memfs.transfer.export_git import GitError

    try:
        with progress:
            report = trio.run(main)
    except ConfigError as exc:
        return actions.fail(str(exc), EXIT_USAGE, secret)
    except (ApiError, ApiConnectionError) as exc:
        return actions.fail(actions.describe(exc), exit_code_for(exc), secret)
    except GitError as exc:
        return actions.fail(str(exc), EXIT_ERROR, secret)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        return actions.fail(f"cannot write the export: {exc.strerror or exc}{where}", 1, secret)
    try:
        if as_json:
            print(json.dumps(report_json(report), indent=2, ensure_ascii=False))
        else:
            print(summary(report))
            for line in details(report):
                print(f"memfs export: {line}", file=sys.stderr)
    except BrokenPipeError:
        return EXIT_ERROR
    return EXIT_ERROR if report.tree.refused else EXIT_OK


def summary(report: ExportReport) -> str:
    """The one summary line."""
    parts = [f"{report.memories} memories"]
    if report.snapshot:
        parts.append("1 commit" if report.commits else "nothing new to commit")
    elif report.commits or report.versions:
        parts.append(f"{report.versions} new versions, {report.commits} commits")
    tree = report.tree
    parts.append(f"{tree.written} files written, {tree.removed} removed")
    skipped = Counter(reason for _, reason in dict(report.skipped).items())
    if skipped:
        reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.items()))
        parts.append(f"skipped {sum(skipped.values())} ({reasons})")
    if tree.refused:
        parts.append(f"{len(tree.refused)} not written")
    if tree.kept:
        parts.append(f"{len(tree.kept)} old files kept")
    if tree.ignored:
        parts.append(f"{len(tree.ignored)} entries of .memfs ignored")
    return "memfs export: " + "; ".join(parts)


def report_json(report: ExportReport) -> dict[str, Any]:
    """The whole report, for ``--json``."""
    tree = report.tree
    return {
        "memories": report.memories,
        "versions": report.versions,
        "commits": report.commits,
        "listing_requests": report.requests,
        "files_written": tree.written,
        "files_removed": tree.removed,
        "skipped": [{"path": p, "reason": r} for p, r in dict(report.skipped).items()],
        "not_written": [{"path": p, "reason": r} for p, r in tree.refused],
        "kept": [{"path": p, "reason": r} for p, r in tree.kept],
        "ignored": [{"record": f, "path": p, "reason": r} for f, p, r in tree.ignored],
        "redacted_in_history": report.redacted_in_history,
        "history_starts": report.history_starts,
        "memories_begun_before_history": report.begun_before_history,
    }


def details(report: ExportReport) -> list[str]:
    """One line per thing a person must know, at most ``MAX_DETAIL_LINES`` and a count."""
    lines = [f"not exported: {path!r}: {reason}" for path, reason in dict(report.skipped).items()]
    lines += [f"not written: {path}: {reason}" for path, reason in report.tree.refused]
    lines += [f"kept {path}: {reason}" for path, reason in report.tree.kept]
    lines += [f"{record} ignored {path!r}: {why}" for record, path, why in report.tree.ignored]
    if report.begun_before_history:
        lines.append(
            f"history starts at {report.history_starts}: the earlier versions of "
            f"{report.begun_before_history} memories were no longer kept by the server"
        )
    if report.redacted_in_history:
        lines.append(
            f"{len(report.redacted_in_history)} version(s) redacted on the server after they "
            f"were exported keep their content in the git history (e.g. "
            f"{report.redacted_in_history[0]}): see docs/export-import.md to rewrite it"
        )
    if len(lines) > MAX_DETAIL_LINES:
        rest = len(lines) - MAX_DETAIL_LINES + 1
        lines = [*lines[: MAX_DETAIL_LINES - 1], f"... and {rest} more"]
    return lines
