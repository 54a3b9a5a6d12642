"""What a synced directory and its store last agreed on, kept on disk across runs.

For each path, the basis is the content both sides had when they were last the same (its
SHA-256) and what the local file looked like then (``Seen``). It is what makes a sync three-way
(``memfs.sync.engine``): a side whose content differs from the basis changed; when both did,
that is a conflict, never a silent overwrite. Without it a restart could not tell a file deleted
here from one created on the server.

Invariants:
- ``entries[p].sha`` is the content of the local file at ``p`` when it was last compared equal
  to the core's, and ``entries[p].seen`` that file's ``Seen`` then;
- a path without an entry was never in step on both sides (new on one side).

The file is written whole (``memfs.host.private.replace_file``: never through a planted link) after
each batch of changes; losing the last write is harmless, since the journal holds every local
change the core accepted and a rescan compares contents where the basis is behind.
"""

from __future__ import annotations

import json
import logging
import secrets
from dataclasses import dataclass
from pathlib import Path

from memfs.host.private import check_private_file, replace_file
from memfs.sync.localdir import Seen

log = logging.getLogger(__name__)

BASIS_VERSION = 1


@dataclass(frozen=True)
class Agreed:
    """A path's basis: the content's SHA-256 and the local file as it was then."""

    sha: str
    seen: Seen


class Basis:
    """The basis of every path (module docstring), loaded from and saved to ``file``."""

    def __init__(self, file: Path) -> None:
        self.file = file
        self.entries: dict[str, Agreed] = {}
        self.store_id: str | None = None
        # the directory the basis is of: the random token of its marker file
        # (``LocalDir.read_marker``). A DIR removed and made again has none (an inode number
        # is no proof: a new directory often gets the old one's), and its missing files are
        # no deletions
        self.token = secrets.token_hex(16)
        self._changed = False

    def load(self, marker: str | None) -> None:
        """Read the file, if there is one, for the directory whose marker says ``marker``; a
        damaged one, or one of another directory (no marker, or another's: ``rm -rf DIR``, a
        session's copies removed at its end), is set aside: a full comparison follows, where
        contents decide and nothing is deleted."""
        if not self.file.exists() and not self.file.is_symlink():
            return  # a first run
        try:
            check_private_file(self.file, "sync state file")
            doc = json.loads(self.file.read_bytes())
            if marker is None or doc.get("token") != marker:
                log.warning(
                    "%s is not the directory last synced (made again?): comparing contents",
                    self.file,
                )
                self._changed = True
                return
            self.store_id, self.token = doc.get("store_id"), marker
            for path, (sha, size, mtime_ns, ino) in doc["files"].items():
                self.entries[path] = Agreed(sha, Seen(size, mtime_ns, ino))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("sync state %s unreadable (%s): comparing contents instead", self.file, exc)
            self.entries.clear()

    def get(self, path: str) -> Agreed | None:
        return self.entries.get(path)

    def agree(self, path: str, sha: str | None, seen: Seen | None) -> None:
        """Both sides hold ``sha`` at ``path`` (None: neither has the file)."""
        if sha is None or seen is None:
            if self.entries.pop(path, None) is not None:
                self._changed = True
            return
        entry = Agreed(sha, seen)
        if self.entries.get(path) != entry:
            self.entries[path] = entry
            self._changed = True

    def save(self) -> None:
        if not self._changed:
            return
        files = {
            path: [e.sha, e.seen.size, e.seen.mtime_ns, e.seen.ino]
            for path, e in sorted(self.entries.items())
        }
        doc = {
            "version": BASIS_VERSION,
            "store_id": self.store_id,
            "token": self.token,
            "files": files,
        }
        try:
            replace_file(self.file, json.dumps(doc).encode("utf-8"), "sync state file")
            self._changed = False
        except OSError as exc:
            log.warning("sync state not saved: %s", exc)
