"""The mount daemon: one process, one FUSE mount, of one store or of several.

``memfs mount`` runs it with one store at the root of its mount; a ``memfs session`` runs it
in its own process with every store of the session, each the directory named by its slug,
beside local scratch (``MountOptions.stores``; ``mount.router`` hands requests to them).

Owns the mount's lifecycle: the startup checks (credentials, stores, mount point), the opening
of the stores (side by side, one task each), ``pyfuse3.init``, the trio nursery (FUSE loop, each
store's write-back queue and change feed in a nursery of its own, signals), the readiness report
to the parent process, the pid file that ``memfs umount`` reads, and the end of the mount,
however it comes: what files still open for writing hold is saved (after a signal's
``syncfs``), then the final flush (bounded), then the unmount report, before the filesystem goes
away (docs/architecture.md, "The end of a mount").

It must not build what it serves (``memfs.mount.assembly``: cores, router, scratch, options),
implement file semantics (the core) or map errnos (``fuse_ops``).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pyfuse3
import trio

from memfs.host.private import replace_file
from memfs.mount import storelog
from memfs.mount.assembly import Assembly
from memfs.mount.busy import sync_mount
from memfs.mount.changefeed import ChangeFeed, choose_source
from memfs.mount.final_flush import FinalFlush
from memfs.mount.fuse_ops import FuseOperations
from memfs.mount.memory import AllocationSites, MemoryReturn
from memfs.mount.opening import (
    open_store,
)
from memfs.mount.options import FINAL_FLUSH_SECONDS, MountOptions, StoreSpec, check_slugs
from memfs.mount.report import mount_report, render_report, report_problems, unmount_report
from memfs.mount.served import ServedStore
from memfs.mount.statedir import MountError, check_mountpoint, is_dead_mount, state_path
from memfs.mount.status import RecentErrors, StatusWriter

log = logging.getLogger(__name__)

# a signal's syncfs (the kernel hands over the pages programs wrote through mappings) waits
# this long at most: the writes it sends are served by this very loop meanwhile
SYNCFS_SECONDS = 5.0


class Daemon:
    """Runs one mount (of one store, or of several with scratch) until it is unmounted or
    signalled."""

    def __init__(self, options: MountOptions, ready: Callable[[str], None]) -> None:
        self.options = options
        self._ready = ready
        self.parts = Assembly(options)  # the stores, router, scratch: what is served
        self._writer: StatusWriter | None = None
        self._stopping = False
        self._report_file = Path("/nonexistent")
        # the flushes of a signal and of the end of the FUSE loop: one at a time, one deadline
        self._flush = FinalFlush(lambda: self.parts.stores, several=self.parts.several)
        self._device: int | None = None  # ``st_dev`` of the mount (its root), once it serves

    async def run(self) -> int:
        opts = self.options
        specs = opts.store_specs()
        if self.parts.several:
            check_slugs(specs)
            storelog.name_stores_in_log()
        check_mountpoint(opts.mountpoint)
        # Each store is opened (resolved, its journal opened and replayed) by a task of its own,
        # side by side, and held open by it until the mount ends: ``closing`` lets them close
        # their journals and clients once it has, each in the task that opened them.
        closing = trio.Event()
        failure: MountError | None = None
        async with trio.open_nursery() as holders:
            try:
                opened: dict[int, ServedStore] = {}
                failures: dict[int, tuple[StoreSpec, MountError]] = {}
                async with trio.open_nursery() as opening:
                    for index, spec in enumerate(specs):
                        slot = index + 1 if self.parts.several else 0
                        opening.start_soon(
                            self._start_store, holders, spec, slot, closing, opened, failures
                        )
                for slot, (spec, exc) in sorted(failures.items()):
                    if not self.parts.several:
                        raise exc
                    # one store failing is one store failing: its directory says so (EIO)
                    self.parts.unavailable[slot] = (spec, str(exc))
                self.parts.stores = [opened[slot] for slot in sorted(opened)]  # in the plan's order
                return await self._mount()
            except MountError as exc:
                failure = exc  # raised below, once every store is closed (not as a group)
            finally:
                closing.set()
        assert failure is not None
        raise failure

    async def _start_store(
        self,
        holders: trio.Nursery,
        spec: StoreSpec,
        slot: int,
        closing: trio.Event,
        opened: dict[int, ServedStore],
        failures: dict[int, tuple[StoreSpec, MountError]],
    ) -> None:
        """Open one store in a task of ``holders`` (``_hold_store``); its outcome by slot."""
        if self.parts.several:
            storelog.CURRENT.set(spec.slug)  # this task's log lines (and its holder's) name it
        try:
            opened[slot] = await holders.start(self._hold_store, spec, slot, closing)
        except MountError as exc:
            failures[slot] = (spec, exc)
            if self.parts.several:
                log.error("store %s cannot be served: %s", spec.slug, exc)

    async def _hold_store(
        self,
        spec: StoreSpec,
        slot: int,
        closing: trio.Event,
        *,
        task_status: trio.TaskStatus[ServedStore],
    ) -> None:
        """Open the store of ``spec`` and replay its journal (before mounting: nobody waits on
        a mount not serving), report it started, hold it open until ``closing``, close it."""
        async with open_store(spec) as store:
            served = self.parts.serve_store(spec, store, slot)
            try:
                if served.journal is not None:
                    await self._replay(served)
                task_status.started(served)
                await closing.wait()
            finally:
                if served.journal is not None:
                    served.journal.close()

    async def _mount(self) -> int:
        opts = self.options
        router = self.parts.router()
        # computed before init: once mounted, a syscall on the mount point from this process
        # would wait for the FUSE loop that has not started yet
        pid_file = state_path(opts.mountpoint, "pid")
        self._report_file = state_path(opts.mountpoint, "report.json")
        self._report_file.unlink(missing_ok=True)  # an earlier daemon's: not ours to leave
        status_file = state_path(opts.mountpoint, "status")
        try:
            pyfuse3.init(FuseOperations(router), opts.mountpoint, self.parts.fuse_options())
        except RuntimeError as exc:
            raise MountError(f"cannot mount on {opts.mountpoint}: {exc}") from None
        replace_file(pid_file, f"{os.getpid()}\n{opts.mountpoint}\n".encode(), "pid file")
        for served in self.parts.stores:
            where = os.path.join(opts.mountpoint, served.spec.slug)
            ro = " read-only" if served.read_only else ""
            log.info("mounted store %s on %s%s", served.store.described, where, ro)
        unmounted = False
        try:
            async with trio.open_nursery() as nursery:
                errors = RecentErrors()
                logging.getLogger("memfs").addHandler(errors)
                for served in self.parts.stores:
                    await nursery.start(self._run_store, served)
                self._writer = StatusWriter(status_file, lambda: self.parts.status(errors))
                await nursery.start(self._writer.run)
                # removed local-only or refused files: their memory goes back to the system
                # ... and so do cached contents replaced or evicted (every store's: one budget)
                returns = MemoryReturn(
                    self.parts.local_bytes, released=lambda: self.parts.cache_budget.released
                )
                await nursery.start(returns.run)
                sites = AllocationSites.from_environment()  # debugging only
                if sites is not None:
                    await nursery.start(sites.run)
                # started (handlers installed) before "ok": a SIGTERM right after a mount
                # reports ready must flush and unmount, not kill the process
                await nursery.start(self._signals)
                nursery.start_soon(self._learn_device)
                self._ready("ok")
                unmounted = await self._serve() and not self._stopping
                if unmounted and is_dead_mount(opts.mountpoint):  # its connection is gone
                    log.warning(
                        "the kernel connection of %s was aborted; the mount point stays "
                        "disconnected until: memfs umount %s",
                        opts.mountpoint,
                        opts.mountpoint,
                    )
                await self._final_flush()
                nursery.cancel_scope.cancel()
        finally:
            pyfuse3.close(unmount=not unmounted)
            pid_file.unlink(missing_ok=True)
            log.info("unmounted %s", opts.mountpoint)
        return 0

    async def _run_store(
        self, served: ServedStore, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """The background tasks of one store, in a nursery of its own: if one fails, that
        store's tasks end (its subtree keeps answering, from what its core holds, and says so
        in ``memfs status``) and the other stores keep theirs."""
        if self.parts.several:
            storelog.CURRENT.set(served.spec.slug)  # its tasks' log lines name it
        started = False
        try:
            async with trio.open_nursery() as nursery:
                await served.core.start(nursery)
                task_status.started()
                started = True
                # the feed starts while the mount serves: its probe and the stream's "ready"
                # (up to 10 s) never delay the mount
                nursery.start_soon(self._start_change_feed, served, nursery)
        except Exception as exc:
            served.failed = f"its background tasks failed: {exc!r}"
            log.exception("store %s: background tasks failed", served.store.described)
            if not started:  # it failed while starting: the mount serves all the same
                task_status.started()

    async def _start_change_feed(self, served: ServedStore, nursery: trio.Nursery) -> None:
        """Choose and start the change feed of a store, then run it in ``nursery``."""
        opts = self.options
        core = served.core
        source = await choose_source(core, nursery, use_stream=opts.change_stream)
        core.feed_starts()  # what was fetched before it is not vouched for
        feed = ChangeFeed(
            core, source, interval=opts.poll_interval, idle_interval=opts.idle_poll_interval
        )
        await nursery.start(feed.run)
        await nursery.start(feed.run_due_invalidations)
        served.feed = feed
        if self._writer is not None:
            with contextlib.suppress(OSError):  # else at the next second
                self._writer.write()  # `memfs status` names the feed at once

    async def _replay(self, served: ServedStore) -> None:
        """Upload what an earlier daemon acknowledged and did not upload (before mounting)."""
        count = served.core.load_journal()
        if not count:
            return
        log.info("replaying %d journal records of an earlier mount of %s", count, served.store.name)
        with trio.move_on_after(FINAL_FLUSH_SECONDS):
            errors = await served.core.flush_all()
            for error in errors:
                log.warning("replay: %s (kept, retried in the background)", error)

    async def _serve(self) -> bool:
        """Run the FUSE loop until the mount ends, however it ends (unmounted, the connection
        aborted, a signal, an error): what is pending is uploaded next all the same. True if
        the kernel connection is gone (a syscall on the mount point cannot wait for us then)."""
        try:
            await pyfuse3.main()
        except Exception as exc:  # an ExceptionGroup of pyfuse3's nursery, or one error
            if not _connection_lost(exc):
                log.error("the FUSE loop failed; flushing before exiting", exc_info=exc)
                return False
            log.warning("the kernel connection ended (%s); flushing before exiting", exc)
        return True

    def _save_open_files(self) -> None:
        """Commit what the files still open for writing hold, in every store, as their close
        would: the mount is ending, and those closes would come too late (ENOTCONN)."""
        for served in self.parts.stores:
            try:
                served.core.save_open_files()
            except Exception:  # one store's trouble is not the others'
                log.exception("saving the open files of %s failed", served.store.described)

    async def _learn_device(self) -> None:
        """Note the mount's device, so that a signal's syncfs reaches this mount only (one
        lazily detached leaves another filesystem at the mount point). From a worker thread:
        the FUSE loop answers the ``stat``."""
        with trio.move_on_after(SYNCFS_SECONDS):
            try:
                info = await trio.to_thread.run_sync(
                    os.stat, self.options.mountpoint, abandon_on_cancel=True
                )
            except OSError as exc:
                log.info("the mount's device is unknown (%s): no syncfs at a signal", exc)
                return
            self._device = info.st_dev

    async def _sync_kernel_pages(self) -> None:
        """``syncfs`` of the mount while it still serves: pages programs wrote through shared
        mappings reach the core as writes before the open files are saved (bounded)."""
        if self._device is None:
            return
        with trio.move_on_after(SYNCFS_SECONDS) as scope:
            await trio.to_thread.run_sync(
                sync_mount, self.options.mountpoint, self._device, abandon_on_cancel=True
            )
        if scope.cancelled_caught:
            log.warning(
                "syncfs of %s did not end within %g s", self.options.mountpoint, SYNCFS_SECONDS
            )

    async def _final_flush(self) -> None:
        """Save the files still open for writing, upload what is left (``FinalFlush``), then write
        the report: once the mount has ended."""
        self._save_open_files()
        await self._flush.run()
        for served in self.parts.stores:
            for line in served.flush_errors:  # the report carries them too
                log.error("%s: %s", served.store.name, line)
        self._write_report()

    def _write_report(self) -> None:
        """Leave the unmount report (``memfs.mount.report.unmount_report``, one section per
        store in a mount of several) for ``memfs umount``."""
        reports = []
        for served in self.parts.stores:
            orphaned = None
            errors = list(served.flush_errors)
            try:
                orphaned = served.core.hand_over()
            except OSError as exc:
                errors.append(
                    f"pending changes not handed over as files (kept in the journal): {exc}"
                )
                log.error("%s", errors[-1])
            slug = served.spec.slug
            reports.append(
                unmount_report(
                    served.core,
                    orphaned=orphaned,
                    errors=errors,
                    mountpoint=os.path.join(self.options.mountpoint, slug),
                    store_name=served.store.name,
                )
                | ({"slug": slug} if self.parts.several else {})
            )
        if self.parts.several:
            reports += [
                {"slug": spec.slug, "store_name": spec.store, "errors": [f"never served: {why}"]}
                for spec, why in self.parts.unavailable.values()
            ]
            report = mount_report(reports, mountpoint=self.options.mountpoint)
        else:
            report = reports[0]
            report["mountpoint"] = self.options.mountpoint
        if report_problems(report):
            log.error("%s", render_report(report).rstrip())
        try:
            report_bytes = json.dumps(report, indent=1).encode("utf-8")
            replace_file(self._report_file, report_bytes, "unmount report", durable=True)
        except OSError as exc:
            log.error("unmount report not written to %s: %s", self._report_file, exc)

    async def _signals(self, *, task_status: trio.TaskStatus[None]) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            task_status.started()
            async for signum in signals:
                log.info("signal %s: flushing and unmounting", signal.Signals(signum).name)
                self._stopping = True
                await self._sync_kernel_pages()
                self._save_open_files()  # again at the final flush: what they write meanwhile
                await self._flush.run()  # while it still serves; ``run`` reports
                pyfuse3.terminate()
                return


def _connection_lost(exc: BaseException) -> bool:
    """True if ``exc`` (or every error of a group) says the kernel connection is gone."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_connection_lost(inner) for inner in exc.exceptions)
    lost = (errno.ECONNABORTED, errno.ENODEV, errno.ENOTCONN)
    return isinstance(exc, OSError) and exc.errno in lost


def run_foreground(options: MountOptions, ready: Callable[[str], None]) -> int:
    daemon = Daemon(options, ready)
    try:
        return trio.run(daemon.run)
    except MountError as exc:
        ready(exc.ready_line())
        log.error("%s", exc)
        return exc.code
