"""One updating line on a terminal while mount daemons flush: ``memfs umount`` and ``memfs session
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


class FlushProgress:
    """``with FlushProgress("memfs umount", [mountpoint]) as progress:`` call ``progress.update()``
    while waiting; the line is erased when the block ends."""

    def __init__(
        self, command: str, mountpoints: Sequence[str], stream: TextIO | None = None
    ) -> None:
        self.command = command
        self.mountpoints = list(mountpoints)
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self._next = time.monotonic() + SHOW_AFTER
        self._shown = False

    def __enter__(self) -> FlushProgress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def update(self) -> None:
        now = time.monotonic()
        if not self.enabled or now < self._next:
            return
        self._next = now + REFRESH
        left = self.files_left()
        if left is None:
            return
        self.stream.write(f"\r{self.command}: flushing, {left} file(s) left to upload\x1b[K")
        self.stream.flush()
        self._shown = True

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
