"""The root of a mount of several stores: the stores' directories laid over local scratch.

``RootOperations`` serves the router's slot 0 in a mount of several stores (a session): the
mount's root directory and everything of ``memfs.mount.scratch`` below it. At the root, each
store is the directory named by its slug (its requests are the store's own operations, in the
store's slot); every other name is scratch. A store's directory cannot be removed or renamed
(EBUSY, as a mount point; ``unlink`` of one is EISDIR), and its name cannot be made again
(EEXIST). Scratch has no extended attributes (ENODATA, and ENOTSUP to set one: never ENOSYS,
which would make the kernel stop asking every store of the mount).

Errnos come from ``memfs.mount.fuse_ops.fail``, the one errno boundary.
"""

from __future__ import annotations

import errno
import logging
import stat
from collections.abc import Sequence
from typing import Any, NoReturn, Protocol

import pyfuse3

from memfs.contract.errors import (
    AttributeNotSupportedError,
    BusyError,
    ExistsError,
    IsDirectoryError,
    NoAttributeError,
    NoEntryError,
    RemoteUnavailableError,
)
from memfs.mount.fuse_ops import (
    ATTR_TIMEOUT,
    ENTRY_TIMEOUT,
    creator,
    fail,
    negative_entry,
)
from memfs.mount.scratch import Scratch, ScratchNode, now_ns

log = logging.getLogger(__name__)


def decode_name_bytes(raw: bytes) -> str:
    """A scratch name as text: any bytes, as on tmpfs (undecodable ones kept as surrogates)."""
    return raw.decode("utf-8", "surrogateescape")


class StoreDirectory(Protocol):
    """What the root needs of a store's operations: its root, and the root's attributes."""

    root_ino: int

    async def getattr(self, inode: int, ctx: Any = None) -> Any: ...


# an open directory's entries: a store's directory (its operations) or a scratch node
Listed = StoreDirectory | ScratchNode


def scratch_entry(node: ScratchNode) -> pyfuse3.EntryAttributes:
    out = pyfuse3.EntryAttributes()
    out.st_ino = node.ino
    out.generation = 0
    out.entry_timeout, out.attr_timeout = ENTRY_TIMEOUT, ATTR_TIMEOUT
    out.st_mode = node.mode
    out.st_nlink = node.links  # 0 once unlinked or removed, while still open (as tmpfs)
    out.st_uid = node.uid
    out.st_gid = node.gid
    out.st_rdev = 0
    out.st_size = node.size
    out.st_blksize = 4096
    out.st_blocks = (node.size + 511) // 512
    out.st_atime_ns = node.atime_ns
    out.st_mtime_ns = node.mtime_ns
    out.st_ctime_ns = node.ctime_ns
    return out


class RootOperations(pyfuse3.Operations):
    """Slot 0 of a mount of several stores (module docstring)."""

    def __init__(self, scratch: Scratch, stores: dict[str, StoreDirectory]) -> None:
        super().__init__()
        self.scratch = scratch
        self.stores = stores  # by slug: the directories at the root
        self.root_ino = scratch.root.ino
        # each open directory: its ``.`` and ``..``, and its entries
        self._dirs: dict[int, tuple[ScratchNode, ScratchNode, list[tuple[str, Listed]]]] = {}
        self._next_dir_fh = scratch.numbers.first

    def _store_named(self, parent: int, name: bytes) -> StoreDirectory | None:
        if parent != self.root_ino:
            return None
        return self.stores.get(decode_name_bytes(name))

    def _refuse_store(self, op: str, parent: int, name: bytes, error: Exception) -> None:
        if self._store_named(parent, name) is not None:
            fail(op, error)

    async def root_entry(self) -> pyfuse3.EntryAttributes:
        """The root's attributes (the ``..`` of each store's directory)."""
        return self._attr(self.scratch.root)

    def _attr(self, node: ScratchNode) -> pyfuse3.EntryAttributes:
        out = scratch_entry(node)
        if node is self.scratch.root:
            out.st_nlink += len(self.stores)  # the stores' directories are subdirectories
        return out

    # -- names and attributes --------------------------------------------------------------

    async def lookup(self, parent_inode: int, name: bytes, ctx: Any = None) -> Any:
        store = self._store_named(parent_inode, name)
        if store is not None:  # its root is never forgotten: no lookup count to keep
            return await store.getattr(store.root_ino, ctx)
        try:
            return self._attr(self.scratch.lookup(parent_inode, decode_name_bytes(name)))
        except NoEntryError:
            return negative_entry()
        except Exception as exc:
            fail("lookup", exc)

    async def getattr(self, inode: int, ctx: Any = None) -> Any:
        try:
            return self._attr(self.scratch.node(inode))
        except Exception as exc:
            fail("getattr", exc)

    async def setattr(self, inode: int, attr: Any, fields: Any, fh: int | None, ctx: Any) -> Any:
        try:
            node = self.scratch.node(inode)
            if fields.update_size:
                self.scratch.set_size(node, attr.st_size)
            self.scratch.set_attributes(
                node,
                mode=attr.st_mode if fields.update_mode else None,
                uid=attr.st_uid if fields.update_uid else None,
                gid=attr.st_gid if fields.update_gid else None,
                atime_ns=attr.st_atime_ns if fields.update_atime else None,
                mtime_ns=attr.st_mtime_ns if fields.update_mtime else None,
            )
            return self._attr(node)
        except Exception as exc:
            fail("setattr", exc)

    async def forget(self, inode_list: Sequence[tuple[int, int]]) -> None:
        for inode, count in inode_list:
            self.scratch.forget(inode, count)

    async def statfs(self, ctx: Any) -> Any:
        out = pyfuse3.StatvfsData()
        for key, value in self.scratch.statfs().items():
            setattr(out, key, value)
        return out

    # -- directories -----------------------------------------------------------------------

    async def opendir(self, inode: int, ctx: Any) -> int:
        try:
            directory = self.scratch.directory(inode)
            listing: list[tuple[str, Listed]] = list(self.scratch.readdir(inode))
            if inode == self.root_ino:
                listing = sorted(listing + list(self.stores.items()), key=lambda kv: kv[0])
        except Exception as exc:
            fail("opendir", exc)
        fh = self._next_dir_fh
        self._next_dir_fh += 1
        self._dirs[fh] = (directory, directory.parent or directory, listing)
        return fh

    async def readdir(self, fh: int, start_id: int, token: Any) -> None:
        """Offsets index the listing taken at ``opendir`` (``.`` and ``..`` are 0 and 1)."""
        try:
            if fh not in self._dirs:
                return
            directory, parent, listing = self._dirs[fh]
            for index in range(start_id, len(listing) + 2):
                if index < 2:  # never counted as a lookup: the kernel takes no reference
                    dot = (directory, b".") if index == 0 else (parent, b"..")
                    if not pyfuse3.readdir_reply(token, dot[1], self._attr(dot[0]), index + 1):
                        return
                    continue
                name, item = listing[index - 2]
                if isinstance(item, ScratchNode):
                    attr = self._attr(item)
                else:
                    attr = await item.getattr(item.root_ino)
                raw = name.encode("utf-8", "surrogateescape")
                if not pyfuse3.readdir_reply(token, raw, attr, index + 1):
                    return
                if isinstance(item, ScratchNode):
                    self.scratch.remember(item)  # readdirplus counts as a lookup
        except Exception as exc:
            fail("readdir", exc)

    async def releasedir(self, fh: int) -> None:
        self._dirs.pop(fh, None)

    async def fsyncdir(self, fh: int, datasync: bool) -> None:
        return  # nothing is ever uploaded from here

    async def mkdir(self, parent_inode: int, name: bytes, mode: int, ctx: Any) -> Any:
        self._refuse_store("mkdir", parent_inode, name, ExistsError("a store's directory"))
        try:
            node = self.scratch.make(
                parent_inode, decode_name_bytes(name), stat.S_IFDIR | mode, self._owner(ctx)
            )
            return self._attr(node)
        except Exception as exc:
            fail("mkdir", exc)

    async def rmdir(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        self._refuse_store("rmdir", parent_inode, name, BusyError("a store's directory"))
        try:
            self.scratch.rmdir(parent_inode, decode_name_bytes(name))
        except Exception as exc:
            fail("rmdir", exc)

    async def unlink(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        self._refuse_store("unlink", parent_inode, name, IsDirectoryError("a store's directory"))
        try:
            self.scratch.unlink(parent_inode, decode_name_bytes(name))
        except Exception as exc:
            fail("unlink", exc)

    async def rename(
        self,
        parent_inode_old: int,
        name_old: bytes,
        parent_inode_new: int,
        name_new: bytes,
        flags: int,
        ctx: Any,
    ) -> None:
        busy = BusyError("a store's directory is never renamed or replaced")
        self._refuse_store("rename", parent_inode_old, name_old, busy)
        self._refuse_store("rename", parent_inode_new, name_new, busy)
        try:
            self.scratch.rename(
                parent_inode_old,
                decode_name_bytes(name_old),
                parent_inode_new,
                decode_name_bytes(name_new),
                flags,
            )
        except Exception as exc:
            fail("rename", exc)

    async def symlink(self, parent_inode: int, name: bytes, target: bytes, ctx: Any) -> Any:
        self._refuse_store("symlink", parent_inode, name, ExistsError("a store's directory"))
        try:
            node = self.scratch.symlink(
                parent_inode, decode_name_bytes(name), target, self._owner(ctx)
            )
            return self._attr(node)
        except Exception as exc:
            fail("symlink", exc)

    async def readlink(self, inode: int, ctx: Any) -> bytes:
        node = self.scratch.nodes.get(inode)
        if node is None or not stat.S_ISLNK(node.mode):
            raise pyfuse3.FUSEError(errno.EINVAL)
        return node.target

    async def link(self, inode: int, new_parent_inode: int, new_name: bytes, ctx: Any) -> Any:
        self._refuse_store("link", new_parent_inode, new_name, ExistsError("a store's directory"))
        try:
            return self._attr(
                self.scratch.link(inode, new_parent_inode, decode_name_bytes(new_name))
            )
        except Exception as exc:
            fail("link", exc)

    async def mknod(self, parent_inode: int, name: bytes, mode: int, rdev: int, ctx: Any) -> Any:
        self._refuse_store("mknod", parent_inode, name, ExistsError("a store's directory"))
        try:
            node = self.scratch.make(parent_inode, decode_name_bytes(name), mode, self._owner(ctx))
            return self._attr(node)
        except Exception as exc:
            fail("mknod", exc)

    def _owner(self, ctx: Any) -> tuple[int, int]:
        owner = creator(ctx)
        return owner if owner is not None else (self.scratch.root.uid, self.scratch.root.gid)

    # -- files -----------------------------------------------------------------------------

    async def open(self, inode: int, flags: int, ctx: Any) -> Any:
        try:
            fh = self.scratch.open(inode, flags)
            return pyfuse3.FileInfo(fh=fh, keep_cache=True, direct_io=False)
        except Exception as exc:
            fail("open", exc)

    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int, ctx: Any) -> Any:
        self._refuse_store("create", parent_inode, name, ExistsError("a store's directory"))
        try:
            fh, node = self.scratch.create(
                parent_inode, decode_name_bytes(name), mode, flags, self._owner(ctx)
            )
            return pyfuse3.FileInfo(fh=fh, keep_cache=True, direct_io=False), self._attr(node)
        except Exception as exc:
            fail("create", exc)

    async def read(self, fh: int, off: int, size: int) -> bytes:
        try:
            return self.scratch.read(fh, off, size)
        except Exception as exc:
            fail("read", exc)

    async def write(self, fh: int, off: int, buf: bytes) -> int:
        try:
            return self.scratch.write(fh, off, buf)
        except Exception as exc:
            fail("write", exc)

    async def flush(self, fh: int) -> None:
        return  # held in memory only: nothing to save

    async def fsync(self, fh: int, datasync: bool) -> None:
        return

    async def release(self, fh: int) -> None:
        self.scratch.release(fh)

    # -- extended attributes: none in scratch (never ENOSYS: see the module docstring) -------

    async def setxattr(self, inode: int, name: bytes, value: bytes, ctx: Any) -> None:
        fail("setxattr", AttributeNotSupportedError("local scratch keeps no extended attributes"))

    async def getxattr(self, inode: int, name: bytes, ctx: Any) -> bytes:
        fail("getxattr", NoAttributeError("local scratch keeps no extended attributes"))

    async def listxattr(self, inode: int, ctx: Any) -> Sequence[bytes]:
        return []

    async def removexattr(self, inode: int, name: bytes, ctx: Any) -> None:
        fail("removexattr", NoAttributeError("local scratch keeps no extended attributes"))


class UnavailableStore(pyfuse3.Operations):
    """The slot of a store that could not be opened when the mount started (not found, key
    refused, server down): its directory is there, empty and read-only, and everything in it
    is EIO with the reason in the log and ``memfs status``; the other stores work."""

    def __init__(self, root_ino: int, reason: str, *, uid: int, gid: int) -> None:
        super().__init__()
        self.root_ino = root_ino
        self.reason = reason
        now = now_ns()
        self.root = ScratchNode(root_ino, stat.S_IFDIR | 0o555, uid, gid, now, now, now, links=2)

    def _unavailable(self, op: str) -> NoReturn:
        fail(op, RemoteUnavailableError(f"this store could not be opened: {self.reason}"))

    async def getattr(self, inode: int, ctx: Any = None) -> Any:
        if inode != self.root_ino:
            self._unavailable("getattr")
        return scratch_entry(self.root)

    async def lookup(self, parent_inode: int, name: bytes, ctx: Any = None) -> Any:
        self._unavailable("lookup")

    async def opendir(self, inode: int, ctx: Any) -> int:
        self._unavailable("opendir")

    async def forget(self, inode_list: Sequence[tuple[int, int]]) -> None:
        return

    # every change in it: EIO (never pyfuse3's ENOSYS, which would make the kernel stop
    # sending that request to the whole mount)

    async def setattr(self, inode: int, attr: Any, fields: Any, fh: int | None, ctx: Any) -> Any:
        self._unavailable("setattr")

    async def mkdir(self, parent_inode: int, name: bytes, mode: int, ctx: Any) -> Any:
        self._unavailable("mkdir")

    async def mknod(self, parent_inode: int, name: bytes, mode: int, rdev: int, ctx: Any) -> Any:
        self._unavailable("mknod")

    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int, ctx: Any) -> Any:
        self._unavailable("create")

    async def symlink(self, parent_inode: int, name: bytes, target: bytes, ctx: Any) -> Any:
        self._unavailable("symlink")

    async def link(self, inode: int, new_parent_inode: int, new_name: bytes, ctx: Any) -> Any:
        self._unavailable("link")

    async def unlink(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        self._unavailable("unlink")

    async def rmdir(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        self._unavailable("rmdir")

    async def rename(
        self,
        parent_inode_old: int,
        name_old: bytes,
        parent_inode_new: int,
        name_new: bytes,
        flags: int,
        ctx: Any,
    ) -> None:
        self._unavailable("rename")

    async def open(self, inode: int, flags: int, ctx: Any) -> Any:
        self._unavailable("open")

    async def getxattr(self, inode: int, name: bytes, ctx: Any) -> bytes:
        fail("getxattr", NoAttributeError("this store could not be opened"))

    async def listxattr(self, inode: int, ctx: Any) -> Sequence[bytes]:
        return []

    async def setxattr(self, inode: int, name: bytes, value: bytes, ctx: Any) -> None:
        self._unavailable("setxattr")

    async def removexattr(self, inode: int, name: bytes, ctx: Any) -> None:
        self._unavailable("removexattr")
