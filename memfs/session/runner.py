"""The process of a sandbox session: one mount daemon serving every store of the session.

Given a checked plan (``memfs.session.plan.plan_mounts``), ``SessionRunner`` creates the root if
it does not exist, writes the state file (its pid is this process's: ``memfs session stop``
signals it), and runs the mount daemon (``memfs.mount.daemon.Daemon``) in this process with
every store of the plan: one FUSE mount at the root, each store the directory named by its slug,
every other name there local scratch held in the daemon's memory. On SIGTERM, SIGINT or SIGHUP
the daemon flushes every store (bounded by ``FLUSH_TIMEOUT`` in all), unmounts and leaves its
unmount report, one section per store; the runner turns the report into the stop report
(``stop_report``), removes the root if it created it, and records the outcome in the state file.

There is no watch and no remount: pyfuse3 serves one mount per process, so a daemon that dies
(``kill -9``) takes the whole mount with it. What it had acknowledged to a program (a file
closed, fsynced, renamed, removed) is in each store's write-back journal on disk until the
server has it, and the next ``memfs session`` at the same root detaches the dead mount
(``clean_up_after``) and replays every store's journal before it serves.

The stop report says, once per change, what was not uploaded and in which journal directory it
is kept: it quotes the daemon's unmount report (``memfs.mount.report.unmount_report``, one per
store), never the daemon's log.

Invariants:
- nothing is mounted before the whole plan was checked (the caller's job); a failure while
  starting leaves nothing mounted, and removes the root if this runner created it;
- only a root this runner (or the dead session it cleans up after) created is removed, and only
  with ``rmdir``: after unmounting, scratch is gone with the daemon's memory and the root is
  empty again; a directory that is not empty is reported and kept, never deleted recursively.

It must not talk to the API (the daemon does), nor parse configs or render prompts.
"""

from __future__ import annotations

import json
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import trio

from memfs.host.private import NotPrivateError, check_private_file
from memfs.mount.daemon import Daemon
from memfs.mount.options import FINAL_FLUSH_SECONDS, MountOptions
from memfs.mount.report import REPORT_TYPE
from memfs.mount.statedir import MountError, is_dead_mount, remove_state
from memfs.mount.statedir import state_path as daemon_state_path
from memfs.session.access import StoreAccess as StoreAccess
from memfs.session.access import store_spec as store_spec
from memfs.session.life import SessionLife
from memfs.session.plan import MountPlan
from memfs.session.teardown import (
    UNUPLOADED_NOTE,
    lazy_unmount,
    remove_dir,
    sd_notify,
    stop_notes,
    stop_report,
)

log = logging.getLogger(__name__)

FLUSH_TIMEOUT = FINAL_FLUSH_SECONDS  # seconds for the daemon's final flush of every store


class SessionRunner(SessionLife):
    """Serves a session's stores from one daemon in this process, then tears down (module
    docstring)."""

    def __init__(
        self,
        plans: list[MountPlan],
        options: MountOptions,
        *,
        session_id: str,
        state_file: Path,
        log_file: str | None = None,
    ) -> None:
        super().__init__(
            plans,
            root=Path(options.mountpoint),
            session_id=session_id,
            state_file=state_file,
            log_file=log_file,
        )
        self._options = options
        self._ready_failure: str | None = None  # the caller's ``ready`` failed: stop at once
        self._served = False  # the daemon said every store answers

    # -- the whole life -------------------------------------------------------------------

    async def run(self, *, ready: Callable[[], None] | None = None) -> int:
        """Serve the stores, call ``ready`` once they answer, serve until a signal, tear down;
        return the exit code. ``ready`` may raise ``OSError``: the session stops at once.

        Raises MountError (after undoing everything) when the daemon cannot start.
        """
        self._make_root()
        self._write_state("starting")

        def on_ready(message: str) -> None:
            if message != "ok":
                return  # the daemon raises the MountError that says why
            self._served = True
            self._write_state("running")
            log.info(
                "session %s: %d stores served under %s by this process (pid %d)",
                self._session_id,
                len(self._plans),
                self._root,
                os.getpid(),
            )
            sd_notify("READY=1")
            try:
                if ready is not None:
                    ready()
            except OSError as exc:
                # the daemon's own signal handlers are installed: this stops it as a stop does
                self._ready_failure = str(exc)
                os.kill(os.getpid(), signal.SIGTERM)

        daemon = Daemon(self._options, on_ready)
        failure: MountError | None = None
        # A signal before the daemon's own handlers are installed (while it opens the stores and
        # replays their journals) cancels the start; later ones are the daemon's to handle, and
        # one more while it flushes is only logged (the flush has its own deadline).
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._early_signals, signals, nursery.cancel_scope)
                try:
                    await daemon.run()
                except MountError as exc:
                    failure = exc
                finally:
                    nursery.cancel_scope.cancel()
            if not self._served and failure is None:
                failure = MountError("stopped by a signal before every store was served")
            with trio.CancelScope(shield=True):
                sd_notify("STOPPING=1")
                self._write_state("stopping")
                await trio.to_thread.run_sync(self._teardown)
        if failure is not None:
            for problem in self._problems:
                log.error("%s", problem)
            self._state_file.unlink(missing_ok=True)
            raise failure
        if self._ready_failure is not None:
            self._problems.insert(0, self._ready_failure)
        return self._outcome("every store flushed and unmounted")

    async def _early_signals(self, signals: AsyncIterator[int], scope: trio.CancelScope) -> None:
        async for signum in signals:
            name = signal.Signals(signum).name
            if not self._served:
                log.info("received %s before every store was served: stopping", name)
                scope.cancel()
                return
            log.warning("received %s again: already stopping (at most %g s)", name, FLUSH_TIMEOUT)

    # -- the end --------------------------------------------------------------------------

    def _teardown(self) -> None:
        """After the daemon: its report as the stop report, then the root (blocking)."""
        root = str(self._root)
        if self._served:
            self._problems += self._stop_report()
        if is_dead_mount(root) or os.path.ismount(root):  # the daemon could not unmount it
            lazy_unmount(self._root)
        try:
            remove_state(root, logs=False)
        except MountError as exc:
            log.debug("the daemon's state files of %s not removed: %s", root, exc)
        if self._created_root:
            remove_dir(self._root, self._problems)

    def _stop_report(self) -> list[str]:
        """The daemon's unmount report (one section per store) in words, each change once."""
        path = daemon_state_path(str(self._root), "report.json")
        try:
            check_private_file(path, "unmount report")
            report = json.loads(path.read_bytes())
        except FileNotFoundError:
            return [f"{self._root}: the daemon left no unmount report; every store's "
                    f"{UNUPLOADED_NOTE}"]  # fmt: skip
        except (NotPrivateError, OSError, ValueError) as exc:
            return [f"{self._root}: the unmount report is unreadable ({exc}); {UNUPLOADED_NOTE}"]
        if not isinstance(report, dict) or report.get("type") != REPORT_TYPE:
            return [f"{self._root}: the unmount report is unreadable; {UNUPLOADED_NOTE}"]
        problems: list[str] = []
        for section in report.get("stores") or []:
            mountpoint = section.get("mountpoint") or str(self._root / str(section.get("slug")))
            problems += stop_report(Path(mountpoint), section)
            self._notes += stop_notes(Path(mountpoint), section)
        return problems
