"""``NodeAttr``: what ``stat`` shows of a node of a mount, the fields every tree fills in (the
core's files and directories, ``.versions``, ``.search``, a mount's local scratch). Each tree
subclasses it with its own meaning; the FUSE adapter reads the same fields of every one.

A shared leaf: it must not import anything of memfs.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass


@dataclass(frozen=True)
class NodeAttr:
    ino: int
    mode: int
    nlink: int
    size: int
    uid: int
    gid: int
    atime: float
    mtime: float
    ctime: float
    # times exactly as kept, where a tree keeps nanoseconds (utimens: rsync compares them)
    atime_ns: int | None = None
    mtime_ns: int | None = None
    ctime_ns: int | None = None

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)

    @property
    def nlink_counted(self) -> bool:
        """False while ``nlink`` is a guess the kernel must not keep (see ``core.model.attrs``)."""
        return True
