"""``memfs mount --foreground``: the mount daemon's own process, the child a ``memfs mount``
re-executes (``memfs.commands.mount``) or a user runs in the foreground.

Owns turning the parsed options into ``MountOptions``, the daemon's logging, and the readiness
pipe (``--ready-fd``: one line, ``ok`` or ``error: …``, then closed). It imports the filesystem
(pyfuse3, trio, the core) when it runs; the parent that spawns it never does.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from typing import TYPE_CHECKING

from memfs.commands.background import readiness, setup_logging
from memfs.host.private import NotPrivateError

if TYPE_CHECKING:
    from memfs.mount.owner import Owner

log = logging.getLogger(__name__)


def run_daemon(
    args: argparse.Namespace, mountpoint: str, owner: Owner, cache_dir: str | None
) -> int:
    """The daemon itself (``--foreground``): the only process that imports the filesystem
    (pyfuse3, trio, the core); the parent that spawns it stays light, so a mount pays for
    those imports once."""
    from memfs.mount.daemon import run_foreground
    from memfs.mount.options import MountOptions

    options = MountOptions(
        store=args.store,
        mountpoint=mountpoint,
        read_only=args.read_only,
        debug=args.debug,
        allow_other=args.allow_other,
        owner=owner,
        api_key_file=args.api_key_file,
        base_url=args.base_url,
        session_id=args.session_id,
        grace=args.grace,
        update_delay=args.update_delay,
        fsync_timeout=args.fsync_timeout,
        cache_dir=cache_dir,
        cache_mb=args.cache_size,
        local_bytes=args.local_bytes,
        readahead_dirs=max(0, args.readahead_dirs),
        poll_interval=args.poll_interval,
        idle_poll_interval=args.idle_poll_interval,
        change_stream=args.change_feed == "auto",
        server_search=args.search == "auto",
        api=args.api,
        actor=args.actor,
        dbx_session=args.session,
        profile=args.profile,
        replay_legacy_journal=args.replay_legacy_journal,
    )
    ready_fd = args.ready_fd
    try:
        setup_logging(args.debug, args.log_file)
    except NotPrivateError as exc:
        print(f"memfs mount: {exc}", file=sys.stderr)
        if ready_fd is not None:
            with contextlib.suppress(OSError):
                os.write(ready_fd, f"error: {exc}\n".encode())
        return 1

    return run_foreground(options, readiness(ready_fd, "memfs mount"))
