"""``memfs status MOUNTPOINT [--json]``: what a running mount reports about itself.

Reads the status document the daemon publishes every second (``memfs.mount.status``); it never
talks to the daemon or the server, so it answers even when the mount is stuck. Exit code 1 if
nothing is mounted there (or the daemon publishes no status).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

from memfs.commands.parsing import complete_paths

log = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "status",
        help="show a mount's store, log, change-feed health, and what waits, was refused or "
        "conflicted",
        description="Show what the mount daemon of MOUNTPOINT reports about itself: mount point, "
        "store (name and id), log file, change-feed health, files waiting to be uploaded, "
        "refused or in conflict (by path), requests and caches. Exit 1 if no daemon serves "
        "MOUNTPOINT (or it died: run memfs umount MOUNTPOINT).",
    )
    parser.add_argument("mountpoint", metavar="MOUNTPOINT")
    parser.add_argument("--json", action="store_true", help="print the JSON document")
    complete_paths(parser, directories=("mountpoint",))
    # no extra: it reads a JSON file, so a sync-only install (macOS, Windows) has it too
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from memfs.mount.statedir import MountError, state_path
    from memfs.mount.status_text import render

    mountpoint = os.path.abspath(args.mountpoint)
    try:
        doc = _status_of(mountpoint, state_path)
    except MountError as exc:
        print(f"memfs status: {exc}", file=sys.stderr)
        return 1
    if doc is None:
        print(f"memfs status: no memfs mount or sync reports on {mountpoint}", file=sys.stderr)
        return 1
    if not _running(doc.get("pid")):  # killed: its last status is stale
        print(
            f"memfs status: the daemon of {mountpoint} (pid {doc.get('pid')}) is gone; "
            f"run: memfs umount {mountpoint}",
            file=sys.stderr,
        )
        return 1
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(render(doc))
    return 0


def _status_of(mountpoint: str, state_path: Any) -> dict[str, Any] | None:
    """The status document of the mount on ``mountpoint``; for ``ROOT/<slug>`` of a mount of
    several stores, that store's section (``memfs.mount.status.store_section``)."""
    from memfs.mount.status import store_section

    doc = _read_status(state_path(mountpoint, "status"))
    if doc is not None:
        return doc
    root, slug = os.path.split(mountpoint.rstrip("/"))
    several = _read_status(state_path(root, "status")) if slug else None
    if several is None or "stores" not in several:
        return None
    return store_section(several, slug)


def _read_status(path: Any) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _running(pid: object) -> bool:
    """True while process ``pid`` runs (on Linux a zombie counts as gone)."""
    from memfs.host.portable import process_runs

    return isinstance(pid, int) and process_runs(pid)
