"""The router of a mount: its ``pyfuse3.Operations``, which hands each kernel request to the
tree that owns the number it names.

Owns the inode and file-handle numbers of the mount: every tree is served in a *slot* of
``memfs.contract.numbers.SLOT`` numbers (a store's files, its ``.search/`` and ``.versions/`` share
the store's slot, in the ranges of ``StoreNumbers.in_slot``), so the slot of a number is the
number shifted right, and a request goes to the operations serving that slot without asking
anyone. A mount of one store serves it in slot 0: the numbers it always had (the root is
inode 1). The trees number in their slot themselves (they were built with its ranges), so the
kernel invalidations a core queues already carry the kernel's numbers.

A request that names two numbers of two slots (a rename or a hard link from one store to
another, or between a store and the local scratch) is EXDEV: ``mv`` copies instead.

It decides no errno itself (``memfs.mount.fuse_ops.fail`` does) and keeps no state of a tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyfuse3

from memfs.contract.errors import CrossDeviceError, InvalidArgumentError, NoEntryError
from memfs.contract.numbers import SLOT
from memfs.mount import storelog
from memfs.mount.fuse_ops import fail

SLOT_BITS = SLOT.bit_length() - 1
# the renameat2 flags a tree may be asked for: RENAME_NOREPLACE (1) and RENAME_EXCHANGE (2).
# Any other (RENAME_WHITEOUT, 4: an overlay filesystem's) is EINVAL here for every tree,
# never a plain rename.
RENAME_FLAGS_SERVED = 1 | 2


def slot_of(number: int) -> int:
    """The slot an inode or handle number belongs to."""
    return number >> SLOT_BITS


class Router(pyfuse3.Operations):
    """The ``pyfuse3.Operations`` of a mount (module docstring)."""

    supports_dot_lookup = True
    enable_writeback_cache = False
    enable_acl = False

    def __init__(self) -> None:
        super().__init__()
        self._slots: dict[int, pyfuse3.Operations] = {}
        self._statfs: pyfuse3.Operations | None = None  # whose figures ``df`` shows
        # a mount of several stores: each slot's store, for the log (``storelog``)
        self._names: dict[int, str | None] | None = None

    def serve(
        self,
        slot: int,
        operations: pyfuse3.Operations,
        *,
        statfs: bool = False,
        name: str | None = None,
    ) -> None:
        """Hand the requests for the numbers of ``slot`` to ``operations``; with ``statfs``,
        statfs too (the kernel names no inode for it); ``name``: the store's, for the log
        lines its requests make (a mount of several stores)."""
        self._slots[slot] = operations
        if name is not None or self._names is not None:
            self._names = (self._names or {}) | {slot: name}
        if statfs or self._statfs is None:
            self._statfs = operations

    def _of(self, op: str, number: int) -> pyfuse3.Operations:
        slot = number >> SLOT_BITS
        operations = self._slots.get(slot)
        if self._names is not None:
            storelog.CURRENT.set(self._names.get(slot))
        if operations is None:
            fail(op, NoEntryError(f"no tree serves number {number}"))
        return operations

    def _same(self, op: str, first: int, second: int) -> pyfuse3.Operations:
        """The operations of two numbers of one request: EXDEV if they are in two trees."""
        if first >> SLOT_BITS != second >> SLOT_BITS:
            fail(op, CrossDeviceError(f"{op} between two stores, or a store and scratch"))
        return self._of(op, first)

    # -- names and attributes --------------------------------------------------------------

    async def lookup(self, parent_inode: int, name: bytes, ctx: Any = None) -> Any:
        return await self._of("lookup", parent_inode).lookup(parent_inode, name, ctx)

    async def getattr(self, inode: int, ctx: Any = None) -> Any:
        return await self._of("getattr", inode).getattr(inode, ctx)

    async def setattr(self, inode: int, attr: Any, fields: Any, fh: int | None, ctx: Any) -> Any:
        return await self._of("setattr", inode).setattr(inode, attr, fields, fh, ctx)

    async def forget(self, inode_list: Sequence[tuple[int, int]]) -> None:
        by_slot: dict[int, list[tuple[int, int]]] = {}
        for inode, count in inode_list:
            by_slot.setdefault(inode >> SLOT_BITS, []).append((inode, count))
        for slot, items in by_slot.items():
            operations = self._slots.get(slot)
            if operations is not None:
                await operations.forget(items)

    async def statfs(self, ctx: Any) -> Any:
        if self._statfs is None:
            fail("statfs", NoEntryError("nothing is served"))
        return await self._statfs.statfs(ctx)

    # -- directories -----------------------------------------------------------------------

    async def opendir(self, inode: int, ctx: Any) -> Any:
        return await self._of("opendir", inode).opendir(inode, ctx)

    async def readdir(self, fh: int, start_id: int, token: Any) -> None:
        await self._of("readdir", fh).readdir(fh, start_id, token)

    async def releasedir(self, fh: int) -> None:
        await self._of("releasedir", fh).releasedir(fh)

    async def fsyncdir(self, fh: int, datasync: bool) -> None:
        await self._of("fsyncdir", fh).fsyncdir(fh, datasync)

    async def mkdir(self, parent_inode: int, name: bytes, mode: int, ctx: Any) -> Any:
        return await self._of("mkdir", parent_inode).mkdir(parent_inode, name, mode, ctx)

    async def rmdir(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        await self._of("rmdir", parent_inode).rmdir(parent_inode, name, ctx)

    async def unlink(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        await self._of("unlink", parent_inode).unlink(parent_inode, name, ctx)

    async def rename(
        self,
        parent_inode_old: int,
        name_old: bytes,
        parent_inode_new: int,
        name_new: bytes,
        flags: int,
        ctx: Any,
    ) -> None:
        if flags & ~RENAME_FLAGS_SERVED:
            fail("rename", InvalidArgumentError(f"renameat2 flags {flags:#x} are not supported"))
        operations = self._same("rename", parent_inode_old, parent_inode_new)
        await operations.rename(parent_inode_old, name_old, parent_inode_new, name_new, flags, ctx)

    async def symlink(self, parent_inode: int, name: bytes, target: bytes, ctx: Any) -> Any:
        return await self._of("symlink", parent_inode).symlink(parent_inode, name, target, ctx)

    async def readlink(self, inode: int, ctx: Any) -> bytes:
        return await self._of("readlink", inode).readlink(inode, ctx)

    async def link(self, inode: int, new_parent_inode: int, new_name: bytes, ctx: Any) -> Any:
        operations = self._same("link", inode, new_parent_inode)
        return await operations.link(inode, new_parent_inode, new_name, ctx)

    async def mknod(self, parent_inode: int, name: bytes, mode: int, rdev: int, ctx: Any) -> Any:
        return await self._of("mknod", parent_inode).mknod(parent_inode, name, mode, rdev, ctx)

    # -- files -----------------------------------------------------------------------------

    async def open(self, inode: int, flags: int, ctx: Any) -> Any:
        return await self._of("open", inode).open(inode, flags, ctx)

    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int, ctx: Any) -> Any:
        return await self._of("create", parent_inode).create(parent_inode, name, mode, flags, ctx)

    async def read(self, fh: int, off: int, size: int) -> bytes:
        return await self._of("read", fh).read(fh, off, size)

    async def write(self, fh: int, off: int, buf: bytes) -> int:
        return await self._of("write", fh).write(fh, off, buf)

    async def flush(self, fh: int) -> None:
        await self._of("flush", fh).flush(fh)

    async def fsync(self, fh: int, datasync: bool) -> None:
        await self._of("fsync", fh).fsync(fh, datasync)

    async def release(self, fh: int) -> None:
        await self._of("release", fh).release(fh)

    # -- extended attributes -----------------------------------------------------------------

    async def setxattr(self, inode: int, name: bytes, value: bytes, ctx: Any) -> None:
        await self._of("setxattr", inode).setxattr(inode, name, value, ctx)

    async def getxattr(self, inode: int, name: bytes, ctx: Any) -> bytes:
        return await self._of("getxattr", inode).getxattr(inode, name, ctx)

    async def listxattr(self, inode: int, ctx: Any) -> Sequence[bytes]:
        return await self._of("listxattr", inode).listxattr(inode, ctx)

    async def removexattr(self, inode: int, name: bytes, ctx: Any) -> None:
        await self._of("removexattr", inode).removexattr(inode, name, ctx)
