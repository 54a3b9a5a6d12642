"""A minimal read-only in-memory pyfuse3 + trio filesystem: the floor of a Python FUSE daemon.

A fixture of the ``floor`` and ``write_floor`` benchmark cases, not product code. At start it
copies the tree under SOURCE (directories and regular files, any depth; the benchmark's is two
levels) into memory, mounts it on MOUNTPOINT and serves it with handlers that do as little as
they can. It makes the same choices as memfs on the warm-read path, so a warm read here costs
what pyfuse3, trio and the kernel's FUSE round trips cost, and nothing else:

- ``keep_cache=True`` on every open, so a warm ``read()`` is served from the page cache and the
  daemon only sees OPEN, FLUSH and RELEASE;
- 60 s entry and attribute timeouts (memfs's ``ENTRY_TIMEOUT`` / ``ATTR_TIMEOUT``), so warm
  lookups and stats never reach the daemon;
- ``flush`` and ``release`` are implemented and empty. If they answered ENOSYS, the kernel would
  stop sending them for the whole mount, which memfs cannot allow (it needs per-open handles);
- no writeback cache, and pyfuse3's default mount options (``default_permissions``).

Opening for writing fails with EROFS; any other operation answers ENOSYS (pyfuse3's default).
With ``--writable`` it also takes new directories and new files (``mkdir``, ``create``, ``write``
into memory), the floor of a write loop (the ``write_floor`` case); with ``--journal
FILE`` each ``flush`` of a written file also appends its content to FILE and ``fdatasync``s it,
the least a durable close can cost. It runs in the foreground until the file system is
unmounted (``fusermount3 -u MOUNTPOINT``) or it is interrupted (Ctrl-C, which also unmounts).

usage: python -m bench.floorfs [--writable [--journal FILE]] SOURCE MOUNTPOINT
(``bench.mounted.floorfs`` starts it and unmounts it)
"""

from __future__ import annotations

import argparse
import errno
import os
import stat
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyfuse3
import trio
from pyfuse3 import FileHandleT, FileNameT, FlagT, InodeT

TIMEOUT = 60.0  # seconds the kernel keeps entries and attributes, as memfs


@dataclass
class Node:
    inode: InodeT
    data: bytes | None = None  # None for a directory
    children: dict[bytes, InodeT] = field(default_factory=dict)  # directories: name -> inode

    @property
    def is_dir(self) -> bool:
        return self.data is None


class FloorFs(pyfuse3.Operations):
    """See the module docstring."""

    enable_writeback_cache = False  # as memfs

    def __init__(self, source: Path, *, writable: bool = False, journal: int | None = None) -> None:
        super().__init__()
        self.nodes: dict[int, Node] = {pyfuse3.ROOT_INODE: Node(pyfuse3.ROOT_INODE)}
        self.uid, self.gid, self.time_ns = os.getuid(), os.getgid(), time.time_ns()
        self.writable, self.journal = writable, journal  # journal: an fd opened for appending
        self.dirty: set[int] = set()  # inodes written since their last flush
        self._copy(source, self.nodes[pyfuse3.ROOT_INODE])

    def _copy(self, directory: Path, parent: Node) -> None:
        for path in sorted(directory.iterdir()):
            inode = InodeT(pyfuse3.ROOT_INODE + len(self.nodes))
            if path.is_dir():
                node = Node(inode)
                self.nodes[inode] = node
                self._copy(path, node)
            elif path.is_file():
                self.nodes[inode] = Node(inode, data=path.read_bytes())
            else:
                continue
            parent.children[os.fsencode(path.name)] = inode

    def _node(self, inode: int) -> Node:
        node = self.nodes.get(inode)
        if node is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return node

    def _add(self, parent_inode: InodeT, name: FileNameT, data: bytes | None) -> Node:
        parent = self._node(parent_inode)
        if not self.writable:
            raise pyfuse3.FUSEError(errno.EROFS)
        if name in parent.children:
            raise pyfuse3.FUSEError(errno.EEXIST)
        node = Node(InodeT(pyfuse3.ROOT_INODE + len(self.nodes)), data=data)
        self.nodes[node.inode] = node
        parent.children[name] = node.inode
        return node

    def _attributes(self, node: Node) -> pyfuse3.EntryAttributes:
        out = pyfuse3.EntryAttributes()
        out.st_ino = node.inode
        out.entry_timeout = TIMEOUT
        out.attr_timeout = TIMEOUT
        if node.data is None:
            out.st_mode = stat.S_IFDIR | 0o555
            out.st_nlink = 2
            out.st_size = 4096
        else:
            out.st_mode = stat.S_IFREG | 0o444
            out.st_nlink = 1
            out.st_size = len(node.data)
        out.st_uid, out.st_gid = self.uid, self.gid
        out.st_blksize = 4096
        out.st_blocks = (out.st_size + 511) // 512
        out.st_atime_ns = out.st_mtime_ns = out.st_ctime_ns = self.time_ns
        return out

    async def lookup(
        self, parent_inode: InodeT, name: FileNameT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        inode = self._node(parent_inode).children.get(name)
        if inode is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return self._attributes(self.nodes[inode])

    async def getattr(self, inode: InodeT, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        return self._attributes(self._node(inode))

    async def opendir(self, inode: InodeT, ctx: pyfuse3.RequestContext) -> FileHandleT:
        if not self._node(inode).is_dir:
            raise pyfuse3.FUSEError(errno.ENOTDIR)
        return FileHandleT(inode)

    async def readdir(self, fh: FileHandleT, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        entries = list(self._node(fh).children.items())
        for index in range(start_id, len(entries)):
            name, inode = entries[index]
            attributes = self._attributes(self.nodes[inode])
            if not pyfuse3.readdir_reply(token, name, attributes, index + 1):
                return

    async def releasedir(self, fh: FileHandleT) -> None:
        return None

    async def mkdir(
        self, parent_inode: InodeT, name: FileNameT, mode: int, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        return self._attributes(self._add(parent_inode, name, None))

    async def create(
        self,
        parent_inode: InodeT,
        name: FileNameT,
        mode: int,
        flags: FlagT,
        ctx: pyfuse3.RequestContext,
    ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        node = self._add(parent_inode, name, b"")
        return pyfuse3.FileInfo(fh=FileHandleT(node.inode)), self._attributes(node)

    async def write(self, fh: FileHandleT, off: int, buf: bytes) -> int:
        node = self._node(fh)
        data = node.data or b""
        node.data = data[:off] + buf + data[off + len(buf) :]
        self.dirty.add(fh)
        return len(buf)

    async def open(
        self, inode: InodeT, flags: FlagT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.FileInfo:
        if flags & os.O_ACCMODE != os.O_RDONLY:
            raise pyfuse3.FUSEError(errno.EROFS)
        if self._node(inode).is_dir:
            raise pyfuse3.FUSEError(errno.EISDIR)
        return pyfuse3.FileInfo(fh=FileHandleT(inode), keep_cache=True)

    async def read(self, fh: FileHandleT, off: int, size: int) -> bytes:
        return (self._node(fh).data or b"")[off : off + size]

    async def flush(self, fh: FileHandleT) -> None:
        if self.journal is not None and fh in self.dirty:
            self.dirty.discard(fh)
            os.write(self.journal, self._node(fh).data or b"")
            os.fdatasync(self.journal)
        return None

    async def release(self, fh: FileHandleT) -> None:
        return None

    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        out = pyfuse3.StatvfsData()
        out.f_bsize = out.f_frsize = 4096
        size = sum(len(node.data or b"") for node in self.nodes.values())
        out.f_blocks = (size + 4095) // 4096
        out.f_bfree = out.f_bavail = 0
        out.f_files = len(self.nodes)
        out.f_ffree = out.f_favail = 0
        out.f_namemax = 255
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="directory whose tree is served")
    parser.add_argument("mountpoint", help="an empty directory")
    parser.add_argument("--writable", action="store_true", help="take new directories and files")
    parser.add_argument("--journal", type=Path, help="fdatasync each close's content here")
    args = parser.parse_args(argv)
    journal = None
    if args.journal is not None:
        journal = os.open(args.journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    operations = FloorFs(args.source, writable=args.writable, journal=journal)
    options = set(pyfuse3.default_options) | {"fsname=floorfs", "subtype=floorfs"}
    pyfuse3.init(operations, args.mountpoint, options)
    unmount = True
    try:
        trio.run(pyfuse3.main)
        unmount = False  # pyfuse3.main returns once the file system was unmounted
    except* KeyboardInterrupt:  # Ctrl-C, raised inside pyfuse3.main's nursery
        pass
    finally:
        pyfuse3.close(unmount=unmount)
    return 0


if __name__ == "__main__":
    sys.exit(main())
