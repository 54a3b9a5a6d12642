"""Local-only names: files a mount keeps on the machine and never uploads.

Editors and tools leave swap files, locks, backups and whole repositories (``.git/``) next to the
documents they edit (see ``docs/editors.md`` §2). A path is local-only when one of its
segments matches a pattern here; such files are listed, support full POSIX (symlinks too), are
never uploaded and vanish at unmount.

This module only decides names. It must not know about inodes, the store or FUSE.
"""

from __future__ import annotations

import fnmatch
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass

log = logging.getLogger(__name__)

DEFAULT_PATTERNS: tuple[str, ...] = (
    ".*.sw[a-p]",  # vim / nano swap files
    ".*.swx",  # vim swap probe
    "*~",  # backups (vim, emacs, nano -B)
    ".#*",  # emacs lock
    "#*#",  # emacs auto-save
    "*.kate-swp",
    ".~lock.*#",  # LibreOffice
    "*.crswap",  # Chrome File System Access
)
# A directory name below which everything is local (a git repository inside the mount).
DEFAULT_LOCAL_DIRS: tuple[str, ...] = (".git",)

# vim probes whether it may create files with "4913", then 4913 + 123, 4913 + 246, ... while the
# name exists. The first few of those numbers are local-only; any other numeric name is an
# ordinary file (a short-lived probe never reaches the store anyway: new files are uploaded only
# after they have been closed and left alone, and the probe is unlinked at once).
VIM_PROBES = frozenset(str(4913 + 123 * k) for k in range(8))


@dataclass(frozen=True)
class LocalNames:
    """Decides whether a path is local-only."""

    patterns: tuple[str, ...] = DEFAULT_PATTERNS
    local_dirs: tuple[str, ...] = DEFAULT_LOCAL_DIRS

    @classmethod
    def with_extra(cls, extra: Iterable[str]) -> LocalNames:
        return cls(patterns=DEFAULT_PATTERNS + tuple(extra))

    def __post_init__(self) -> None:
        joined = "|".join(fnmatch.translate(p) for p in self.patterns) or r"(?!)"
        object.__setattr__(self, "_regex", re.compile(joined))

    def is_local_name(self, name: str) -> bool:
        """True if a single name (last segment) is local-only by itself."""
        if name in VIM_PROBES:
            return True
        regex: re.Pattern[str] = self._regex  # type: ignore[attr-defined]
        return regex.match(name) is not None

    def is_local(self, path: str) -> bool:
        """True if ``path`` (``/a/b``) is local-only: its name matches, or a parent is local."""
        segments = path.strip("/").split("/")
        if any(seg in self.local_dirs for seg in segments):
            return True
        return any(self.is_local_name(seg) for seg in segments if seg)
