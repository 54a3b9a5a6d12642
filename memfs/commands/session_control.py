"""``memfs session stop`` and ``memfs session status``: a running session, seen and stopped
from another process (``memfs umount ROOT`` stops one the same way).

A session is found by its state file (``memfs.session.state.state_path``), which names its
process and its stores; its health comes from the status document its daemon publishes
(``memfs.mount.status``). The state file names a pid to signal and a root to unmount and
remove, so one another user could have planted is refused (``memfs.host.private``), never used.
Nothing here imports the daemon except to clean up after a session that died.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memfs.host.private import NotPrivateError, check_private_file, private_dir

if TYPE_CHECKING:
    from memfs.session.state import SessionState

EXIT_OK = 0
EXIT_FAILED = 1  # a stop failed, or changes may not have been uploaded


def _fail(message: str, code: int, command: str = "memfs session") -> int:
    print(f"{command}: {message}", file=sys.stderr)
    return code


def is_session_process(pid: int) -> bool:
    """True if ``pid`` is alive and is a ``memfs session`` process (not a reused pid)."""
    from memfs.session.state import pid_alive

    if pid == os.getpid() or not pid_alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            argv = cmdline.read().split(b"\0")
    except OSError:
        return True  # cannot tell; assume it is
    return b"session" in argv and any(b"memfs" in arg for arg in argv)


def stop_session(
    root: Path, *, timeout: float, command: str = "memfs session", as_json: bool = False
) -> int:
    """Stop the session at ``root`` (``memfs session stop``, and ``memfs umount ROOT``, which
    is ``command`` in the messages): signal its process, wait up to ``timeout`` seconds while it
    flushes every store and unmounts, then print what was not uploaded, store by store (or the
    outcome as JSON); clean up after a session whose process died."""
    from memfs.session.state import SessionState, pid_alive, state_dir, state_path

    path = state_path(root)
    try:  # it names a pid to signal and a root to unmount and remove: another user's is refused
        if os.path.lexists(path):
            private_dir(state_dir(), "state directory", create=False, tighten=False)
            check_private_file(path, "session state file")
    except NotPrivateError as exc:
        return _fail(str(exc), EXIT_FAILED, command)
    state = SessionState.read(path)
    if state is None:
        return _fail(f"no session is running at {root}", EXIT_FAILED, command)
    if is_session_process(state.pid):
        from memfs.commands.progress import FlushProgress

        os.kill(state.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        with FlushProgress(command, [str(root)]) as progress:
            while pid_alive(state.pid) and time.monotonic() < deadline:
                progress.update()
                time.sleep(0.1)
        if pid_alive(state.pid):
            return _fail(
                f"the session (pid {state.pid}) did not stop within {timeout:g} s",
                EXIT_FAILED,
                command,
            )
        stopped = SessionState.read(path)
        if stopped is None:  # the session removes its state file when all went well
            if as_json:
                print(json.dumps(_stop_outcome(state, []), indent=1))
            else:
                print(f"{command}: stopped; every store flushed and unmounted under {root}")
            return EXIT_OK
        state = stopped
    path.unlink(missing_ok=True)
    problems = list(state.problems)
    if state.status != "stopped":
        from memfs.session.teardown import clean_up_after

        problems += clean_up_after(state)
    if as_json:
        print(json.dumps(_stop_outcome(state, problems), indent=1))
    elif not problems:  # it left only notes: files open for writing, saved
        print(f"{command}: stopped; every store flushed and unmounted under {root}")
    for line in [] if as_json else [*state.notes, *problems]:
        print(f"{command}: {line}", file=sys.stderr)
    return EXIT_FAILED if problems else EXIT_OK


def _stop_outcome(state: SessionState, problems: list[str]) -> dict[str, Any]:
    """A stop as JSON (``memfs umount --json ROOT``): the session, and one line per change
    that was not uploaded as meant (the stop report's lines, store by store)."""
    return {
        "type": "memfs_session_stop",
        "root": state.root,
        "session_id": state.session_id,
        "problems": problems,
        # files open for writing at the stop, and where what they held went
        "notes": list(state.notes),
    }


def find_root(given: str | None, default: str, command: str) -> Path | int:
    """The root ``memfs session stop``/``status`` act on: ``given`` (``--root``), else the one
    session of this user whose process runs, else ``default``; several running is an exit code
    (1), with a line naming each."""
    if given is not None:
        return Path(os.path.abspath(given))
    sessions = running_sessions()
    if len(sessions) == 1:
        return Path(sessions[0].root)
    if not sessions:
        return Path(default)
    named = "; ".join(f"{state.root} ({state.session_id})" for state in sessions)
    return _fail(
        f"{len(sessions)} sessions run: {named}; name one with --root",
        EXIT_FAILED,
        f"memfs session {command}",
    )


def running_sessions() -> list[SessionState]:
    """The sessions of this user whose process runs, from their state files (sorted by root);
    a state file another user could have planted is passed over."""
    from memfs.session.state import SessionState, state_dir

    found = []
    try:
        private_dir(state_dir(), "state directory", create=False, tighten=False)
        paths = sorted(state_dir().glob("session-*.json"))
    except (NotPrivateError, OSError):
        return []
    for path in paths:
        try:
            check_private_file(path, "session state file")
        except NotPrivateError:
            continue
        state = SessionState.read(path)
        if state is not None and state.status != "stopped" and is_session_process(state.pid):
            found.append(state)
    return sorted(found, key=lambda state: state.root)


def session_holding(path: Path) -> Path | None:
    """The root of the session whose mount ``path`` is, or is inside of: its state file says
    so and its process runs, or died (``kill -9``) before its teardown. None if no session
    holds it (a session that stopped with problems leaves its state file, not its mount)."""
    from memfs.session.state import SessionState, state_path

    for candidate in (path, *path.parents):
        state = SessionState.read(state_path(candidate))
        if state is not None and (state.status != "stopped" or is_session_process(state.pid)):
            return candidate
    return None


def show_status(root: Path, *, as_json: bool) -> int:
    """``memfs session status``: the session at ``root``, each store's health and its files
    waiting, refused and in conflict (or all of it as JSON); 0 while its process runs."""
    from memfs.session.state import SessionState, state_path

    state = SessionState.read(state_path(root))
    if state is None:
        return _fail(f"no session at {root}", EXIT_FAILED)
    alive = is_session_process(state.pid)
    doc = _daemon_status(root, state.pid) if alive else None
    stores = {str(section.get("slug")): section for section in (doc or {}).get("stores") or []}
    for mount in state.mounts:
        mount.update(_store_status(stores.get(Path(str(mount.get("path"))).name), alive))
    scratch = (doc or {}).get("scratch")
    cache = _cache_budget(doc)
    if as_json:
        data = state.to_json()
        data["alive"] = alive
        data["scratch"] = scratch
        data["cache_budget"] = cache
        print(json.dumps(data, indent=2))
        return EXIT_OK if alive else EXIT_FAILED
    print(f"session  {state.session_id}")
    print(f"root     {state.root}")
    print(f"status   {state.status if alive else state.status + ' (its process is gone)'}")
    print(f"pid      {state.pid}")
    print(f"log      {state.log_file or '(none: it logs to its terminal)'}")
    if scratch is not None:
        print(
            f"scratch  {scratch.get('used_bytes', 0):,} bytes, {scratch.get('inodes', 0)} "
            "inodes (in memory, never uploaded, gone at stop)"
        )
    if cache is not None:
        print(
            f"cache    {cache['bytes']:,} of {cache['limit']:,} bytes (clean data, one budget "
            "every store shares: --cache-size)"
        )
    for mount in state.mounts:
        store = str(mount.get("memory_store_id"))
        if mount.get("api") == "databricks":
            session = f", session {mount['session_id']}" if mount.get("session_id") else ""
            store = f"databricks:{store} (actor {mount.get('actor_id')}{session})"
        print(f"  {mount.get('path')}  {mount.get('access')}  {store}  {mount['health']}")
        for path in mount["waiting"]:
            print(f"    waiting: {path}")
        for path in mount["refused"]:
            print(f"    refused: {path}")
        for conflict in mount["conflicts"]:
            saved = conflict.get("saved_as") or "(not saved)"
            print(f"    conflict: {conflict.get('path')} -> {saved}")
    for problem in state.problems:
        print(f"problem  {problem}")
    return EXIT_OK if alive else EXIT_FAILED


def _daemon_status(root: Path, pid: int) -> dict[str, Any] | None:
    """The status document the session's daemon publishes (``memfs.mount.status``), if it is
    this session's (not a stale one of an earlier process)."""
    from memfs.mount.statedir import MountError, state_path

    try:
        doc = json.loads(state_path(str(root), "status").read_text())
    except (MountError, OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("pid") == pid else None


def _cache_budget(doc: dict[str, Any] | None) -> dict[str, int] | None:
    """The budget the session's stores share (``memfs.contract.cache_budget``): its bytes and
    limit, as every store's section of the daemon's status document has them."""
    for section in (doc or {}).get("stores") or []:
        budget = (section.get("memory") or {}).get("cache budget")
        if isinstance(budget, dict):
            return {"bytes": int(budget["bytes"]), "limit": int(budget["limit"])}
    return None


def _store_status(section: dict[str, Any] | None, alive: bool) -> dict[str, Any]:
    """One store's health, and its files waiting, refused and in conflict, from its section of
    the daemon's status document (``memfs status ROOT/<slug>`` shows the whole section)."""
    if section is None:
        health = "starting (no status yet)" if alive else "-"
        return {"health": health, "waiting": [], "refused": [], "conflicts": []}
    uploads = section.get("uploads") or {}
    return {
        "health": str(section.get("health") or "ok"),
        "waiting": list(uploads.get("waiting") or []),
        "refused": list((section.get("refused") or {}).get("files") or []),
        "conflicts": list((section.get("conflicts") or {}).get("recent") or []),
    }
