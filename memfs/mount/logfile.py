"""The mount daemon's log file: private (0600) and size-bounded (it rotates).

``PrivateRotatingFileHandler`` is a ``RotatingFileHandler`` whose every part, the new one after
each rotation too, is opened by ``memfs.host.private.open_append``: 0600 (logs name stores and
files, and a new part would otherwise get the process's umask), and never through a link or a
hard link planted at its name. Its own module because ``logging.handlers`` costs the CLI ~20 ms
to import: only the daemon needs it.
"""

from __future__ import annotations

import io
import logging.handlers
from pathlib import Path

from memfs.host.private import open_append


class PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A rotating log of ``max_bytes`` a part, ``backups`` old parts kept, each one 0600."""

    def __init__(self, path: Path, what: str, *, max_bytes: int, backups: int) -> None:
        self._what = what
        super().__init__(path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")

    def _open(self) -> io.TextIOWrapper:
        fd = open_append(Path(self.baseFilename), self._what)
        return open(fd, "a", encoding=self.encoding, errors=self.errors)
