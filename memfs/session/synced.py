"""A session without FUSE: every store kept in step as a directory ROOT/<slug> (``memfs sync``).

Where the session cannot mount (no ``/dev/fuse``, no right to mount, no pyfuse3: the default
container, macOS), ``memfs session`` lays its stores out as synced directories instead: the same
layout, one ``memfs.sync.runner.SyncRun`` per store, all in this process and one trio run. The
session's signals (SIGTERM, SIGINT, SIGHUP: ``memfs session stop``) end every sync together,
each with its last pass, its uploads and its report, which become the stop report as a mount's
unmount report does (``memfs.session.runner.stop_report``). One status document for the whole
session is published where ``memfs session status`` reads a mount's (one section per store),
and each directory's own where ``memfs status ROOT/<slug>`` finds it.

At the end the copies go, as a mount's files go with it: each file still as it was when last in
step with the store is removed, then every directory left empty and ROOT if this session made
it. Anything else stays — a file the store refused, a local-only name, one changed after the
last upload — and the stop report names it: nothing a program wrote is removed unsaved.

Invariants:
- a copy is removed only if its content is the store's (its size, mtime and inode are those the
  sync's basis recorded when both sides agreed), and never through a link;
- ROOT is removed with ``rmdir`` only: never a recursive delete.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import trio

from memfs.mount.options import StoreSpec
from memfs.mount.statedir import MountError, state_path
from memfs.mount.status import StatusWriter, collect_mount
from memfs.session.life import SessionLife
from memfs.session.plan import MountPlan
from memfs.session.teardown import remove_dir, sd_notify, stop_report
from memfs.sync.descriptions import DESCRIPTIONS_PATH
from memfs.sync.localdir import MARKER, Seen
from memfs.sync.runner import SyncOptions, SyncRun

log = logging.getLogger(__name__)


class SyncedSession(SessionLife):
    """A session's stores as synced directories under ROOT (module docstring)."""

    def __init__(
        self,
        plans: list[MountPlan],
        specs: list[StoreSpec],
        *,
        root: Path,
        session_id: str,
        state_file: Path,
        log_file: str | None = None,
        cache_dir: str | None = None,
    ) -> None:
        super().__init__(
            plans, root=root, session_id=session_id, state_file=state_file, log_file=log_file
        )
        self._stopping = trio.Event()
        self._writer: StatusWriter | None = None
        self._ready_count = 0
        self._all_ready = trio.Event()
        self._runs = [
            SyncRun(
                SyncOptions(spec=spec, directory=root / spec.slug, cache_dir=cache_dir),
                self._one_ready,
                stopping=self._stopping,
            )
            for spec in specs
        ]

    def _one_ready(self, message: str) -> None:
        if message != "ok":
            return
        self._ready_count += 1
        if self._ready_count == len(self._runs):
            self._all_ready.set()

    async def run(self, *, ready: Callable[[], None] | None = None) -> int:
        """Keep every store in step under ROOT, call ``ready`` once all are, until a signal;
        then end every sync, remove the copies, return the exit code. MountError (after undoing
        everything) if a store cannot be synced."""
        self._make_root()
        self._write_state("starting")
        log.info("session %s: its stores are directories kept in step", self._session_id)
        failures: list[str] = []
        writer = self._writer = StatusWriter(state_path(str(self._root), "status"), self._status)
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._signals, signals)
                await nursery.start(writer.run)
                async with trio.open_nursery() as syncs:
                    for run in self._runs:
                        syncs.start_soon(self._run_one, run, failures)
                    syncs.start_soon(self._when_ready, ready)
                nursery.cancel_scope.cancel()
        with trio.CancelScope(shield=True):
            sd_notify("STOPPING=1")
            self._write_state("stopping")
            await trio.to_thread.run_sync(self._teardown)
        if failures and self._ready_count < len(self._runs):
            self._state_file.unlink(missing_ok=True)
            raise MountError("; ".join(failures))
        return self._outcome("every store uploaded, its copies removed")

    async def _run_one(self, run: SyncRun, failures: list[str]) -> None:
        try:
            await run.run()
        except MountError as exc:
            failures.append(f"{run.options.spec.slug}: {exc}")
            self._stopping.set()  # one store that cannot be synced stops the session's start

    async def _when_ready(self, ready: Callable[[], None] | None) -> None:
        """Once every store is in step (unless the session stops first): ``ready``."""
        async with trio.open_nursery() as race:
            race.start_soon(_then_cancel, self._stopping.wait, race.cancel_scope)
            race.start_soon(_then_cancel, self._all_ready.wait, race.cancel_scope)
        if not self._all_ready.is_set() or self._stopping.is_set():
            return
        self._write_state("running")
        if self._writer is not None:  # `memfs session status` sees every store at once
            with contextlib.suppress(OSError):
                self._writer.write()
        log.info(
            "session %s: %d stores in step under %s, by this process (pid %d)",
            self._session_id,
            len(self._runs),
            self._root,
            os.getpid(),
        )
        sd_notify("READY=1")
        try:
            if ready is not None:
                ready()
        except OSError as exc:
            self._problems.append(str(exc))
            self._stopping.set()

    async def _signals(self, signals: AsyncIterator[int]) -> None:
        async for signum in signals:
            log.info("%s: ending every sync of the session", signal.Signals(signum).name)
            self._stopping.set()

    def _status(self) -> dict[str, Any]:
        sections = []
        for run in self._runs:
            doc = run.status()
            if doc is not None:
                sections.append(doc | {"slug": run.options.spec.slug, "failed": None})
        return collect_mount(sections, {}, None, mountpoint=str(self._root))

    # -- the end --------------------------------------------------------------------------

    def _teardown(self) -> None:
        """The syncs' reports as the stop report; the copies in step removed (blocking)."""
        for run in self._runs:
            directory = run.directory
            if run.report is not None:
                self._problems += stop_report(directory, run.report)
            if run.engine is not None:
                self._problems += remove_copies(run.engine.local.root, run.engine.basis.entries)
        if self._created_root:
            remove_dir(self._root, self._problems)


def remove_copies(directory: Path, agreed: dict[str, Any]) -> list[str]:
    """Remove each file of ``directory`` that is still what the store has (its ``Seen`` is the
    basis's), and the sync's own files (its marker, the descriptions it wrote and took back at
    its last pass), then the directories left empty; one line per file left, saying why."""
    for own in (MARKER, DESCRIPTIONS_PATH):
        with contextlib.suppress(OSError):
            os.unlink(directory / own.lstrip("/"))
    left: list[str] = []
    for dirpath, dirnames, filenames in os.walk(directory, topdown=False):
        for name in filenames:
            local = Path(dirpath) / name
            path = "/" + local.relative_to(directory).as_posix()
            entry = agreed.get(path)
            try:
                info = os.lstat(local)
            except OSError:
                continue
            if entry is not None and Seen.of(info) == entry.seen:
                os.unlink(local)
            else:
                left.append(f"{local}: kept (not in the store as it is here)")
        for name in dirnames:  # not empty (what is left is named), or a link: left alone
            with contextlib.suppress(OSError):
                os.rmdir(Path(dirpath) / name)
    with contextlib.suppress(OSError):
        os.rmdir(directory)
    return left


async def _then_cancel(wait: Callable[[], Any], scope: trio.CancelScope) -> None:
    await wait()
    scope.cancel()
