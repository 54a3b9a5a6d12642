"""The pyfuse3 adapter of a mount: kernel requests in, ``memfs.core.Tree`` calls, attributes
and errnos out, for whatever tree the router (``memfs.mount.router``) says serves a number or a
name.

Owns the translation between pyfuse3 types and the trees (names as bytes, ``EntryAttributes``
with the route's timeouts, ``FileInfo``, open directories: readdir offsets, ``.`` and ``..``,
and lookup counting) and the errno boundary: this is the only module that raises
``pyfuse3.FUSEError``. Every handler goes through ``errnos``: memfs errors are mapped with
``memfs.contract.errors.errno_for``; anything unexpected is logged with its traceback and
becomes EIO, because an exception escaping a handler ends ``pyfuse3.main()`` and leaves a dead
mount.

It must not hold filesystem state, decide semantics (the trees do) or ask which tree it talks
to, and must never call the kernel-notification functions (``invalidate_*``) from a handler
(see docs/editors.md §5).
"""

from __future__ import annotations

import errno
import functools
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, NoReturn, ParamSpec, TypeVar

import pyfuse3

from memfs.contract.errors import MemfsError, NoEntryError, errno_for
from memfs.contract.node_attr import NodeAttr
from memfs.core import AttrChange, Listed
from memfs.mount.router import Route, Router, Slot

log = logging.getLogger(__name__)

# "no such name" is cached by the kernel this long (editors and shells probe many names); the
# change feed also drops it at once when the name appears elsewhere
NEGATIVE_TIMEOUT = 1.0

P = ParamSpec("P")
T = TypeVar("T")


def fail(op: str, exc: BaseException) -> NoReturn:
    """Raise the FUSEError for ``exc`` (the one errno boundary)."""
    if isinstance(exc, pyfuse3.FUSEError):
        raise exc
    number = errno_for(exc)
    if isinstance(exc, MemfsError):
        log.debug("%s: %s -> %s", op, exc, errno.errorcode.get(number, number))
    else:
        log.exception("unexpected error in %s; answering EIO", op)
        number = errno.EIO
    raise pyfuse3.FUSEError(number) from None


def errnos(
    handler: Callable[Concatenate[FuseOperations, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[FuseOperations, P], Coroutine[Any, Any, T]]:
    """A handler whose errors leave as the FUSEError of their errno (``fail``)."""

    @functools.wraps(handler)
    async def answer(self: FuseOperations, /, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await handler(self, *args, **kwargs)
        except Exception as exc:
            fail(handler.__name__, exc)

    return answer


def creator(ctx: Any) -> tuple[int, int] | None:
    """The uid and gid a new file belongs to: its creator's, as on any POSIX filesystem."""
    if ctx is None:
        return None
    return int(ctx.uid), int(ctx.gid)


def negative_entry() -> pyfuse3.EntryAttributes:
    """ENOENT that the kernel keeps for ``NEGATIVE_TIMEOUT`` (an inode number of 0)."""
    out = pyfuse3.EntryAttributes()
    out.st_ino = 0
    out.entry_timeout = NEGATIVE_TIMEOUT
    return out


def entry(attr: NodeAttr, route: Route) -> pyfuse3.EntryAttributes:
    """``attr`` as the kernel is told it, kept as long as the route of its tree says."""
    out = pyfuse3.EntryAttributes()
    out.st_ino = attr.ino
    out.generation = 0
    out.entry_timeout, out.attr_timeout = route.entry_timeout, route.attr_timeout
    if not attr.nlink_counted:
        out.attr_timeout = 0  # asked again until the directory is listed and its nlink exact
    out.st_mode = attr.mode
    out.st_nlink = attr.nlink
    out.st_uid = attr.uid
    out.st_gid = attr.gid
    out.st_rdev = 0
    out.st_size = attr.size
    out.st_blksize = 4096
    out.st_blocks = (attr.size + 511) // 512
    out.st_atime_ns = attr.atime_ns if attr.atime_ns is not None else int(attr.atime * 1e9)
    out.st_mtime_ns = attr.mtime_ns if attr.mtime_ns is not None else int(attr.mtime * 1e9)
    out.st_ctime_ns = attr.ctime_ns if attr.ctime_ns is not None else int(attr.ctime * 1e9)
    return out


@dataclass
class OpenDir:
    """A directory listing as ``opendir`` took it: ``.`` and ``..`` (offsets 0 and 1), then
    its entries; ``slot``: whose ``fsyncdir`` it is."""

    slot: Slot
    dots: list[tuple[bytes, pyfuse3.EntryAttributes]]
    entries: Sequence[Listed]


class FuseOperations(pyfuse3.Operations):
    """The mount's ``pyfuse3.Operations`` (module docstring)."""

    supports_dot_lookup = True
    enable_writeback_cache = False
    enable_acl = False

    def __init__(self, router: Router) -> None:
        super().__init__()
        self.router = router
        self._dirs: dict[int, OpenDir] = {}
        self._next_dir_fh = 1  # directory handles: this adapter's own (the kernel keeps them apart)

    def _entry(self, attr: NodeAttr) -> pyfuse3.EntryAttributes:
        return entry(attr, self.router.cache_of(attr.ino))

    async def _dir_entry(self, ino: int) -> pyfuse3.EntryAttributes:
        """A directory's ``.`` or ``..`` entry (no request to the store, no lookup counted)."""
        return self._entry(await self.router.route(ino).tree.dir_attr(ino))

    # -- names and attributes --------------------------------------------------------------

    @errnos
    async def lookup(self, parent_inode: int, name: bytes, ctx: Any = None) -> Any:
        route = self.router.named(parent_inode, name)
        placed = self.router.placed(parent_inode)
        if name == b".." and placed is not None:
            return await self._dir_entry(placed)  # a store's root in a mount of several
        try:
            return self._entry(await route.tree.lookup(parent_inode, route.decode(name)))
        except NoEntryError:
            return negative_entry()

    @errnos
    async def getattr(self, inode: int, ctx: Any = None) -> Any:
        return self._entry(await self.router.route(inode).tree.getattr(inode))

    @errnos
    async def setattr(self, inode: int, attr: Any, fields: Any, fh: int | None, ctx: Any) -> Any:
        change = AttrChange(
            size=attr.st_size if fields.update_size else None,
            mode=attr.st_mode if fields.update_mode else None,
            uid=attr.st_uid if fields.update_uid else None,
            gid=attr.st_gid if fields.update_gid else None,
            atime_ns=attr.st_atime_ns if fields.update_atime else None,
            mtime_ns=attr.st_mtime_ns if fields.update_mtime else None,
        )
        return self._entry(await self.router.route(inode).tree.setattr(inode, change, fh))

    async def forget(self, inode_list: Sequence[tuple[int, int]]) -> None:
        for inode, count in inode_list:
            try:
                self.router.route(inode).tree.forget(inode, count)
            except NoEntryError:
                continue  # a slot no longer served: nothing to forget
            except Exception:
                log.exception("unexpected error in forget")

    @errnos
    async def statfs(self, ctx: Any) -> Any:
        out = pyfuse3.StatvfsData()
        for key, value in (await self.router.statfs_slot().statfs()).items():
            setattr(out, key, value)
        return out

    # -- directories -----------------------------------------------------------------------

    @errnos
    async def opendir(self, inode: int, ctx: Any) -> int:
        route = self.router.route(inode)
        entries = await route.tree.opendir(inode)
        parent = await self._dir_entry(self.router.up(inode, route))
        dots = [(b".", await self._dir_entry(inode)), (b"..", parent)]
        # no await from here on: the handle number is taken and filled at once
        fh = self._next_dir_fh
        self._next_dir_fh += 1
        self._dirs[fh] = OpenDir(self.router.slot(inode), dots, entries)
        return fh

    @errnos
    async def readdir(self, fh: int, start_id: int, token: Any) -> None:
        """Offsets (``start_id``, ``next_id``) index the listing taken at ``opendir``: ``.``
        and ``..`` are 0 and 1, its entries follow, so a listing resumed from any offset the
        kernel was given neither repeats nor skips an entry."""
        listing = self._dirs.get(fh)
        if listing is None:
            return
        dots = listing.dots
        for index in range(start_id, len(dots)):
            dot, dot_attr = dots[index]
            # never counted as a lookup: the kernel does not take a reference for them
            if not pyfuse3.readdir_reply(token, dot, dot_attr, index + 1):
                return
        entries = listing.entries
        for index in range(max(0, start_id - len(dots)), len(entries)):
            listed = entries[index]
            attr = await listed.attr()
            if attr is None:  # gone since the listing was taken
                continue
            next_id = len(dots) + index + 1
            if not pyfuse3.readdir_reply(token, listed.name, self._entry(attr), next_id):
                break
            listed.remember()  # readdirplus counts as a lookup

    async def releasedir(self, fh: int) -> None:
        self._dirs.pop(fh, None)

    @errnos
    async def fsyncdir(self, fh: int, datasync: bool) -> None:
        listing = self._dirs.get(fh)
        if listing is not None:
            await listing.slot.fsyncdir()

    @errnos
    async def mkdir(self, parent_inode: int, name: bytes, mode: int, ctx: Any) -> Any:
        route = self.router.named(parent_inode, name)
        return self._entry(
            await route.tree.mkdir(parent_inode, route.decode(name), mode, creator(ctx))
        )

    @errnos
    async def rmdir(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        route = self.router.named(parent_inode, name)
        await route.tree.rmdir(parent_inode, route.decode(name))

    @errnos
    async def unlink(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        route = self.router.named(parent_inode, name)
        await route.tree.unlink(parent_inode, route.decode(name))

    @errnos
    async def rename(
        self,
        parent_inode_old: int,
        name_old: bytes,
        parent_inode_new: int,
        name_new: bytes,
        flags: int,
        ctx: Any,
    ) -> None:
        self.router.check_rename_flags(flags)
        old = self.router.named(parent_inode_old, name_old)
        new = self.router.named(parent_inode_new, name_new)
        route = self.router.pair("rename", old, parent_inode_old, new, parent_inode_new)
        await route.tree.rename(
            parent_inode_old,
            route.decode(name_old),
            parent_inode_new,
            route.decode(name_new),
            flags,
        )

    @errnos
    async def symlink(self, parent_inode: int, name: bytes, target: bytes, ctx: Any) -> Any:
        route = self.router.named(parent_inode, name)
        return self._entry(
            await route.tree.symlink(parent_inode, route.decode(name), target, creator(ctx))
        )

    @errnos
    async def readlink(self, inode: int, ctx: Any) -> bytes:
        return await self.router.route(inode).tree.readlink(inode)

    @errnos
    async def link(self, inode: int, new_parent_inode: int, new_name: bytes, ctx: Any) -> Any:
        new = self.router.named(new_parent_inode, new_name)
        route = self.router.pair("link", self.router.route(inode), inode, new, new_parent_inode)
        return self._entry(await route.tree.link(inode, new_parent_inode, route.decode(new_name)))

    @errnos
    async def mknod(self, parent_inode: int, name: bytes, mode: int, rdev: int, ctx: Any) -> Any:
        route = self.router.named(parent_inode, name)
        return self._entry(
            await route.tree.mknod(parent_inode, route.decode(name), mode, creator(ctx))
        )

    # -- files -----------------------------------------------------------------------------

    @errnos
    async def open(self, inode: int, flags: int, ctx: Any) -> Any:
        route = self.router.route(inode)
        fh, keep_cache = await route.tree.open(inode, flags)
        return pyfuse3.FileInfo(fh=fh, keep_cache=keep_cache, direct_io=route.direct_io)

    @errnos
    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int, ctx: Any) -> Any:
        route = self.router.named(parent_inode, name)
        fh, keep_cache, attr = await route.tree.create(
            parent_inode, route.decode(name), flags, mode, creator(ctx)
        )
        info = pyfuse3.FileInfo(fh=fh, keep_cache=keep_cache, direct_io=route.direct_io)
        return info, self._entry(attr)

    @errnos
    async def read(self, fh: int, off: int, size: int) -> bytes:
        return await self.router.route(fh).tree.read(fh, off, size)

    @errnos
    async def write(self, fh: int, off: int, buf: bytes) -> int:
        return await self.router.route(fh).tree.write(fh, off, buf)

    @errnos
    async def flush(self, fh: int) -> None:
        await self.router.route(fh).tree.flush(fh)

    @errnos
    async def fsync(self, fh: int, datasync: bool) -> None:
        await self.router.route(fh).tree.fsync(fh)

    @errnos
    async def release(self, fh: int) -> None:
        await self.router.route(fh).tree.release(fh)

    # -- extended attributes: the slot's (a store's: user.description, or ENOSYS) ----------

    @errnos
    async def setxattr(self, inode: int, name: bytes, value: bytes, ctx: Any) -> None:
        await self.router.slot(inode).xattrs.setxattr(inode, name, value)

    @errnos
    async def getxattr(self, inode: int, name: bytes, ctx: Any) -> bytes:
        return await self.router.slot(inode).xattrs.getxattr(inode, name)

    @errnos
    async def listxattr(self, inode: int, ctx: Any) -> Sequence[bytes]:
        return await self.router.slot(inode).xattrs.listxattr(inode)

    @errnos
    async def removexattr(self, inode: int, name: bytes, ctx: Any) -> None:
        await self.router.slot(inode).xattrs.removexattr(inode, name)
