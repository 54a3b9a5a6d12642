"""Local scratch: the names at the root of a mount of several stores that are not stores.

A mount of several stores (a session) shows each store as the directory named by its slug at
the mount's root; every other name there is local scratch, as the container's own disk would
be: files, directories, symbolic links, fifos and sockets that behave as on tmpfs (modes,
owners, times, hard links, rename within scratch), held in the daemon's memory, never
uploaded, gone when the daemon stops. What they hold is charged to a budget of bytes (content,
link targets, and ``NODE_BYTES`` per name): past it, ENOSPC; a truncate to a size that could
never fit it, even in an empty scratch, is EFBIG (a size past the largest file it can hold;
a write is ENOSPC, as on a full tmpfs).

``Scratch`` is the tree (FUSE-free; it raises ``memfs.contract.errors`` exceptions, and
``memfs.mount.fuse_ops`` maps them to errnos, as for the stores); its inode and handle
numbers are the router's slot 0 (``memfs.contract.numbers``). The root directory is the scratch's
own root; ``memfs.mount.root.RootTree`` serves it and lays the stores over it.

Invariants: a node is in ``nodes`` while a directory entry, a kernel lookup or an open handle
holds it (``links``, ``lookups``, ``opens``); ``used`` is the sum of ``_cost`` over the nodes
in ``nodes``; a directory's ``links`` is 2 plus its subdirectories; the root never leaves.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass, field

from memfs.contract import paths
from memfs.contract.errors import (
    DirectoryNotEmptyError,
    ExistsError,
    FileTooLargeError,
    InvalidArgumentError,
    IsDirectoryError,
    NameTooLongError,
    NoEntryError,
    NoSpaceError,
    NotDirectoryError,
    NotPermittedError,
)
from memfs.contract.numbers import NumberRange

NODE_BYTES = 2048  # what a name costs besides its content (as the core's budget counts it)
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2


@dataclass(eq=False)
class ScratchNode:
    """One inode of scratch."""

    ino: int
    mode: int  # with its file type bits
    uid: int
    gid: int
    atime_ns: int
    mtime_ns: int
    ctime_ns: int
    data: bytearray = field(default_factory=bytearray)  # a regular file's content
    target: bytes = b""  # a symbolic link's
    entries: dict[str, ScratchNode] | None = None  # a directory's
    parent: ScratchNode | None = None  # a directory's (its ``..``)
    links: int = 1
    lookups: int = 0
    opens: int = 0

    @property
    def is_dir(self) -> bool:
        return self.entries is not None

    @property
    def size(self) -> int:
        if stat.S_ISLNK(self.mode):
            return len(self.target)
        return len(self.data)


@dataclass
class ScratchHandle:
    node: ScratchNode
    flags: int


def now_ns() -> int:
    return time.time_ns()


def _check_name(name: str) -> None:
    if len(name.encode("utf-8", "surrogateescape")) > paths.MAX_NAME_BYTES:
        raise NameTooLongError(f"name longer than {paths.MAX_NAME_BYTES} bytes")
    if "/" in name or name in ("", ".", ".."):
        raise InvalidArgumentError(f"{name!r} is not a name")


class Scratch:
    """The scratch tree of a mount (module docstring)."""

    def __init__(
        self, numbers: NumberRange, *, budget: int, uid: int, gid: int, mode: int = 0o755
    ) -> None:
        self.numbers = numbers
        self.budget = budget
        self.used = 0
        self.enospc = 0  # ENOSPC answered
        now = now_ns()
        self.root = ScratchNode(
            numbers.first, stat.S_IFDIR | mode, uid, gid, now, now, now, entries={}, links=2
        )
        self.root.parent = self.root
        self.nodes: dict[int, ScratchNode] = {self.root.ino: self.root}
        self.handles: dict[int, ScratchHandle] = {}
        self._next_ino = numbers.first + 1
        self._next_fh = numbers.first

    # -- the budget ----------------------------------------------------------------------------

    @staticmethod
    def _cost(node: ScratchNode) -> int:
        return NODE_BYTES + len(node.data) + len(node.target)

    def _check_size(self, size: int) -> None:
        """EFBIG for a file size that could never fit the budget, whatever is removed."""
        if size + NODE_BYTES > self.budget:
            raise FileTooLargeError(f"{size} bytes never fit local scratch ({self.budget} bytes)")

    def _charge(self, more: int) -> None:
        """Take ``more`` bytes of the budget (ENOSPC past it; a release always succeeds)."""
        if more > 0 and self.used + more > self.budget:
            self.enospc += 1
            raise NoSpaceError(f"local scratch is full ({self.budget} bytes)")
        self.used += more

    # -- lookups ---------------------------------------------------------------------------------

    def node(self, ino: int) -> ScratchNode:
        node = self.nodes.get(ino)
        if node is None:
            raise NoEntryError(f"no scratch inode {ino}")
        return node

    def directory(self, ino: int) -> ScratchNode:
        node = self.node(ino)
        if node.entries is None:
            raise NotDirectoryError("not a directory")
        return node

    def child(self, parent: int, name: str) -> ScratchNode | None:
        if name == ".":
            return self.directory(parent)
        if name == "..":
            return self.directory(parent).parent
        entries = self.directory(parent).entries
        assert entries is not None
        return entries.get(name)

    def lookup(self, parent: int, name: str) -> ScratchNode:
        node = self.child(parent, name)
        if node is None:
            _check_name(name)
            raise NoEntryError(f"{name} does not exist")
        node.lookups += 1
        return node

    def remember(self, node: ScratchNode) -> None:
        node.lookups += 1

    def forget(self, ino: int, count: int) -> None:
        node = self.nodes.get(ino)
        if node is not None:
            node.lookups = max(0, node.lookups - count)
            self._maybe_drop(node)

    def _maybe_drop(self, node: ScratchNode) -> None:
        unreachable = node.links == 0 and node.lookups == 0 and node.opens == 0
        if unreachable and node is not self.root and self.nodes.pop(node.ino, None) is not None:
            self.used -= self._cost(node)

    # -- making and removing names -----------------------------------------------------------

    def _new(
        self, parent: ScratchNode, name: str, mode: int, owner: tuple[int, int]
    ) -> ScratchNode:
        _check_name(name)
        assert parent.entries is not None
        if name in parent.entries:
            raise ExistsError(f"{name} exists")
        self._charge(NODE_BYTES)
        now = now_ns()
        node = ScratchNode(self._next_ino, mode, owner[0], owner[1], now, now, now)
        self._next_ino += 1
        if stat.S_ISDIR(mode):
            node.entries, node.parent, node.links = {}, parent, 2
            parent.links += 1
        self.nodes[node.ino] = node
        parent.entries[name] = node
        parent.mtime_ns = parent.ctime_ns = now
        node.lookups += 1
        return node

    def make(self, parent: int, name: str, mode: int, owner: tuple[int, int]) -> ScratchNode:
        """A new file, directory, fifo or socket (``mode`` says which); devices are EPERM."""
        if stat.S_IFMT(mode) in (stat.S_IFCHR, stat.S_IFBLK):
            raise NotPermittedError("device files are not supported")
        if stat.S_IFMT(mode) == 0:
            mode |= stat.S_IFREG
        return self._new(self.directory(parent), name, mode, owner)

    def symlink(self, parent: int, name: str, target: bytes, owner: tuple[int, int]) -> ScratchNode:
        directory = self.directory(parent)
        self._charge(len(target))
        try:
            node = self._new(directory, name, stat.S_IFLNK | 0o777, owner)
        except BaseException:
            self.used -= len(target)
            raise
        node.target = target
        return node

    def link(self, ino: int, parent: int, name: str) -> ScratchNode:
        node = self.node(ino)
        if node.is_dir:
            raise NotPermittedError("hard links to directories are not allowed")
        directory = self.directory(parent)
        _check_name(name)
        assert directory.entries is not None
        if name in directory.entries:
            raise ExistsError(f"{name} exists")
        directory.entries[name] = node
        node.links += 1
        node.lookups += 1
        node.ctime_ns = directory.mtime_ns = directory.ctime_ns = now_ns()
        return node

    def _unbind(self, directory: ScratchNode, name: str, node: ScratchNode) -> None:
        assert directory.entries is not None
        del directory.entries[name]
        now = now_ns()
        directory.mtime_ns = directory.ctime_ns = node.ctime_ns = now
        if node.is_dir:
            directory.links -= 1
            node.links = 0
        else:
            node.links -= 1
        self._maybe_drop(node)

    def unlink(self, parent: int, name: str) -> None:
        directory = self.directory(parent)
        node = self.child(parent, name)
        if node is None:
            raise NoEntryError(f"{name} does not exist")
        if node.is_dir:
            raise IsDirectoryError("is a directory")
        self._unbind(directory, name, node)

    def rmdir(self, parent: int, name: str) -> None:
        directory = self.directory(parent)
        node = self.child(parent, name)
        if node is None:
            raise NoEntryError(f"{name} does not exist")
        if node.entries is None:
            raise NotDirectoryError("not a directory")
        if node.entries:
            raise DirectoryNotEmptyError(f"{name} is not empty")
        self._unbind(directory, name, node)

    def rename(
        self, old_parent: int, old_name: str, new_parent: int, new_name: str, flags: int
    ) -> None:
        source_dir, target_dir = self.directory(old_parent), self.directory(new_parent)
        node = self.child(old_parent, old_name)
        if node is None or old_name in (".", ".."):
            raise NoEntryError(f"{old_name} does not exist")
        _check_name(new_name)
        assert source_dir.entries is not None and target_dir.entries is not None
        if node.is_dir:  # never into itself or below it
            up: ScratchNode | None = target_dir
            while up is not None and up is not self.root:
                if up is node:
                    raise InvalidArgumentError("a directory cannot move into itself")
                up = up.parent
        existing = target_dir.entries.get(new_name)
        if existing is node:
            return  # the same file under both names: nothing to do
        if flags & RENAME_EXCHANGE:
            if existing is None:
                raise NoEntryError(f"{new_name} does not exist")
            self._exchange(source_dir, old_name, node, target_dir, new_name, existing)
            return
        if existing is not None:
            if flags & RENAME_NOREPLACE:
                raise ExistsError(f"{new_name} exists")
            if existing.is_dir and not node.is_dir:
                raise IsDirectoryError(f"{new_name} is a directory")
            if node.is_dir and not existing.is_dir:
                raise NotDirectoryError(f"{new_name} is not a directory")
            if existing.entries:
                raise DirectoryNotEmptyError(f"{new_name} is not empty")
            self._unbind(target_dir, new_name, existing)
        del source_dir.entries[old_name]
        target_dir.entries[new_name] = node
        if node.is_dir and source_dir is not target_dir:
            source_dir.links -= 1
            target_dir.links += 1
            node.parent = target_dir
        now = now_ns()
        source_dir.mtime_ns = source_dir.ctime_ns = now
        target_dir.mtime_ns = target_dir.ctime_ns = node.ctime_ns = now

    def _exchange(
        self,
        source_dir: ScratchNode,
        old_name: str,
        node: ScratchNode,
        target_dir: ScratchNode,
        new_name: str,
        other: ScratchNode,
    ) -> None:
        for moved, there in ((node, target_dir), (other, source_dir)):
            if moved.is_dir and there is not moved.parent:
                assert moved.parent is not None
                moved.parent.links -= 1
                there.links += 1
                moved.parent = there
        assert source_dir.entries is not None and target_dir.entries is not None
        source_dir.entries[old_name], target_dir.entries[new_name] = other, node
        now = now_ns()
        for changed in (source_dir, target_dir):
            changed.mtime_ns = changed.ctime_ns = now
        node.ctime_ns = other.ctime_ns = now

    def readdir(self, ino: int) -> list[tuple[str, ScratchNode]]:
        directory = self.directory(ino)
        assert directory.entries is not None
        directory.atime_ns = now_ns()
        return sorted(directory.entries.items())

    # -- attributes ------------------------------------------------------------------------------

    def set_size(self, node: ScratchNode, size: int) -> None:
        if node.is_dir:
            raise IsDirectoryError("is a directory")
        if not stat.S_ISREG(node.mode):
            raise InvalidArgumentError("not a regular file")
        self._check_size(size)
        self._charge(size - len(node.data))
        if size < len(node.data):
            del node.data[size:]
        else:
            node.data.extend(b"\0" * (size - len(node.data)))
        node.mtime_ns = node.ctime_ns = now_ns()

    def set_attributes(
        self,
        node: ScratchNode,
        *,
        mode: int | None,
        uid: int | None,
        gid: int | None,
        atime_ns: int | None,
        mtime_ns: int | None,
    ) -> None:
        if mode is not None:
            node.mode = stat.S_IFMT(node.mode) | stat.S_IMODE(mode)
        if uid is not None:
            node.uid = uid
        if gid is not None:
            node.gid = gid
        if atime_ns is not None:
            node.atime_ns = atime_ns
        if mtime_ns is not None:
            node.mtime_ns = mtime_ns
        node.ctime_ns = now_ns()

    # -- open files ------------------------------------------------------------------------------

    def open(self, ino: int, flags: int) -> int:
        node = self.node(ino)
        if node.is_dir:
            raise IsDirectoryError("is a directory")
        if flags & os.O_TRUNC and (flags & os.O_ACCMODE) != os.O_RDONLY:
            self.set_size(node, 0)
        return self._handle(node, flags)

    def create(
        self, parent: int, name: str, mode: int, flags: int, owner: tuple[int, int]
    ) -> tuple[int, ScratchNode]:
        node = self.make(parent, name, stat.S_IFREG | stat.S_IMODE(mode), owner)
        return self._handle(node, flags), node

    def _handle(self, node: ScratchNode, flags: int) -> int:
        fh = self._next_fh
        self._next_fh += 1
        self.handles[fh] = ScratchHandle(node, flags)
        node.opens += 1
        return fh

    def _open(self, fh: int) -> ScratchHandle:
        handle = self.handles.get(fh)
        if handle is None:
            raise InvalidArgumentError(f"no open file {fh}")
        return handle

    def read(self, fh: int, offset: int, size: int) -> bytes:
        node = self._open(fh).node
        node.atime_ns = now_ns()
        return bytes(node.data[offset : offset + size])

    def write(self, fh: int, offset: int, buf: bytes) -> int:
        handle = self._open(fh)
        data = handle.node.data
        if handle.flags & os.O_APPEND:
            offset = len(data)
        end = offset + len(buf)
        self._charge(max(0, end - len(data)))
        if offset > len(data):
            data.extend(b"\0" * (offset - len(data)))
        data[offset:end] = buf
        handle.node.mtime_ns = handle.node.ctime_ns = now_ns()
        return len(buf)

    def release(self, fh: int) -> None:
        handle = self.handles.pop(fh, None)
        if handle is not None:
            handle.node.opens -= 1
            self._maybe_drop(handle.node)

    def statfs(self) -> dict[str, int]:
        block = 4096
        blocks = self.budget // block
        free = max(0, (self.budget - self.used) // block)
        files = self.budget // NODE_BYTES
        return {
            "f_bsize": block,
            "f_frsize": block,
            "f_blocks": blocks,
            "f_bfree": free,
            "f_bavail": free,
            "f_files": files,
            "f_ffree": max(0, files - len(self.nodes)),
            "f_favail": max(0, files - len(self.nodes)),
            "f_namemax": paths.MAX_NAME_BYTES,
        }

    def status(self) -> dict[str, int]:
        """For ``memfs status``: what scratch holds."""
        return {
            "used_bytes": self.used,
            "limit_bytes": self.budget,
            "inodes": len(self.nodes),
            "enospc": self.enospc,
        }
