"""File attributes: what ``stat`` shows of a node (``Attr``), and the modes and owners kept
locally (the store has none: docs/semantics.md).

It must not change a node's content or identity, nor decide errnos.
"""

from __future__ import annotations

import stat
import time
from dataclasses import dataclass

from memfs.contract.node_attr import NodeAttr
from memfs.core.model.config import VfsConfig
from memfs.core.model.inodes import InodeTable, Kind, Node


@dataclass(frozen=True)
class Attr(NodeAttr):
    """A node of the core's tree (the store's files and directories); ``atime_ns`` and
    ``mtime_ns`` are client-set times exactly as given."""

    @property
    def nlink_counted(self) -> bool:
        """False for a directory whose subdirectories are not known yet (nlink 1)."""
        return not self.is_dir or self.nlink != 1


@dataclass(frozen=True)
class FileFacts:
    """What a sync needs of a store's file besides ``stat`` (``facts``)."""

    local_only: bool  # a name kept local (memfs.core.model.localfiles): never uploaded
    sha: str | None  # SHA-256 of its content when known without reading it (None: read it)
    description: str | None  # as the core shows it (a pending one first); None: unknown


def facts(node: Node) -> FileFacts:
    """A node's ``FileFacts``: its content's hash is the server's while nothing is pending."""
    pending = node.dirty or node.refused is not None or node.data is not None
    description = node.new_description
    if description is None:
        description = node.description
    return FileFacts(node.local_only, None if pending else node.base_sha, description)


def _exact_ns(seconds: float | None, ns: int | None) -> int | None:
    """``ns`` if it is still the time ``seconds`` stands for (a later write replaces it)."""
    if seconds is None or ns is None or seconds != ns / 1e9:
        return None
    return ns


def set_new_owner(
    node: Node, mode: int | None, owner: tuple[int, int] | None, parent: Attr | None
) -> None:
    """A new node's permission bits and owner, kept locally (None: the mount's defaults).

    In a set-group-ID directory the node takes the directory's group, and a new directory
    keeps the bit (Linux, as on ext4).
    """
    if mode is not None:
        node.mode = stat.S_IMODE(mode)
    if owner is not None:
        node.uid, node.gid = owner
    if parent is not None and parent.mode & stat.S_ISGID:
        node.gid = parent.gid
        if node.is_dir and mode is not None:
            node.mode = stat.S_IMODE(mode) | stat.S_ISGID


def set_mode_and_owner(node: Node, mode: int | None, owner: tuple[int | None, int | None]) -> None:
    """chmod, chown: kept locally like times, never uploaded (a symlink's mode stays 0777)."""
    uid, gid = owner
    if mode is None and uid is None and gid is None:
        return
    if mode is not None and node.kind is not Kind.SYMLINK:
        node.mode = stat.S_IMODE(mode)
    if uid is not None:
        node.uid = uid
    if gid is not None:
        node.gid = gid
    node.ctime = time.time()


def set_times(
    node: Node,
    atime: float | None,
    atime_ns: int | None,
    mtime: float | None,
    mtime_ns: int | None,
) -> None:
    """utimens: times are kept locally, never uploaded (exactly as given: ``Attr.mtime_ns``)."""
    if atime is not None:
        node.atime, node.atime_ns = atime, atime_ns
    if mtime is not None:
        node.mtime, node.mtime_ns = mtime, mtime_ns


class Attributes:
    """The attributes of the nodes of one mount (``of``)."""

    def __init__(self, config: VfsConfig, table: InodeTable) -> None:
        self.config = config
        self.table = table
        self.started = time.time()  # the mtime of a directory nobody changed

    def of(self, node: Node) -> Attr:
        # nlink: 0 once unlinked (an open file, a removed directory); a directory has one link
        # more per subdirectory the mount knows (made here, or listed)
        linked = node.path is not None
        if node.is_dir:
            mode = stat.S_IFDIR | (node.mode if node.mode is not None else self.config.dir_mode)
            nlink = 2 + self.table.subdirs[node.path] if node.path is not None else 0
            if node.path is not None and not node.subdirs_known:
                nlink = 1  # "not counted" (as btrfs says it), never too few: find trusts 2+n
        elif node.kind is Kind.SYMLINK:
            mode = stat.S_IFLNK | 0o777
            nlink = int(linked)
        else:
            mode = stat.S_IFREG | (node.mode if node.mode is not None else self.config.file_mode)
            nlink = int(linked)
        updated = node.updated_at.timestamp() if node.updated_at else node.ctime
        mtime = node.mtime if node.mtime is not None else updated
        if node.is_dir and node.mtime is None:
            mtime = self.started
        return Attr(
            ino=node.ino,
            mode=mode,
            nlink=nlink,
            size=node.size(),
            uid=node.uid if node.uid is not None else self.config.uid,
            gid=node.gid if node.gid is not None else self.config.gid,
            atime=node.atime if node.atime is not None else mtime,
            mtime=mtime,
            ctime=max(node.ctime, updated) if node.kind is Kind.FILE else node.ctime,
            atime_ns=_exact_ns(node.atime, node.atime_ns),
            mtime_ns=_exact_ns(node.mtime, node.mtime_ns),
        )

    def of_path(self, path: str) -> Attr | None:
        node = self.table.by_path.get(path)
        return self.of(node) if node is not None else None
