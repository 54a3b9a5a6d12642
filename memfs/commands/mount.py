"""``memfs mount STORE MOUNTPOINT`` (its end, ``memfs umount``, is ``memfs.commands.umount``).

Owns the command line of mounting: argument parsing, the checks made before anything starts,
daemonizing (a ``--foreground`` child re-executed with its output to a log file, reporting
readiness through a pipe: that child is ``memfs.commands.mount_foreground``) and one-line
errors with the exit status of their kind (``memfs.contract.exit_codes``). The API key is
never put on a command line, nor is ``--base-url`` (it may hold a password): the child
inherits them through the environment.

It must not implement the filesystem (``memfs.mount.daemon`` runs it).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from memfs.commands.api_options import DATABRICKS, add_api_options, api_usage_error
from memfs.commands.background import start_in_background, store_arguments
from memfs.commands.extras import needs_extra, refuse_without
from memfs.commands.parsing import byte_size, complete_paths, megabytes, swapped_arguments
from memfs.contract.exit_codes import EXIT_USAGE
from memfs.host.private import NotPrivateError, create_private_file

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

READY_TIMEOUT = 60.0


def register(subparsers: Any) -> None:
    mount = subparsers.add_parser(
        "mount",
        help="mount a memory store as a directory",
        description="Mount a memory store (id or exact name) on an empty directory; with --api "
        "databricks, the entries of one actor (and session) of a Databricks memory store (its id).",
    )
    mount.add_argument("store", metavar="STORE", help="memory store id or exact name")
    mount.add_argument("mountpoint", metavar="MOUNTPOINT", help="an existing empty directory")
    mount.add_argument("--read-only", action="store_true", help="refuse every change (EROFS)")
    mount.add_argument("--foreground", action="store_true", help="do not daemonize")
    mount.add_argument("--debug", action="store_true", help="verbose log (and FUSE debug)")
    mount.add_argument(
        "--allow-other",
        action="store_true",
        help="let every user of the machine use the mount (FUSE allow_other; off by default)",
    )
    mount.add_argument(
        "--uid",
        type=_owner_option("uid"),
        metavar="USER",
        help="owner of the files (name or number; default: the mounting user); files created "
        "in the mount belong to their creator",
    )
    mount.add_argument(
        "--gid",
        type=_owner_option("gid"),
        metavar="GROUP",
        help="group of the files (name or number; default: the mounting user's group)",
    )
    mount.add_argument(
        "--umask",
        type=_owner_option("umask"),
        metavar="MASK",
        help="octal; default modes are 0666 and 0777 without these bits (default: 022, files "
        "0644 and directories 0755). Modes are kept for the mount's lifetime only",
    )
    mount.add_argument(
        "--default-permissions",
        action="store_true",
        help="accepted for sshfs/rclone command lines: memfs always lets the kernel check modes",
    )
    mount.add_argument(
        "--api-key-file",
        metavar="FILE",
        help="read the API key from FILE (0600, the key alone on one line)",
    )
    mount.add_argument(
        "--base-url", metavar="URL", help="API base URL (default: $ANTHROPIC_BASE_URL or hosted)"
    )
    mount.add_argument("--session-id", metavar="S", help="attribute writes to session S")
    add_api_options(mount, "mount")
    mount.add_argument(
        "--log-file",
        metavar="FILE",
        help="daemon log (default: the per-user state directory; removed by a clean umount)",
    )
    mount.add_argument(
        "--grace", type=float, default=2.0, help="seconds a removed memory may be re-created"
    )
    mount.add_argument(
        "--update-delay", type=float, default=0.5, help="seconds before a save is uploaded"
    )
    mount.add_argument(
        "--fsync-timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="fsync retries an upload that fails transiently this long before EIO",
    )
    mount.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="write-back journal directory (default: $XDG_CACHE_HOME/memfs or ~/.cache/memfs)",
    )
    mount.add_argument(
        "--replay-legacy-journal",
        action="store_true",
        help="also upload, to this mount's server, the journal an earlier memfs left for the "
        "store, which does not record its server (never done unasked; `memfs status` lists it)",
    )
    mount.add_argument(
        "--cache-size",
        type=megabytes,
        default=64.0,
        metavar="MB",
        help="clean data kept in memory: contents, listings, .versions/ contents, a local "
        "search index (MB; the stores of one mount share it)",
    )
    mount.add_argument(
        "--local-bytes",
        type=byte_size,
        default="64M",
        metavar="SIZE",
        help="what the mount keeps of files the store does not hold: local-only files "
        "(.git/, editor swaps), refused content (not UTF-8, too large) and its kept copies, "
        "files waiting for room in a full store or for a server that is away; past it, "
        "creates and writes that grow a file get ENOSPC (bytes, or 512K, 64M, 1G)",
    )
    mount.add_argument(
        "--readahead-dirs",
        type=int,
        default=4,
        metavar="N",
        help="directories fetched ahead of a reader walking the tree, grep -r (0: off)",
    )
    mount.add_argument(
        "--poll-interval",
        type=float,
        default=1.0,
        metavar="S",
        help="change feed: seconds between polls while the mount is in use",
    )
    mount.add_argument(
        "--idle-poll-interval",
        type=float,
        default=10.0,
        metavar="S",
        help="change feed: seconds between polls after 60 s without use",
    )
    mount.add_argument(
        "--change-feed",
        choices=["auto", "poll"],
        default="auto",
        help="auto: the server's change stream when offered, else polling; poll: polling only",
    )
    mount.add_argument(
        "--search",
        choices=["auto", "local"],
        default="auto",
        help="who answers cat MOUNTPOINT/.search/WORDS (the best matches, one a line: path, "
        "relevance 1-100 with 100 the best, description, best line; memfs search --help "
        "says more): auto: the server's search when offered, else a local index of the "
        "store; local: the local index only",
    )
    mount.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)
    complete_paths(
        mount, files=("api_key_file", "log_file"), directories=("mountpoint", "cache_dir")
    )
    mount.set_defaults(func=needs_extra("mount", "memfs mount", run_mount))


def _owner_option(kind: Literal["uid", "gid", "umask"]) -> Callable[[str], int]:
    """An argparse ``type`` from a ``memfs.mount.owner`` parser (its message, one line),
    imported when the value is parsed: it needs ``memfs.api``, which ``--help`` does not."""

    def convert(text: str) -> int:
        from memfs.api.config import ConfigError
        from memfs.mount.owner import parse_gid, parse_uid, parse_umask

        parse = {"uid": parse_uid, "gid": parse_gid, "umask": parse_umask}[kind]
        try:
            return parse(text)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def run_mount(args: argparse.Namespace) -> int:
    from memfs.api.config import ConfigError, check_base_url
    from memfs.mount.owner import DEFAULT_UMASK, Owner
    from memfs.mount.statedir import MountError, check_mountpoint, prune_stale, state_path

    mountpoint = os.path.abspath(args.mountpoint)
    usage = swapped_arguments("memfs mount", ("STORE", "MOUNTPOINT"), (args.store, args.mountpoint))
    usage = usage or _api_usage_error(args)
    if usage is not None:
        print(f"memfs mount: {usage}", file=sys.stderr)
        return 2
    if args.api == DATABRICKS:
        refused = refuse_without("memfs mount --api databricks", "databricks")
        if refused is not None:
            return refused
    if args.base_url:
        try:
            check_base_url(args.base_url, "--base-url")
        except ConfigError as exc:
            print(f"memfs mount: {exc}", file=sys.stderr)
            return EXIT_USAGE
    owner = Owner(
        uid=args.uid, gid=args.gid, umask=DEFAULT_UMASK if args.umask is None else args.umask
    )
    cache_dir = os.path.abspath(args.cache_dir) if args.cache_dir else None
    if args.foreground:
        from memfs.commands.mount_foreground import run_daemon

        return run_daemon(args, mountpoint, owner, cache_dir)

    try:
        check_mountpoint(mountpoint)
    except MountError as exc:
        print(f"memfs mount: {exc}", file=sys.stderr)
        return 1
    prune_stale()  # what mounts gone without a clean umount left a week ago
    try:
        log_file = args.log_file or str(state_path(mountpoint, "log"))
        create_private_file(Path(log_file), "log file")
    except (MountError, NotPrivateError) as exc:
        print(f"memfs mount: {exc}", file=sys.stderr)
        return 1
    argv = [sys.executable, "-m", "memfs", "mount", args.store, mountpoint, "--foreground"]
    argv += ["--log-file", log_file]
    argv += ["--grace", str(args.grace), "--update-delay", str(args.update_delay)]
    argv += ["--fsync-timeout", str(args.fsync_timeout)]
    argv += ["--cache-size", str(args.cache_size), "--poll-interval", str(args.poll_interval)]
    argv += ["--readahead-dirs", str(args.readahead_dirs), "--local-bytes", str(args.local_bytes)]
    argv += ["--idle-poll-interval", str(args.idle_poll_interval)]
    argv += ["--change-feed", args.change_feed, "--api", args.api, "--search", args.search]
    argv += owner.mount_arguments()
    argv += store_arguments(args, cache_dir)
    if args.allow_other:
        argv.append("--allow-other")
    if args.replay_legacy_journal:
        argv.append("--replay-legacy-journal")
    failed = start_in_background(
        "memfs mount",
        argv,
        args.base_url,
        timeout=READY_TIMEOUT,
        log_file=log_file,
        what="the mount daemon",
    )
    if not failed:
        _warn_if_mounted_elsewhere(mountpoint)
    return failed


def _warn_if_mounted_elsewhere(mountpoint: str) -> None:
    """A warning, not a refusal, when the store now mounted at ``mountpoint`` is mounted
    elsewhere on this machine too (by this user: a mount, or a session's directory): each mount
    has its own caches and journal, so one file saved through both becomes a conflict copy."""
    from memfs.mount.statedir import MountError, fresh_status, mounted_elsewhere, state_path

    try:
        doc = fresh_status(state_path(mountpoint, "status")) or {}
    except MountError:
        return
    store_id = doc.get("store_id")
    if isinstance(store_id, str):
        described = f"{doc.get('store_name') or store_id} ({store_id})"
        warning = mounted_elsewhere(store_id, described, but=mountpoint)
        if warning is not None:
            print(f"memfs mount: warning: {warning}", file=sys.stderr)


def _api_usage_error(args: argparse.Namespace) -> str | None:
    """The options that do not go with ``--api`` (one line), or None."""
    return api_usage_error(
        args,
        "mount",
        (
            ("--api-key-file", args.api_key_file),
            ("--base-url", args.base_url),
            ("--session-id", args.session_id),
        ),
    )
