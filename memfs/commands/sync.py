"""``memfs sync STORE DIR``: a local directory kept in step with a store, both ways, live, with
no FUSE and no root (macOS, Windows, containers without ``/dev/fuse``); ``memfs sync --stop
DIR`` ends a detached one.

It runs in the foreground (a status line on a terminal) until SIGINT or SIGTERM, which upload
what is pending and exit; ``--once`` reconciles both ways, uploads, and exits; ``--detach``
re-executes itself in the background with its output to a log file and returns once DIR is in
step (readiness through a pipe, as ``memfs mount``). ``memfs status DIR`` reads the status it
publishes. The engine is ``memfs.sync``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from memfs.commands.api_options import (
    DATABRICKS,
    add_api_options,
    add_credential_options,
    api_usage_error,
)
from memfs.commands.extras import needs_extra, refuse_without
from memfs.commands.parsing import (
    RawDescriptionDefaultsHelpFormatter,
    complete_paths,
    swapped_arguments,
)

READY_TIMEOUT = 600.0  # a first copy of a large store over a slow link may take minutes
STOP_TIMEOUT = 45.0

SYNC_EPILOG = """exit status (the same for every memfs command: README, "Exit codes"):
  0  in step (--once), or stopped with everything uploaded
  1  stopped or done with something not uploaded as meant (the report names it and where its
     text is kept: refused files stay in DIR, conflict copies are in the store), or DIR or
     the log file could not be used
  2  a usage error, a missing extra, no API key
  3  no such store   5  the key was refused   6  the server could not be reached
"""


def register(subparsers: Any) -> None:
    sync = subparsers.add_parser(
        "sync",
        help="keep a local directory in step with a store, both ways (no FUSE needed)",
        description="Keep DIR and a memory store in step, both ways, live: remote changes are "
        "written into DIR within a second (the change feed), local changes are uploaded when a "
        "file settles (file events), each with the precondition of the version it was based "
        "on. A file changed on both sides keeps the store's version and the local text is "
        "saved as a conflict copy. Runs as an ordinary user, with no FUSE: where `memfs "
        "mount` cannot (macOS, Windows, containers without /dev/fuse).",
        epilog=SYNC_EPILOG,
        formatter_class=RawDescriptionDefaultsHelpFormatter,
    )
    sync.add_argument("store", metavar="STORE", nargs="?", help="memory store id or exact name")
    sync.add_argument("directory", metavar="DIR", help="the local directory (made if missing)")
    sync.add_argument(
        "--read-only",
        action="store_true",
        help="never upload: files are written without write permission, and a local change is "
        "undone (its text kept outside DIR and reported)",
    )
    sync.add_argument(
        "--once", action="store_true", help="reconcile both ways, upload, then exit (cron, CI)"
    )
    sync.add_argument(
        "--detach",
        action="store_true",
        help="run in the background once DIR is in step; stop it with memfs sync --stop DIR",
    )
    sync.add_argument(
        "--stop",
        action="store_true",
        help="stop the sync of DIR (it uploads what is pending first) and print its report",
    )
    sync.add_argument(
        "--watch",
        choices=["events", "poll"],
        default="events",
        help="how local changes are seen: the platform's file events, or polling (network "
        "file systems)",
    )
    sync.add_argument(
        "--change-feed",
        choices=["auto", "poll"],
        default="auto",
        help="auto: the server's change stream when offered, else polling; poll: polling only",
    )
    sync.add_argument(
        "--poll-interval",
        type=float,
        default=1.0,
        metavar="S",
        help="change feed: seconds between polls (without a change stream)",
    )
    sync.add_argument(
        "--rescan-interval",
        type=float,
        default=60.0,
        metavar="S",
        help="a full comparison of DIR this often, as a safety net (stat only where unchanged)",
    )
    add_credential_options(sync)
    sync.add_argument("--session-id", metavar="S", help="attribute writes to session S")
    add_api_options(sync, "sync")
    sync.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="journal and sync state (default: $XDG_CACHE_HOME/memfs or ~/.cache/memfs)",
    )
    sync.add_argument(
        "--log-file",
        metavar="FILE",
        help="log here (--detach: by default the per-user state directory)",
    )
    sync.add_argument("--debug", action="store_true", help="verbose log")
    sync.add_argument(
        "--json", action="store_true", help="--once, --stop: print the report as JSON"
    )
    sync.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)
    complete_paths(sync, files=("api_key_file", "log_file"), directories=("directory", "cache_dir"))
    sync.set_defaults(func=needs_extra("sync", "memfs sync", run_sync_command))


def run_sync_command(args: argparse.Namespace) -> int:
    directory = Path(os.path.abspath(args.directory))
    if os.name == "nt" and (args.stop or args.detach):
        # no way yet to start a child with a readiness pipe (pass_fds), nor to ask one to end
        # with its uploads (os.kill ends a Windows process at once): Ctrl+C in its console does
        print(
            "memfs sync: --detach and --stop are not available on Windows: run memfs sync in "
            "its own console window and stop it with Ctrl+C",
            file=sys.stderr,
        )
        return 2
    if args.stop:
        return stop_sync(directory, as_json=args.json)
    if not args.store:
        print("memfs sync: STORE is required (memfs sync STORE DIR)", file=sys.stderr)
        return 2
    given = (args.store, args.directory)
    usage = swapped_arguments("memfs sync", ("STORE", "DIR"), given, made=True)
    usage = usage or api_usage_error(
        args,
        "sync",
        (
            ("--api-key-file", args.api_key_file),
            ("--base-url", args.base_url),
            ("--session-id", args.session_id),
        ),
    )
    if usage is None and args.once and args.detach:
        usage = "--once and --detach do not go together"
    if usage is not None:
        print(f"memfs sync: {usage}", file=sys.stderr)
        return 2
    if args.api == DATABRICKS:
        refused = refuse_without("memfs sync --api databricks", "databricks")
        if refused is not None:
            return refused
    if args.detach:
        return _detach(args, directory)
    return _run(args, directory)


def _run(args: argparse.Namespace, directory: Path) -> int:
    from memfs.commands.background import readiness, setup_logging
    from memfs.host.private import NotPrivateError
    from memfs.mount.options import StoreSpec
    from memfs.sync.runner import SyncOptions, run_sync

    try:
        setup_logging(args.debug, args.log_file)
    except NotPrivateError as exc:
        print(f"memfs sync: {exc}", file=sys.stderr)
        return 1
    spec = StoreSpec(
        slug="",
        store=args.store,
        read_only=args.read_only,
        api=args.api,
        api_key_file=args.api_key_file,
        base_url=args.base_url,
        session_id=args.session_id,
        actor=args.actor,
        dbx_session=args.session,
        profile=args.profile,
    )
    options = SyncOptions(
        spec=spec,
        directory=directory,
        once=args.once,
        polling=args.watch == "poll",
        change_stream=args.change_feed == "auto",
        poll_interval=args.poll_interval,
        rescan_interval=max(1.0, args.rescan_interval),
        cache_dir=os.path.abspath(args.cache_dir) if args.cache_dir else None,
        live_status=args.ready_fd is None and sys.stderr.isatty() and not args.log_file,
    )
    status, report = run_sync(options, readiness(args.ready_fd, "memfs sync"))
    if report is not None and (args.once or status != 0):
        _print_report(report, as_json=args.json)
    return status


def _detach(args: argparse.Namespace, directory: Path) -> int:
    from memfs.commands.background import start_in_background, store_arguments
    from memfs.host.private import NotPrivateError, create_private_file
    from memfs.mount.statedir import MountError, state_path

    try:
        log_file = args.log_file or str(state_path(str(directory), "log"))
        create_private_file(Path(log_file), "log file")
    except (MountError, NotPrivateError) as exc:
        print(f"memfs sync: {exc}", file=sys.stderr)
        return 1
    argv = [sys.executable, "-m", "memfs", "sync", args.store, str(directory)]
    argv += ["--log-file", log_file]
    argv += ["--watch", args.watch, "--change-feed", args.change_feed, "--api", args.api]
    argv += ["--poll-interval", str(args.poll_interval)]
    argv += ["--rescan-interval", str(args.rescan_interval)]
    argv += store_arguments(args, os.path.abspath(args.cache_dir) if args.cache_dir else None)
    failed = start_in_background(
        "memfs sync", argv, args.base_url, timeout=READY_TIMEOUT, log_file=log_file, what="the sync"
    )
    if failed:
        return failed
    print(f"memfs sync: {directory} is in step; stop it with: memfs sync --stop {directory}")
    return 0


def stop_sync(directory: Path, *, as_json: bool = False) -> int:
    """Signal the sync of ``directory`` (SIGTERM: a last pass, the uploads, the report), wait
    for it to exit, print its report."""
    from memfs.mount.statedir import MountError, state_path
    from memfs.sync.pidfile import process_runs, sync_pid

    try:
        pid_file = state_path(str(directory), "pid")
        report_file = state_path(str(directory), "report.json")
    except MountError as exc:
        print(f"memfs sync: {exc}", file=sys.stderr)
        return 2
    pid = sync_pid(pid_file)
    if pid is None:
        print(f"memfs sync: no memfs sync keeps {directory} in step", file=sys.stderr)
        return 2
    report_file.unlink(missing_ok=True)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    while time.monotonic() < deadline and process_runs(pid):
        time.sleep(0.05)
    if process_runs(pid):
        print(
            f"memfs sync: the sync (pid {pid}) did not end within {STOP_TIMEOUT:.0f} s",
            file=sys.stderr,
        )
        return 1
    try:
        report = json.loads(report_file.read_text())
    except (OSError, ValueError):
        print("memfs sync: stopped; it left no report (see its log)", file=sys.stderr)
        return 1
    _print_report(report, as_json=as_json)
    from memfs.sync.runner import sync_report_problems

    return 1 if sync_report_problems(report) else 0


def _print_report(report: dict[str, Any], *, as_json: bool) -> None:
    from memfs.mount.report import render_report

    if as_json:
        print(json.dumps(report, indent=2))
        return
    stats = report.get("sync") or {}
    print(
        f"memfs sync: {stats.get('uploads', 0)} uploaded, {stats.get('downloads', 0)} "
        f"written into DIR, {stats.get('conflicts', 0)} conflicts"
    )
    text = render_report(report).rstrip()
    if text:
        print(text)
    for path, why in sorted((stats.get("not_synced") or {}).items()):
        from memfs.contract.paths import shown

        print(shown(f"  stays local: {path}: {why}"))
