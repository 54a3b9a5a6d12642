"""``NodeAttr``: what ``stat`` shows of a node of a mount, the fields every tree fills in (the
core's files and directories, ``.versions``, ``.search``). Each tree subclasses it, so the FUSE
layer tells the trees apart by type (each has its own cache timeouts) and reads the same fields.

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

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)
