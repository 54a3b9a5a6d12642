"""``memfs status [PATH] [--json]``: what running mounts, sessions and syncs report about
themselves.

With PATH (a mount point, a synced directory, or any path inside one), that one; without, every
mount, session and sync of this user on the machine (the status files in the per-user state
directory, ``memfs.mount.statedir``, whose daemon runs). The figures are asked of the daemon on
its status socket, so they are current; a daemon that does not answer within two seconds (a stuck
mount) is read from the status file it last wrote (``memfs.mount.statedir.fresh_status``). It never
talks to the server. Exit code 1 if nothing is mounted at PATH (or the daemon publishes no
status).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from memfs.commands.parsing import complete_paths

log = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "status",
        help="show every mount, session and sync, or one's store, log, change-feed health, and "
        "what waits, was refused or conflicted",
        description="Without PATH: one line for every mount, session and sync of this user on "
        "this machine. With PATH (a mount point, a synced directory, or a path inside one): what "
        "its daemon reports about itself, as of now: mount point, store (name and id), log file, "
        "change-feed health, files waiting to be uploaded, refused or in conflict (by path), "
        "requests and caches. Exit 1 if no daemon serves PATH (or it died: run memfs umount "
        "MOUNTPOINT).",
    )
    parser.add_argument("mountpoint", metavar="PATH", nargs="?")
    parser.add_argument("--json", action="store_true", help="print the JSON document(s)")
    complete_paths(parser, directories=("mountpoint",))
    # no extra: it reads a JSON file, so a sync-only install (macOS, Windows) has it too
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from memfs.mount.statedir import MountError
    from memfs.mount.status_text import render, render_list

    if args.mountpoint is None:
        try:
            entries = running()
        except MountError as exc:
            print(f"memfs status: {exc}", file=sys.stderr)
            return 1
        if args.json:
            listed = [doc | {"kind": kind, "session_id": sid} for kind, doc, sid in entries]
            print(json.dumps(listed, indent=2))
        else:
            print(render_list(entries))
        return 0
    mountpoint = os.path.abspath(args.mountpoint)
    try:
        doc = _status_of(mountpoint)
    except MountError as exc:
        print(f"memfs status: {exc}", file=sys.stderr)
        return 1
    if doc is None:
        print(f"memfs status: no memfs mount or sync reports on {mountpoint}", file=sys.stderr)
        return 1
    if not _running(doc.get("pid")):  # killed: its last status is stale
        where = doc.get("mountpoint") or mountpoint
        print(
            f"memfs status: the daemon of {where} (pid {doc.get('pid')}) is gone; "
            f"run: memfs umount {where}",
            file=sys.stderr,
        )
        return 1
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(render(doc))
    return 0


def running() -> list[tuple[str, dict[str, Any], str | None]]:
    """Every mount, session and sync of this user whose daemon runs: its kind (``mount``,
    ``session``, ``sync``), its status document as of now and, for a session, its id."""
    from memfs.mount.statedir import fresh_status, runtime_dir
    from memfs.session.state import SessionState
    from memfs.session.state import state_path as session_state

    entries = []
    for status_file in sorted(runtime_dir().glob("*.status")):
        doc = fresh_status(status_file)
        if doc is None or not _running(doc.get("pid")):
            continue
        session_id = None
        kind = "sync" if doc.get("sync") else "mount"
        if "stores" in doc and isinstance(doc.get("mountpoint"), str):
            state = SessionState.read(session_state(Path(doc["mountpoint"])))
            if state is not None and state.pid == doc.get("pid"):
                kind, session_id = "session", state.session_id
        entries.append((kind, doc, session_id))
    return sorted(entries, key=lambda entry: str(entry[1].get("mountpoint")))


def _status_of(path: str) -> dict[str, Any] | None:
    """The status document of the mount or sync on ``path`` or holding it; inside a mount of
    several stores, the section of the store it is in (``memfs.mount.status.store_section``)."""
    from memfs.mount.statedir import fresh_status, state_path
    from memfs.mount.status import store_section

    here = Path(path)
    for candidate in (here, *here.parents):
        status_file = state_path(str(candidate), "status")
        if not status_file.exists():
            continue
        doc = fresh_status(status_file)
        if doc is None:
            return None
        inside = here.relative_to(candidate).parts
        if "stores" not in doc or not inside:
            return doc
        return store_section(doc, inside[0])
    return None


def _running(pid: object) -> bool:
    """True while process ``pid`` runs (on Linux a zombie counts as gone)."""
    from memfs.host.portable import process_runs

    return isinstance(pid, int) and process_runs(pid)
