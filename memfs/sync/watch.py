"""Watching DIR: the platform's file events (inotify, FSEvents, ReadDirectoryChangesW) through
watchfiles, or polling.

watchfiles (Rust ``notify`` underneath) is made for this: one library speaks all three
platforms' events, debounces bursts (an editor's save is a handful of events), and its
``awatch`` runs on anyio, hence under trio. With ``polling`` (or where events cannot be had:
a network file system, a container's bind mount from another kernel) it compares the tree
itself at an interval. Events only say where to look: the engine compares the path with the
basis and the core, so a lost or doubled event costs a comparison, never a wrong upload. A
burst too large to trust (the kernel's event queue overflowed) asks for a full comparison.
"""

from __future__ import annotations

import logging
from pathlib import Path

import trio

from memfs.sync.engine import SyncEngine

log = logging.getLogger(__name__)

DEBOUNCE_MS = 30  # events closer than this are one batch (an editor's save)
STEP_MS = 10
POLL_MS = 300  # polling: how often the tree is compared
BURST = 5_000  # more changes at once than this: compare everything instead


async def watch_directory(
    directory: Path,
    engine: SyncEngine,
    polling: bool,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Tell ``engine`` which names of ``directory`` changed, until cancelled."""
    try:
        import watchfiles
    except ImportError:  # the sync extra not installed: the engine's own comparisons
        log.warning("watchfiles is not installed: DIR is compared every %d ms", POLL_MS)
        task_status.started()
        while True:
            await trio.sleep(POLL_MS / 1000)
            engine.rescan_soon()
    stop = trio.Event()
    task_status.started()
    first = True
    watcher = watchfiles.awatch(
        directory,
        watch_filter=None,
        debounce=DEBOUNCE_MS,
        step=STEP_MS,
        stop_event=stop,
        force_polling=polling,
        poll_delay_ms=POLL_MS,
        recursive=True,
        yield_on_timeout=True,
        rust_timeout=1_000,
    )
    try:
        async for changes in watcher:
            if first:  # watching now: what changed before it started is found by comparing
                engine.rescan_soon()
                first = False
            if not changes:
                continue
            if len(changes) > BURST:
                engine.rescan_soon()
                continue
            engine.mark_local([Path(path) for _, path in changes])
    finally:
        stop.set()
