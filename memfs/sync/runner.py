"""``memfs sync STORE DIR``, the process: a store's core, its change feed, a watcher of DIR and
the engine between them, until a signal (or, with ``--once``, until both sides are in step).

Owns the assembly (the store opened and its journal replayed as a mount does:
``memfs.mount.opening``; the core built with ``memfs.core.build.build_core``, the engine as its
invalidator), the pid and status files that ``memfs status DIR`` and ``memfs umount DIR`` read
(``memfs.mount.statedir``), the end (a last pass, the pending uploads flushed under one
deadline, the report), and the choice of the watcher (``memfs.sync.watch``).

Nothing here imports pyfuse3 (an import-linter contract): this is memfs where FUSE is not.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import trio

from memfs.core import Invalidation, StoreCore, VfsConfig, build_core
from memfs.host.private import private_dir, replace_file
from memfs.mount.changefeed import ChangeFeed, choose_source
from memfs.mount.opening import OpenStore, journals_not_replayed, open_journal, open_store
from memfs.mount.options import FINAL_FLUSH_SECONDS, StoreSpec
from memfs.mount.report import report_problems, unmount_report
from memfs.mount.statedir import MountError, state_path
from memfs.mount.status import RecentErrors, StatusWriter, collect
from memfs.sync.basis import Basis
from memfs.sync.engine import SyncEngine
from memfs.sync.localdir import SYNC_LOCAL_NAMES, LocalDir
from memfs.sync.pidfile import sync_pid, write_pid_file
from memfs.sync.watch import watch_directory
from memfs.writeback.journal import default_cache_dir

log = logging.getLogger(__name__)

EXIT_NOT_SAVED = 1  # something could not be saved: the report names it
RETRY_SECONDS = 10.0  # transient upload failures at the end are retried this long
ONCE_PATIENCE = 120.0  # --once: both sides in step within this, else it ends saying so


@dataclass(frozen=True)
class SyncOptions:
    """What ``memfs sync`` was asked for."""

    spec: StoreSpec
    directory: Path
    once: bool = False
    polling: bool = False  # watch DIR by polling (as where the platform has no file events)
    change_stream: bool = True
    poll_interval: float = 1.0
    rescan_interval: float = 60.0  # the safety net: a full comparison this often
    cache_dir: str | None = None
    cache_mb: float = 64.0
    live_status: bool = False  # a status line on the terminal (stderr), redrawn every second


def sync_report_problems(report: dict[str, Any]) -> bool:
    """Whether something was not saved as meant (exit status 1): as a mount's, or an error."""
    return report_problems(report) or bool(report.get("errors"))


def sync_state_dir(cache_dir: Path, directory: Path) -> Path:
    """Where the sync of ``directory`` keeps its basis and the kept copies of read-only
    changes: the user's cache, one private directory per synced directory."""
    digest = hashlib.sha256(str(directory).encode()).hexdigest()[:16]
    return cache_dir / "sync" / digest


class SyncRun:
    """One ``memfs sync`` process (module docstring)."""

    def __init__(
        self,
        options: SyncOptions,
        ready: Callable[[str], None],
        *,
        stopping: trio.Event | None = None,
    ) -> None:
        """``ready("ok")`` once DIR is in step; ``stopping``: set by the caller to end the run
        (a session's several syncs end together); None: this run ends at SIGTERM, SIGINT or
        SIGHUP."""
        self.options = options
        self._ready = ready
        self._stopping = stopping
        self._status_of: Callable[[], dict[str, Any]] | None = None
        self.engine: SyncEngine | None = None
        self.feed: ChangeFeed | None = None
        self.report: dict[str, Any] | None = None
        self._not_in_step = ""  # --once: why it ends without having been in step

    @property
    def directory(self) -> Path:
        return self.options.directory

    async def run(self) -> int:
        opts = self.options
        directory = self.directory
        if directory.is_symlink() or (directory.exists() and not directory.is_dir()):
            raise MountError(f"{directory} is not a directory")
        directory.mkdir(parents=True, exist_ok=True)
        pid_file = state_path(str(directory), "pid")
        other = sync_pid(pid_file)
        if other is not None and other != os.getpid():
            raise MountError(f"another memfs sync already keeps {directory} in step")
        cache_dir = Path(opts.cache_dir) if opts.cache_dir else default_cache_dir()
        async with open_store(opts.spec) as store:
            read_only = opts.spec.read_only or store.archived
            journal, kept = (None, None) if read_only else open_journal(cache_dir, store, opts.spec)
            try:
                return await self._run_store(store, read_only, journal, kept, cache_dir, pid_file)
            finally:
                if journal is not None:
                    journal.close()

    async def _run_store(
        self,
        store: OpenStore,
        read_only: bool,
        journal: Any,
        kept: Path | None,
        cache_dir: Path,
        pid_file: Path,
    ) -> int:
        opts = self.options
        state_dir = sync_state_dir(cache_dir, self.directory)
        private_dir(state_dir, "sync state directory")
        local = LocalDir(self.directory)
        basis = Basis(state_dir / "basis.json")
        basis.load(local.read_marker())
        local.write_marker(basis.token)
        if basis.store_id not in (None, store.quick.store_id):
            raise MountError(
                f"{self.directory} is kept in step with another store ({basis.store_id}); "
                "sync it again with that store, or choose an empty directory"
            )
        basis.store_id = store.quick.store_id

        async def invalidate(items: list[Invalidation]) -> None:
            if self.engine is not None:
                await self.engine.invalidate(items)

        core: StoreCore = build_core(
            store.quick,
            VfsConfig(
                read_only=read_only,
                update_delay=0.05,  # the engine hands over settled files: no editor to wait for
                new_file_delay=0.05,
                # --once has no change feed to vouch for listings: they hold for its one pass
                listing_ttl=ONCE_PATIENCE if opts.once else 1.0,
                cache_bytes=int(opts.cache_mb * 1024 * 1024),
                local_names=SYNC_LOCAL_NAMES,
            ),
            upload_store=store.uploads,
            journal=journal,
            kept_dir=kept,
            invalidator=invalidate,
        )
        limit = store.quick.capabilities.max_content_bytes or (100 * 1024 * 1024)
        engine = SyncEngine(core, local, basis, max_bytes=limit, kept_dir=state_dir / "kept")
        self.engine = engine
        journals = journals_not_replayed(cache_dir, store)
        replayed = core.load_journal()
        if replayed:
            log.info("replaying %d journal records of an earlier run", replayed)
        errors = RecentErrors()
        logging.getLogger("memfs").addHandler(errors)
        status_file = state_path(str(self.directory), "status")
        self._status_of = lambda: self._status(core, store, errors, journals)
        writer = StatusWriter(status_file, self._status_of)
        write_pid_file(pid_file, self.directory)
        try:
            async with trio.open_nursery() as nursery:
                stopping = self._stopping
                if stopping is None:
                    # from the start: a signal during the first copy ends it the same way
                    stopping = trio.Event()
                    await nursery.start(self._signals, stopping)
                await core.start(nursery)
                if not opts.once:
                    source = await choose_source(core, nursery, use_stream=opts.change_stream)
                    core.feed_starts()
                    self.feed = ChangeFeed(core, source, interval=opts.poll_interval)
                    await nursery.start(self.feed.run)
                    await nursery.start(self.feed.run_due_invalidations)
                await nursery.start(writer.run)
                await nursery.start(engine.run)
                engine.rescan_soon()
                if not opts.once:
                    await nursery.start(watch_directory, self.directory, engine, opts.polling)
                    nursery.start_soon(self._rescans)
                    if opts.live_status:
                        nursery.start_soon(self._status_line, core)
                first = 1
                with trio.move_on_after(ONCE_PATIENCE if opts.once else math.inf):
                    first = await _first_of(engine.idle, stopping.wait)
                if first == 0:  # in step before a signal
                    log.info("%s is in step with %s", self.directory, store.described)
                    self._ready("ok")
                    if not opts.once:
                        await stopping.wait()
                elif not stopping.is_set():
                    self._not_in_step = f"not in step within {ONCE_PATIENCE:.0f} s"
                await self._end(core, store)
                nursery.cancel_scope.cancel()
        finally:
            pid_file.unlink(missing_ok=True)
        assert self.report is not None
        return EXIT_NOT_SAVED if sync_report_problems(self.report) else 0

    def status(self) -> dict[str, Any] | None:
        """The status document of this sync now (None: its store is not open yet)."""
        return self._status_of() if self._status_of is not None else None

    async def _rescans(self) -> None:
        """The safety net: a full comparison every ``rescan_interval`` (stat only where
        nothing changed)."""
        assert self.engine is not None
        while True:
            await trio.sleep(self.options.rescan_interval)
            self.engine.rescan_soon()

    async def _status_line(self, core: StoreCore) -> None:
        """One line on the terminal, redrawn every second: how the sync is doing."""
        assert self.engine is not None
        try:
            while True:
                stats = self.engine.stats
                health = self.feed.health().state if self.feed is not None else "-"
                line = (
                    f"memfs sync {self.directory}: {len(self.engine.basis.entries)} files, "
                    f"{core.pending_uploads} to upload, {stats.uploads} up, "
                    f"{stats.downloads} down, {stats.conflicts} conflicts, feed {health}"
                )
                if stats.not_synced:
                    line += f", {len(stats.not_synced)} stay local"
                sys.stderr.write("\r\x1b[K" + line[:200])
                sys.stderr.flush()
                await trio.sleep(1.0)
        finally:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()

    async def _signals(
        self, stopping: trio.Event, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """SIGTERM, SIGINT, SIGHUP: set ``stopping`` (the end uploads what is pending)."""
        ends = [signal.SIGTERM, signal.SIGINT]
        if hasattr(signal, "SIGHUP"):  # not on Windows
            ends.append(signal.SIGHUP)
        with trio.open_signal_receiver(*ends) as signals:
            task_status.started()
            async for signum in signals:
                log.info(
                    "signal %s: uploading what is pending, then exiting",
                    signal.Signals(signum).name,
                )
                stopping.set()

    async def _end(self, core: StoreCore, store: OpenStore) -> None:
        """A last pass (what was written since the last event), then every pending upload,
        under one deadline; the report."""
        assert self.engine is not None
        errors: list[str] = [self._not_in_step] if self._not_in_step else []
        with trio.move_on_after(FINAL_FLUSH_SECONDS) as scope:
            self.engine.rescan_soon()
            await self.engine.sync_pass()
            for exc in await core.flush_all(patience=RETRY_SECONDS):
                errors.append(str(exc))
        if scope.cancelled_caught:
            errors.append(f"the final upload did not finish within {FINAL_FLUSH_SECONDS:.0f} s")
        report = unmount_report(
            core,
            orphaned=core.hand_over(),
            errors=errors,
            mountpoint=str(self.directory),
            store_name=store.name,
        )
        report["type"] = "memfs_sync_report"
        report["sync"] = self._sync_section()
        self.report = report
        with_problems = sync_report_problems(report)
        try:
            replace_file(
                state_path(str(self.directory), "report.json"),
                json.dumps(report, indent=1).encode("utf-8"),
                "sync report",
                durable=True,
            )
        except OSError as exc:
            log.error("sync report not written: %s", exc)
        if with_problems:
            log.error("not everything was saved: %s", json.dumps(report))

    def _sync_section(self) -> dict[str, Any]:
        assert self.engine is not None
        stats = asdict(self.engine.stats)
        stats["directory"] = str(self.directory)
        stats["watcher"] = "polling" if self.options.polling else "native"
        return stats

    def _status(
        self, core: StoreCore, store: OpenStore, errors: RecentErrors, journals: Any
    ) -> dict[str, Any]:
        doc = collect(
            core,
            self.feed,
            errors,
            mountpoint=str(self.directory),
            store_name=store.name,
            journals=journals,
        )
        doc["sync"] = self._sync_section()
        return doc


async def _first_of(*waits: Callable[[], Awaitable[None]]) -> int:
    """Run ``waits`` side by side; the index of the first to return (the others are
    cancelled)."""
    winner: list[int] = []
    async with trio.open_nursery() as nursery:
        for index, wait in enumerate(waits):

            async def run(index: int = index, wait: Callable[[], Awaitable[None]] = wait) -> None:
                await wait()
                winner.append(index)
                nursery.cancel_scope.cancel()

            nursery.start_soon(run)
    return winner[0]


def run_sync(
    options: SyncOptions, ready: Callable[[str], None]
) -> tuple[int, dict[str, Any] | None]:
    """Run ``memfs sync`` in this process until it ends; its exit status and report."""
    started = time.monotonic()
    run = SyncRun(options, ready)
    try:
        status = trio.run(run.run)
    except MountError as exc:
        ready(exc.ready_line())
        log.error("%s", exc)
        return exc.code, None
    log.info("memfs sync ended after %.1f s", time.monotonic() - started)
    return status, run.report
