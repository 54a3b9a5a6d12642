"""``memfs session …``: serve a sandbox session's memory stores from one mount, and stop it.

- ``memfs session --config FILE [--root /mnt/memory] [--prompt-file F] [--detach]
  [--session-id S] [--profile NAME] [--allow-other] [--uid U] [--gid G] [--umask M]
  [--cache-size MB] [--local-bytes SIZE]`` checks
  the whole session (config, stores, root) before mounting anything, then this one process
  serves every store from one FUSE mount at the root (each store the directory
  ``<root>/<slug>``, every other name there local scratch), prints the agent's prompt (or
  writes it to ``--prompt-file``), and serves until SIGTERM/SIGINT. With ``--detach`` the
  session runs in the background and the command returns once every store answers.
- ``memfs session stop [--root R]`` asks the session to flush, unmount and clean up, waits for
  it, and reports anything that may not have been uploaded.
- ``memfs session status [--root R] [--json]`` shows the running session and each store's
  health, and the files waiting, refused or in conflict.
- Without ``--root``, stop and status act on the one session that runs (several: each named).

This module owns argument parsing, logging setup, the detach handshake and exit codes; the
config, the checks and the state file are ``memfs.session.config``'s, ``plan``'s and ``state``'s,
serving ``memfs.session.runner``'s, stopping and showing a running session
``memfs.commands.session_control``'s.
It must not print a traceback for an expected failure (one line ``memfs session: …``
instead), and never prints or logs the API key: it travels by environment or
``--api-key-file`` only (as does a base URL, which may carry a password); a Databricks token
only by environment (``DATABRICKS_TOKEN``) or a profile of ``~/.databrickscfg``. State files
and logs live in a private (0700) state directory; logs are 0600.

Exit codes (``memfs.contract.exit_codes``, as every command's):
  0  success
  1  a store could not be mounted, a stop failed, or changes may not have been uploaded
  2  the session was refused before anything was mounted (config, directories, a session
     already running at the root, problems of several kinds)
  3, 5, 6  refused before anything was mounted because its stores are unknown (3), its
     credentials refused (5) or its API out of reach (6)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memfs.commands.parsing import byte_size, complete_paths, megabytes
from memfs.commands.session_control import (
    EXIT_FAILED,
    EXIT_OK,
    find_root,
    is_session_process,
    show_status,
    stop_session,
)
from memfs.host.private import (
    NotPrivateError,
    check_directory_of,
    open_append,
    private_dir,
    replace_file,
)

# The session package and the client are imported by the functions that run a session, not
# here: they bring trio and httpx, which `memfs session --help` does not need.
if TYPE_CHECKING:
    from memfs.api.config import ClientConfig
    from memfs.mount.options import MountOptions
    from memfs.mount.owner import Owner
    from memfs.session.config import SessionConfig
    from memfs.session.plan import MountPlan
    from memfs.session.runner import SessionRunner
    from memfs.session.state import SessionState
    from memfs.session.synced import SyncedSession

log = logging.getLogger(__name__)

EXIT_REFUSED = 2

DEFAULT_ROOT = "/mnt/memory"  # where a sandbox session's stores are mounted
# The session's flush bound (memfs.session.runner.FLUSH_TIMEOUT, 30 s) plus a lazy unmount;
# a number here, not a sum, so that --help need not import the daemon.
STOP_TIMEOUT = 45.0
PROMPT_DIR_MODE = 0o755  # directories made for --prompt-file: the agent reads the prompt
CHECK_RETRIES = 1  # fail fast while checking a session: a person is waiting


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "session",
        help="serve a sandbox session's memory stores from one mount (/mnt/memory)",
        description=(
            "Serve up to 8 memory stores from one mount at ROOT, as a sandbox session does: "
            "each store is the directory ROOT/<slug>, every other name at ROOT is local "
            "scratch (in memory, never uploaded). Prints the text an agent needs about them. "
            "One process; runs until SIGTERM/SIGINT or `memfs session stop`, then flushes "
            "every store, unmounts and removes ROOT if it created it."
        ),
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="the session's resources: a JSON list, or an object with 'resources', of "
        '{"type": "memory_store", "memory_store_id" (an id or a name), "access", "instructions"}; '
        'a Databricks store adds "api": "databricks", "actor_id" and optionally "session_id"',
    )
    _root_option(parser)
    parser.add_argument(
        "--prompt-file", metavar="F", help="write the agent prompt (markdown) here, not stdout"
    )
    parser.add_argument(
        "--detach",
        action="store_true",
        help="run the session in the background; return once every store answers",
    )
    parser.add_argument(
        "--session-id", metavar="S", help="attribute writes to this session (default: sesn_…)"
    )
    parser.add_argument(
        "--api-key-file",
        metavar="F",
        help="read the API key from F (0600, the key alone on one line; default: "
        "$ANTHROPIC_API_KEY)",
    )
    parser.add_argument(
        "--base-url",
        metavar="URL",
        help="the API to use (default: $ANTHROPIC_BASE_URL, or hosted)",
    )
    parser.add_argument(
        "--profile",
        metavar="NAME",
        help="Databricks stores: the workspace of profile NAME in ~/.databrickscfg (default: "
        "DATABRICKS_HOST and DATABRICKS_TOKEN)",
    )
    parser.add_argument(
        "--log-file",
        metavar="F",
        help="with --detach: where the session logs (default: next to its state file)",
    )
    parser.add_argument(
        "--allow-other",
        action="store_true",
        help="let every user of the machine use the mount (FUSE allow_other; off by default)",
    )
    parser.add_argument(
        "--uid",
        metavar="USER",
        help="owner of every store's files and of ROOT, e.g. the user the agent runs as (with "
        "--allow-other; default: the config's owner.uid)",
    )
    parser.add_argument(
        "--gid", metavar="GROUP", help="group of the files (default: the config's owner.gid)"
    )
    parser.add_argument(
        "--umask",
        metavar="MASK",
        help="octal, for the files' default modes (default: the config's owner.umask)",
    )
    parser.add_argument(
        "--replay-legacy-journal",
        action="store_true",
        help="each store also uploads the journal an earlier memfs left for it, which "
        "does not record its server (memfs mount --replay-legacy-journal)",
    )
    parser.add_argument(
        "--local-bytes",
        type=byte_size,
        metavar="SIZE",
        help="each store's budget for local-only files, refused content and files waiting for "
        "the store, and the budget of the scratch at ROOT, past which creates and writes get "
        "ENOSPC (memfs mount --local-bytes; default: 64M)",
    )
    parser.add_argument(
        "--cache-size",
        type=megabytes,
        metavar="MB",
        help="clean data kept in memory, one budget every store shares: contents, listings, "
        ".versions/ contents, local search indexes (MB; memfs mount --cache-size; default: 64)",
    )
    parser.add_argument(
        "--sync",
        action="store_true",
        help="lay the stores out as directories kept in step (memfs sync) instead of mounting "
        "them; chosen by itself, and said once, where mounting is not possible (no /dev/fuse, "
        "no right to mount, no fusermount3, no pyfuse3)",
    )
    parser.add_argument("--debug", action="store_true", help="log at DEBUG level")
    parser.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)
    complete_paths(parser, files=("config", "prompt_file", "api_key_file", "log_file"))
    parser.set_defaults(func=_start)

    commands = parser.add_subparsers(dest="session_command", metavar="COMMAND")
    stop = commands.add_parser(
        "stop", help="stop the session at ROOT: flush every store, unmount, remove ROOT"
    )
    _root_option(stop, found=True)
    stop.add_argument(
        "--timeout",
        type=float,
        default=STOP_TIMEOUT,
        metavar="S",
        help="seconds to wait for the session to stop",
    )
    stop.set_defaults(func=_stop)
    status = commands.add_parser(
        "status",
        help="show the session at ROOT: each store's health, files waiting, refused, in conflict",
    )
    _root_option(status, found=True)
    status.add_argument("--json", action="store_true", help="print the state as JSON")
    status.set_defaults(func=_status)


def _root_option(parser: argparse.ArgumentParser, *, found: bool = False) -> None:
    """``--root``; with ``found`` (stop, status) its default is the session that runs, when one
    does (``session_control.find_root``), else /mnt/memory."""
    parser.add_argument(
        "--root",
        default=None if found else DEFAULT_ROOT,
        help="the session's mount point: one directory per store, the rest scratch"
        + (" (default: the running session, if there is one; else /mnt/memory)" if found else ""),
    )
    complete_paths(parser, directories=("root",))


def _fail(message: str, code: int, command: str = "memfs session") -> int:
    print(f"{command}: {message}", file=sys.stderr)
    return code


class _LogFileOnStderr(logging.StreamHandler):  # type: ignore[type-arg]
    """stderr, when it is the detached session's log file (opened by the command that started
    it): named as a file handler names its file, so that the status document says where the
    session logs (``memfs.mount.status.log_file``)."""

    def __init__(self, log_file: str) -> None:
        super().__init__(sys.stderr)
        self.baseFilename = log_file


def setup_logging(*, debug: bool, log_file: str | None = None) -> None:
    """One line per event on stderr, with a level; no colours; timestamps unless journald.
    ``log_file``: the file stderr is (a detached session's log)."""
    fmt = "%(levelname)s %(name)s: %(message)s"
    if not os.environ.get("JOURNAL_STREAM"):
        fmt = "%(asctime)s " + fmt
    handler = logging.StreamHandler(sys.stderr) if log_file is None else _LogFileOnStderr(log_file)
    handler.setFormatter(logging.Formatter(fmt))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(logging.DEBUG if debug else logging.INFO)
    for noisy in ("httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


# ---------------------------------------------------------------------------------------------
# memfs session --config FILE


def _start(args: argparse.Namespace) -> int:
    import dataclasses  # here with the rest: it imports inspect, which --help does not need

    from memfs.api.config import ClientConfig, ConfigError
    from memfs.session.config import SessionError, load_config
    from memfs.session.state import check_session_id, new_session_id, state_dir

    refused = _choose_sync(args)
    if refused is not None:
        return refused
    if args.config is None:
        return _fail("give --config FILE (or a command: stop, status)", EXIT_REFUSED)
    detached = args.ready_fd is not None and args.log_file  # its stderr is the log file
    setup_logging(debug=args.debug, log_file=os.path.abspath(args.log_file) if detached else None)
    if args.sync_chosen and args.ready_fd is not None:  # the detached session: into its log
        log.warning("%s", args.sync_chosen)
    root = Path(os.path.abspath(args.root))
    try:
        session_id = check_session_id(args.session_id or new_session_id())
        config = load_config(args.config)
        config = dataclasses.replace(config, owner=_owner(args, config.owner))
        client_config = None  # a session of Databricks stores only needs no Memory Stores key
        if any(not attachment.databricks for attachment in config.attachments):
            client_config = ClientConfig.from_env(
                api_key_file=args.api_key_file, base_url=args.base_url, session_id=session_id
            )
    except SessionError as exc:
        for problem in exc.problems:
            print(f"memfs session: {problem}", file=sys.stderr)
        return EXIT_REFUSED
    except ConfigError as exc:
        return _fail(str(exc), EXIT_REFUSED)
    try:  # state files and logs: another user must not read them nor plant a pid to signal
        private_dir(state_dir(), "state directory")
        if args.prompt_file:  # before anything is mounted; written later as _write_prompt does
            check_directory_of(
                Path(os.path.abspath(args.prompt_file)), "prompt file", create_mode=PROMPT_DIR_MODE
            )
    except NotPrivateError as exc:
        return _fail(str(exc), EXIT_REFUSED)
    busy = _running_session(root)
    if busy is not None:
        return _fail(
            f"a session is already running at {root} (pid {busy.pid}, {busy.session_id}); "
            f"stop it with: memfs session stop --root {root}",
            EXIT_REFUSED,
        )
    for note in config.notes:
        log.info("%s", note)
    if args.detach and args.ready_fd is None:
        return _detach(args, root, session_id)  # the session's own process imports the rest
    import trio

    return trio.run(_serve, args, root, session_id, config, client_config)


def _choose_sync(args: argparse.Namespace) -> int | None:
    """Mount, or sync (``args.sync``) where mounting is not possible: then
    ``args.sync_chosen`` says why, once on stderr (and a detached session's own process, which
    finds the same again, in its log); an exit code if neither extra is installed."""
    from memfs.commands.extras import missing_extra
    from memfs.session.fuse_check import why_no_mount

    args.sync_chosen = None
    missing_mount = missing_extra("memfs session", "mount")
    why = why_no_mount(missing_mount is not None) if not args.sync else None
    if not args.sync and why is None:
        return None
    missing_sync = missing_extra("memfs session --sync", "sync")
    if missing_sync is not None:
        print(missing_mount or missing_sync, file=sys.stderr)
        return EXIT_REFUSED
    if why is not None:
        args.sync_chosen = (
            f"cannot mount here ({why}); the stores are directories kept in step instead "
            "(memfs sync)"
        )
        if args.ready_fd is None:  # the terminal (a foreground session's log as well)
            print(f"memfs session: {args.sync_chosen}", file=sys.stderr)
    args.sync = True
    return None


def _owner(args: argparse.Namespace, configured: Owner) -> Owner:
    """The config's owner with ``--uid``, ``--gid``, ``--umask`` applied (ConfigError)."""
    from memfs.mount.owner import Owner, parse_gid, parse_uid, parse_umask

    uid = configured.uid if args.uid is None else parse_uid(args.uid)
    gid = configured.gid if args.gid is None else parse_gid(args.gid)
    umask = configured.umask if args.umask is None else parse_umask(args.umask)
    return Owner(uid=uid, gid=gid, umask=umask)


def _running_session(root: Path) -> SessionState | None:
    """The live session at ``root``, if any. What a dead one left is cleaned up: its state file,
    and if it died without its teardown (``kill -9``), its dead mount and the root it made (its
    stores' journals are replayed by this session)."""
    from memfs.session.state import SessionState, state_path

    path = state_path(root)
    state = SessionState.read(path)
    if state is None:
        return None
    if is_session_process(state.pid):
        return state
    if state.problems:
        log.warning("the previous session at %s ended with problems:", root)
        for problem in state.problems:
            log.warning("  %s", problem)
    if state.status != "stopped":
        # here only: the runner brings the whole mount daemon, which `--detach`'s parent (this
        # process, until it hands over) does not otherwise load (~0.3-0.8 s of a start)
        from memfs.session.teardown import clean_up_after

        for line in clean_up_after(state):
            log.warning("%s", line)
    path.unlink(missing_ok=True)
    return None


async def _serve(
    args: argparse.Namespace,
    root: Path,
    session_id: str,
    config: SessionConfig,
    client_config: ClientConfig | None,
) -> int:
    from memfs.api import StoreClient
    from memfs.mount.statedir import MountError
    from memfs.session.config import SessionError
    from memfs.session.plan import plan_mounts
    from memfs.session.prompt import render_prompt
    from memfs.session.state import state_path
    from memfs.session.stores import fetch_all_stores

    ready_fd: int | None = args.ready_fd

    def refuse(problems: list[str], code: int) -> int:
        for problem in problems:
            print(f"memfs session: {problem}", file=sys.stderr)
        if ready_fd is not None:
            _send_ready(ready_fd, {"ok": False, "problems": problems, "code": code})
        return code

    try:
        async with contextlib.AsyncExitStack() as stack:
            quick = None  # a session of Databricks stores only needs no Memory Stores client
            if client_config is not None:
                client = await stack.enter_async_context(StoreClient(client_config))
                quick = client.with_options(max_retries=CHECK_RETRIES)
            # both APIs' stores checked side by side
            stores = await fetch_all_stores(quick, config.attachments, args.profile)
        plans = plan_mounts(config.attachments, stores, root)
    except SessionError as exc:
        return refuse(exc.problems, exc.code)

    prompt = render_prompt(plans, root, synced=args.sync)
    prompt_file = Path(os.path.abspath(args.prompt_file)) if args.prompt_file else None
    warnings = _mounted_elsewhere(plans)
    for warning in warnings:  # on stderr in the foreground, in the log when detached
        log.warning("%s", warning)

    def ready() -> None:
        if prompt_file is not None:
            try:
                _write_prompt(prompt_file, prompt)
            except OSError as exc:  # NotPrivateError too; the runner stops the session
                problem = f"the prompt file {prompt_file} was not written: {exc}"
                if ready_fd is not None:
                    _send_ready(ready_fd, {"ok": False, "problems": [problem], "code": EXIT_FAILED})
                raise OSError(problem) from None
            log.info("agent prompt written to %s", prompt_file)
        if ready_fd is not None:
            ready_message = {"ok": True, "prompt": prompt, "pid": os.getpid()}
            _send_ready(ready_fd, ready_message | {"warnings": warnings})
        elif prompt_file is None:
            sys.stdout.write(prompt)
            sys.stdout.flush()

    options = _mount_options(args, plans, root, session_id, config.owner)
    runner: SessionRunner | SyncedSession
    if not args.sync:  # the daemon, hence pyfuse3, only for a mount
        from memfs.session.runner import SessionRunner

        runner = SessionRunner(
            plans,
            options,
            session_id=session_id,
            state_file=state_path(root),
            log_file=args.log_file,
        )
    else:
        from memfs.session.synced import SyncedSession

        runner = SyncedSession(
            plans,
            list(options.stores),
            root=root,
            session_id=session_id,
            state_file=state_path(root),
            log_file=args.log_file,
        )
    log.info("session %s: serving %d stores under %s", session_id, len(plans), root)
    _log_plan(plans)
    try:
        return await runner.run(ready=ready)
    except MountError as exc:
        return refuse([str(exc)], exc.code)


def _mounted_elsewhere(plans: list[MountPlan]) -> list[str]:
    """A warning, not a refusal, for each store of the session that a mount or another session
    of this user already serves on this machine (``memfs mount`` warns alike)."""
    from memfs.mount.statedir import mounted_elsewhere

    found = (
        None if plan.attachment.databricks else mounted_elsewhere(plan.store.id, plan.described)
        for plan in plans
    )
    return [warning for warning in found if warning is not None]


def _log_plan(plans: list[MountPlan]) -> None:
    for plan in plans:
        log.debug("plan: %s -> %s %s", plan.described, plan.path, plan.attachment.access)


def _mount_options(
    args: argparse.Namespace, plans: list[MountPlan], root: Path, session_id: str, owner: Owner
) -> MountOptions:
    """The one daemon of the session: every store of ``plans`` at ``root``, as ``memfs mount``
    would mount each (its options, credentials and the session's attribution)."""
    from memfs.mount.options import MountOptions
    from memfs.session.access import StoreAccess, store_spec

    access = StoreAccess(
        api_key_file=os.path.abspath(args.api_key_file) if args.api_key_file else None,
        base_url=args.base_url,
        profile=args.profile,
        replay_legacy_journal=args.replay_legacy_journal,
    )
    extra: dict[str, Any] = {}
    if args.local_bytes is not None:
        extra["local_bytes"] = args.local_bytes
    if args.cache_size is not None:
        extra["cache_mb"] = args.cache_size
    return MountOptions(
        store="",
        mountpoint=str(root),
        stores=tuple(store_spec(plan, session_id, access) for plan in plans),
        debug=args.debug,
        allow_other=args.allow_other,
        owner=owner,
        **extra,
    )


def _write_prompt(path: Path, text: str) -> None:
    """The prompt, 0644 for the agent, never written through a link planted there."""
    replace_file(path, text.encode("utf-8"), "prompt file", mode=0o644, create_mode=PROMPT_DIR_MODE)


# ---------------------------------------------------------------------------------------------
# --detach: the session in the background, and a pipe that says when it is ready


def _send_ready(fd: int, message: dict[str, Any]) -> None:
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as pipe:
            pipe.write(json.dumps(message))
    except OSError as exc:  # the parent is gone; keep serving
        log.warning("cannot report readiness: %s", exc)


def _detach(args: argparse.Namespace, root: Path, session_id: str) -> int:
    from memfs.session.state import state_path

    log_file = Path(os.path.abspath(args.log_file or state_path(root).with_suffix(".log")))
    try:  # opened once, here, and handed over: never reopened by a name someone could swap
        log_fd = open_append(log_file, "session log", create_mode=0o700)
    except NotPrivateError as exc:
        return _fail(str(exc), EXIT_REFUSED)
    read_end, write_end = os.pipe()
    argv = [
        sys.executable, "-m", "memfs", "session",
        "--config", os.path.abspath(args.config),
        "--root", str(root),
        "--session-id", session_id,
        "--log-file", str(log_file),
        "--ready-fd", str(write_end),
    ]  # fmt: skip
    if args.prompt_file:
        argv += ["--prompt-file", os.path.abspath(args.prompt_file)]
    if args.api_key_file:
        argv += ["--api-key-file", os.path.abspath(args.api_key_file)]
    if args.profile:
        argv += ["--profile", args.profile]
    env = None
    if args.base_url:  # by environment: argv is world-readable, and the URL may hold a password
        env = dict(os.environ, ANTHROPIC_BASE_URL=args.base_url)
    if args.debug:
        argv.append("--debug")
    if args.allow_other:
        argv.append("--allow-other")
    if args.replay_legacy_journal:
        argv.append("--replay-legacy-journal")
    if args.sync and not args.sync_chosen:  # else the session's process finds why, and logs it
        argv.append("--sync")
    if args.local_bytes is not None:
        argv += ["--local-bytes", str(args.local_bytes)]
    if args.cache_size is not None:
        argv += ["--cache-size", str(args.cache_size)]
    for flag, value in (("--uid", args.uid), ("--gid", args.gid), ("--umask", args.umask)):
        if value is not None:
            argv += [flag, value]
    with os.fdopen(log_fd, "ab") as log_stream:
        child = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log_stream,
            pass_fds=(write_end,),
            start_new_session=True,  # no terminal signals; outlives this command
        )
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        raw = pipe.read()  # EOF when the session is ready, refused, or dead
    try:
        message = json.loads(raw) if raw else None
    except ValueError:
        message = None
    if not isinstance(message, dict):
        code = child.poll()
        return _fail(
            f"the session exited (status {code}) before it was ready; see {log_file}",
            EXIT_FAILED,
        )
    if not message.get("ok"):
        child.wait()
        for problem in message.get("problems") or []:
            print(f"memfs session: {problem}", file=sys.stderr)
        return int(message.get("code") or EXIT_FAILED)
    for warning in message.get("warnings") or []:
        print(f"memfs session: warning: {warning}", file=sys.stderr)
    if not args.prompt_file:
        sys.stdout.write(str(message.get("prompt", "")))
        sys.stdout.flush()
    print(
        f"memfs session: {session_id} running (pid {child.pid}, log {log_file}); "
        f"stop it with: memfs session stop --root {root}",
        file=sys.stderr,
    )
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# memfs session stop / status


def _stop(args: argparse.Namespace) -> int:
    setup_logging(debug=False)
    root = find_root(args.root, DEFAULT_ROOT, "stop")
    return root if isinstance(root, int) else stop_session(root, timeout=args.timeout)


def _status(args: argparse.Namespace) -> int:
    root = find_root(args.root, DEFAULT_ROOT, "status")
    return root if isinstance(root, int) else show_status(root, as_json=args.json)
