"""One updating line on a terminal while a command works (``CountProgress``: ``memfs import``)
or while mount daemons flush (``FlushProgress``): ``memfs umount`` and ``memfs session
stop`` show how many files are left to upload when the final flush takes more than a second.

The count comes from the status documents the daemons keep publishing during their final flush
(``memfs.mount.status``: ``uploads.pending``); nothing is asked of the daemons. When stderr is not
a terminal nothing is written at all: scripts and logs get the commands' usual one-line
messages only.

This module must not stop or signal daemons (its callers do).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from types import TracebackType
from typing import TextIO

SHOW_AFTER = 1.0  # seconds: a quick unmount stays silent
REFRESH = 0.25


class _Line:
    """One line on ``stream`` (stderr) if it is a terminal, shown after ``SHOW_AFTER`` seconds,
    redrawn at most every ``REFRESH``, erased when the ``with`` block ends."""

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self._next = time.monotonic() + SHOW_AFTER
        self._shown = False

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def _due(self) -> bool:
        now = time.monotonic()
        if not self.enabled or now < self._next:
            return False
        self._next = now + REFRESH
        return True

    def _show(self, text: str) -> None:
        self.stream.write(f"\r{text}\x1b[K")
        self.stream.flush()
        self._shown = True


class FlushProgress(_Line):
    """``with FlushProgress("memfs umount", [mountpoint]) as progress:`` call ``progress.update()``
    while waiting; the line is erased when the block ends."""

    def __init__(
        self, command: str, mountpoints: Sequence[str], stream: TextIO | None = None
    ) -> None:
        super().__init__(stream)
        self.command = command
        self.mountpoints = list(mountpoints)

    def __enter__(self) -> FlushProgress:
        return self

    def update(self) -> None:
        if not self._due():
            return
        left = self.files_left()
        if left is not None:
            self._show(f"{self.command}: flushing, {left} file(s) left to upload")

    def files_left(self) -> int | None:
        """Files the daemons still have to upload (None: no daemon publishes its status)."""
        from memfs.mount.statedir import MountError, state_path

        total: int | None = None
        for mountpoint in self.mountpoints:
            try:
                doc = json.loads(state_path(mountpoint, "status").read_text())
                # a mount of several stores (a session) has one section per store
                sections = doc.get("stores") or [doc]
                total = (total or 0) + sum(int(s["uploads"]["pending"]) for s in sections)
            except (MountError, OSError, ValueError, KeyError, TypeError, AttributeError):
                continue
        return total


class CountProgress(_Line):
    """``with CountProgress("memfs import", "written") as progress:`` call
    ``progress.update(done, total)`` as steps finish: ``memfs import: 120/2000 written``."""

    def __init__(self, command: str, verb: str, stream: TextIO | None = None) -> None:
        super().__init__(stream)
        self.command = command
        self.verb = verb

    def __enter__(self) -> CountProgress:
        return self

    def update(self, done: int, total: int) -> None:
        if self._due():
            self._show(f"{self.command}: {done}/{total} {self.verb}")


class PhaseProgress(_Line):
    """``with PhaseProgress("memfs export") as progress:`` call ``progress.update(phase, done,
    total)`` (``total`` None when unknown): ``memfs export: listing versions: 340``,
    ``memfs export: committed: 500/10000``."""

    def __init__(self, command: str, stream: TextIO | None = None) -> None:
        super().__init__(stream)
        self.command = command

    def __enter__(self) -> PhaseProgress:
        return self

    def update(self, phase: str, done: int, total: int | None) -> None:
        if self._due():
            count = f"{done}/{total}" if total is not None else str(done)
            self._show(f"{self.command}: {phase}: {count}")
