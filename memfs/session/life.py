"""What every kind of session does around its stores (``SessionLife``): its root made if
missing, its state file (``memfs session stop`` and ``status`` read it), and its outcome (the
problems and notes logged and left for ``stop``, the exit code). ``memfs.session.runner`` (one
mount) and ``memfs.session.synced`` (synced directories) build on it.

Invariant: the state file names this process while it runs, and is removed at the end only when
there is nothing left to tell.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from memfs.mount.statedir import MountError
from memfs.session.plan import MountPlan
from memfs.session.state import SessionState
from memfs.session.teardown import EXIT_FAILED, EXIT_OK

log = logging.getLogger(__name__)


class SessionLife:
    """The root, the state file and the outcome of one session (module docstring)."""

    def __init__(
        self,
        plans: list[MountPlan],
        *,
        root: Path,
        session_id: str,
        state_file: Path,
        log_file: str | None,
    ) -> None:
        self._plans = plans
        self._root = root
        self._session_id = session_id
        self._state_file = state_file
        self._log_file = log_file
        self._created_root = False
        self._problems: list[str] = []
        self._notes: list[str] = []  # what a stop tells that is no problem (``stop_notes``)

    def _make_root(self) -> None:
        """The root, made if missing (and then removed at the end: ``_created_root``)."""
        if self._root.exists():
            return
        try:
            self._root.mkdir(parents=True)
        except OSError as exc:
            raise MountError(f"cannot create the session root {self._root}: {exc}") from None
        self._created_root = True

    def _write_state(self, status: str) -> None:
        state = SessionState(
            pid=os.getpid(),
            root=str(self._root),
            session_id=self._session_id,
            status=status,
            mounts=[plan.to_json() for plan in self._plans],
            problems=list(self._problems),
            notes=list(self._notes),
            log_file=self._log_file,
            created_root=self._created_root,
        )
        try:
            state.write(self._state_file)
        except OSError as exc:
            log.warning("cannot write session state %s: %s", self._state_file, exc)

    def _outcome(self, done: str) -> int:
        """The end: problems and notes logged, and left in the state file for ``memfs session
        stop`` to tell (else the state file goes); the exit code. ``done``: what a clean end
        says."""
        for problem in self._problems:
            log.error("%s", problem)
        for note in self._notes:
            log.warning("%s", note)
        if self._problems or self._notes:
            self._write_state("stopped")
        if self._problems:
            return EXIT_FAILED
        if not self._notes:
            self._state_file.unlink(missing_ok=True)
        log.info("session %s stopped; %s", self._session_id, done)
        return EXIT_OK
