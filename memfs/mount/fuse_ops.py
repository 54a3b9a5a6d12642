"""The pyfuse3 adapter of one store: kernel requests in, ``StoreCore`` calls, attributes and
errnos out.

``FuseOperations`` serves the trees of one store (its files, ``.versions/``, ``.search/``) in
the numbers the mount's router handed them (``memfs.contract.numbers``); the router
(``memfs.mount.router``) is the mount's ``pyfuse3.Operations`` and passes it the requests for
those numbers. Owns the translation between pyfuse3 types and the core (names as bytes,
``EntryAttributes``, ``FileInfo``, readdir tokens and lookup counting) and the errno boundary:
this is the only module that raises ``pyfuse3.FUSEError`` (the router's refusals too: ``fail``).
Every handler maps memfs errors with ``memfs.contract.errors.errno_for``; anything unexpected is
logged with its traceback and becomes EIO, because an exception escaping a handler ends
``pyfuse3.main()`` and leaves a dead mount.

It must not hold filesystem state or decide semantics (``vfs`` does) and must never call the
kernel-notification functions (``invalidate_*``) from a handler (see docs/editors.md §5).
"""

from __future__ import annotations

import errno
import logging
import stat
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NoReturn

import pyfuse3

from memfs.contract.errors import (
    AttributeNotSupportedError,
    MemfsError,
    NoAttributeError,
    NoEntryError,
    NotSupportedError,
    errno_for,
)
from memfs.contract.paths import MAX_NAME_BYTES
from memfs.core import Attr, Descriptions, Node, StoreCore, decode_name
from memfs.search.tree import SEARCH_NAME, SearchAttr
from memfs.versions.tree import VERSIONS_NAME, VersionAttr

log = logging.getLogger(__name__)

# The kernel keeps entries and attributes this long without asking (warm stat at local-disk
# speed); the change feed invalidates them at once when the store changes elsewhere.
ENTRY_TIMEOUT = 60.0
ATTR_TIMEOUT = 60.0
# /.versions is never invalidated by the change feed: its entries expire after a second
VERSIONS_TIMEOUT = 1.0
# /.search files are searched anew at each open: the kernel keeps neither their names nor sizes
SEARCH_TIMEOUT = 0.0
# "no such name" is cached by the kernel this long (editors and shells probe many names); the
# change feed also drops it at once when the name appears elsewhere
NEGATIVE_TIMEOUT = 1.0


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


def entry(attr: Attr | VersionAttr | SearchAttr) -> pyfuse3.EntryAttributes:
    out = pyfuse3.EntryAttributes()
    out.st_ino = attr.ino
    out.generation = 0
    if isinstance(attr, VersionAttr):
        out.entry_timeout = out.attr_timeout = VERSIONS_TIMEOUT
    elif isinstance(attr, SearchAttr):
        out.entry_timeout = out.attr_timeout = SEARCH_TIMEOUT
    else:
        out.entry_timeout, out.attr_timeout = ENTRY_TIMEOUT, ATTR_TIMEOUT
    if isinstance(attr, Attr) and not attr.nlink_counted:
        out.attr_timeout = 0  # asked again until the directory is listed and its nlink exact
    out.st_mode = attr.mode
    out.st_nlink = attr.nlink
    out.st_uid = attr.uid
    out.st_gid = attr.gid
    out.st_rdev = 0
    out.st_size = attr.size
    out.st_blksize = 4096
    out.st_blocks = (attr.size + 511) // 512
    atime_ns = attr.atime_ns if isinstance(attr, Attr) else None
    mtime_ns = attr.mtime_ns if isinstance(attr, Attr) else None
    out.st_atime_ns = atime_ns if atime_ns is not None else int(attr.atime * 1e9)
    out.st_mtime_ns = mtime_ns if mtime_ns is not None else int(attr.mtime * 1e9)
    out.st_ctime_ns = int(attr.ctime * 1e9)
    return out


class FuseOperations(pyfuse3.Operations):
    """The operations of one store's trees (module docstring). ``above_root``: the entry of
    the directory holding the store's root, when the store is a subtree of the mount (its
    ``..``); None when the store is the mount's root."""

    def __init__(
        self,
        vfs: StoreCore,
        *,
        above_root: Callable[[], Awaitable[pyfuse3.EntryAttributes]] | None = None,
    ) -> None:
        super().__init__()
        self.vfs = vfs
        self.root_ino = vfs.root_ino
        self.above_root = above_root
        self._dirs: dict[int, list[tuple[str, Node]]] = {}
        self._next_dir_fh = (
            vfs.root_ino
        )  # directory handles: the files' range (memfs.contract.numbers)
        self.versions = vfs.versions  # the read-only /.versions tree: own inodes and handles
        self._vdirs: dict[int, list[tuple[str, int, VersionAttr]]] = {}
        self.search = vfs.search  # the read-only /.search tree: own inodes and handles
        # each open directory's "." and ".." (offsets 0 and 1 of its listing)
        self._dots: dict[int, list[tuple[bytes, pyfuse3.EntryAttributes]]] = {}

    def _in_versions(self, parent: int, name: bytes = b"") -> bool:
        """True for a node of /.versions, or the name .versions in the mount root."""
        if self.versions.owns(parent):
            return True
        return parent == self.root_ino and name == VERSIONS_NAME.encode()

    def _in_search(self, parent: int, name: bytes = b"") -> bool:
        """True for a node of /.search, or the name .search in the mount root."""
        if self.search.owns(parent):
            return True
        return parent == self.root_ino and name == SEARCH_NAME.encode()

    def _refuse_in_trees(self, what: str, *names: tuple[int, bytes]) -> None:
        """Raise EROFS for a change of a (parent, name) in /.versions or /.search."""
        for parent, name in names:
            if self._in_versions(parent, name):
                raise self.versions.refuse(what)
            if self._in_search(parent, name):
                raise self.search.refuse(what)

    # -- names and attributes --------------------------------------------------------------

    async def lookup(self, parent_inode: int, name: bytes, ctx: Any = None) -> Any:
        if name == b".." and parent_inode == self.root_ino and self.above_root is not None:
            return await self.above_root()  # a store's root in a mount of several
        try:
            if self._in_versions(parent_inode, name):
                # names of .versions and .search (queries) are at most 255 bytes
                short = decode_name(name, max_bytes=MAX_NAME_BYTES)
                return entry(await self.versions.lookup(parent_inode, short))
            if self._in_search(parent_inode, name):
                short = decode_name(name, max_bytes=MAX_NAME_BYTES)
                return entry(await self.search.lookup(parent_inode, short))
            return entry(await self.vfs.lookup(parent_inode, decode_name(name)))
        except NoEntryError:
            return negative_entry()
        except Exception as exc:
            fail("lookup", exc)

    async def getattr(self, inode: int, ctx: Any = None) -> Any:
        try:
            if self.versions.owns(inode):
                return entry(await self.versions.getattr(inode))
            if self.search.owns(inode):
                return entry(await self.search.getattr(inode))
            return entry(await self.vfs.getattr(inode))
        except Exception as exc:
            fail("getattr", exc)

    async def setattr(self, inode: int, attr: Any, fields: Any, fh: int | None, ctx: Any) -> Any:
        try:
            if self.versions.owns(inode):
                raise self.versions.refuse("setattr")
            if self.search.owns(inode):
                raise self.search.refuse("setattr")
            size = attr.st_size if fields.update_size else None
            atime_ns = attr.st_atime_ns if fields.update_atime else None
            mtime_ns = attr.st_mtime_ns if fields.update_mtime else None
            return entry(
                await self.vfs.setattr(
                    inode,
                    size=size,
                    atime_ns=atime_ns,
                    mtime_ns=mtime_ns,
                    fh=fh,
                    mode=attr.st_mode if fields.update_mode else None,
                    uid=attr.st_uid if fields.update_uid else None,
                    gid=attr.st_gid if fields.update_gid else None,
                )
            )
        except Exception as exc:
            fail("setattr", exc)

    async def forget(self, inode_list: Sequence[tuple[int, int]]) -> None:
        try:
            for inode, count in inode_list:
                if self.versions.owns(inode):
                    self.versions.forget(inode, count)
                elif self.search.owns(inode):
                    self.search.forget(inode, count)
                else:
                    self.vfs.forget(inode, count)
        except Exception:
            log.exception("unexpected error in forget")

    async def statfs(self, ctx: Any) -> Any:
        try:
            values = await self.vfs.statfs()
            out = pyfuse3.StatvfsData()
            for key, value in values.items():
                setattr(out, key, value)
            return out
        except Exception as exc:
            fail("statfs", exc)

    # -- directories -----------------------------------------------------------------------

    async def opendir(self, inode: int, ctx: Any) -> int:
        try:
            listing: list[tuple[str, Node]] | None = None  # a store directory's
            # a directory of .versions (with attributes) or .search (always empty)
            tree_listing: list[tuple[str, int, VersionAttr]] = []
            if self.versions.owns(inode):
                tree_listing = await self.versions.readdir_attrs(inode)
                up = self.versions.parent_ino(inode)
            elif self.search.owns(inode):
                await self.search.readdir(inode)
                up = None
            else:
                listing = await self.vfs.readdir(inode)
                up = self.vfs.parent_of(inode).ino
            if inode == self.root_ino and self.above_root is not None:
                parent = await self.above_root()  # a store's root in a mount of several
            else:
                parent = await self._dir_entry(self.root_ino if up is None else up)
            dots = [(b".", await self._dir_entry(inode)), (b"..", parent)]
            # no await from here on: the handle number is taken and filled at once
            fh = self._next_dir_fh
            self._next_dir_fh += 1
            self._dots[fh] = dots
            if listing is None:
                self._vdirs[fh] = tree_listing
            else:
                self._dirs[fh] = listing
            return fh
        except Exception as exc:
            fail("opendir", exc)

    async def _dir_entry(self, inode: int) -> pyfuse3.EntryAttributes:
        """The attributes of a directory, for its ``.`` or ``..`` entry (no request: the trees'
        own ``getattr`` may ask the store)."""
        if self.versions.owns(inode):
            return entry(self.versions.attr(self.versions.nodes[inode]))
        if self.search.owns(inode):
            return entry(await self.search.getattr(inode))
        return entry(await self.vfs.getattr(inode))

    async def readdir(self, fh: int, start_id: int, token: Any) -> None:
        """Offsets (``start_id``, ``next_id``) index the listing taken at ``opendir``: ``.``
        and ``..`` are 0 and 1, its entries follow, so a listing resumed from any offset the
        kernel was given neither repeats nor skips an entry."""
        try:
            dots = self._dots.get(fh, [])
            for index in range(start_id, len(dots)):
                dot, dot_attr = dots[index]
                # never counted as a lookup: the kernel does not take a reference for them
                if not pyfuse3.readdir_reply(token, dot, dot_attr, index + 1):
                    return
            start = max(0, start_id - len(dots))
            if fh in self._vdirs:
                self._readdir_versions(fh, start, len(dots), token)
                return
            entries = self._dirs.get(fh, [])
            for index in range(start, len(entries)):
                name, node = entries[index]
                attr = self.vfs.attr(node)
                next_id = len(dots) + index + 1
                if not pyfuse3.readdir_reply(token, name.encode("utf-8"), entry(attr), next_id):
                    break
                self.vfs.remember(node)  # readdirplus counts as a lookup
        except Exception as exc:
            fail("readdir", exc)

    def _readdir_versions(self, fh: int, start: int, before: int, token: Any) -> None:
        entries = self._vdirs[fh]
        for index in range(start, len(entries)):
            name, ino, attr = entries[index]  # taken at opendir: the index may be gone now
            if ino not in self.versions.nodes:
                continue
            next_id = before + index + 1
            if not pyfuse3.readdir_reply(token, name.encode("utf-8"), entry(attr), next_id):
                break
            self.versions.remember(ino)  # readdirplus counts as a lookup

    async def releasedir(self, fh: int) -> None:
        self._dirs.pop(fh, None)
        self._vdirs.pop(fh, None)
        self._dots.pop(fh, None)

    async def fsyncdir(self, fh: int, datasync: bool) -> None:
        try:
            await self.vfs.fsync_dir()
        except Exception as exc:
            fail("fsyncdir", exc)

    async def mkdir(self, parent_inode: int, name: bytes, mode: int, ctx: Any) -> Any:
        try:
            self._refuse_in_trees("mkdir", (parent_inode, name))
            return entry(
                await self.vfs.mkdir(parent_inode, decode_name(name), mode=mode, owner=creator(ctx))
            )
        except Exception as exc:
            fail("mkdir", exc)

    async def rmdir(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        try:
            self._refuse_in_trees("rmdir", (parent_inode, name))
            await self.vfs.rmdir(parent_inode, decode_name(name))
        except Exception as exc:
            fail("rmdir", exc)

    async def unlink(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        try:
            self._refuse_in_trees("unlink", (parent_inode, name))
            await self.vfs.unlink(parent_inode, decode_name(name))
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
        try:
            self._refuse_in_trees(
                "rename", (parent_inode_old, name_old), (parent_inode_new, name_new)
            )
            await self.vfs.rename(
                parent_inode_old,
                decode_name(name_old),
                parent_inode_new,
                decode_name(name_new),
                flags,
            )
        except Exception as exc:
            fail("rename", exc)

    async def symlink(self, parent_inode: int, name: bytes, target: bytes, ctx: Any) -> Any:
        try:
            self._refuse_in_trees("symlink", (parent_inode, name))
            return entry(await self.vfs.symlink(parent_inode, decode_name(name), target))
        except Exception as exc:
            fail("symlink", exc)

    async def readlink(self, inode: int, ctx: Any) -> bytes:
        try:
            if self.versions.owns(inode):
                return await self.versions.readlink(inode)
            if self.search.owns(inode):
                return await self.search.readlink(inode)
            return await self.vfs.readlink(inode)
        except Exception as exc:
            fail("readlink", exc)

    async def link(self, inode: int, new_parent_inode: int, new_name: bytes, ctx: Any) -> Any:
        if self.versions.owns(inode) or self._in_versions(new_parent_inode, new_name):
            fail("link", self.versions.refuse("link"))
        if self.search.owns(inode) or self._in_search(new_parent_inode, new_name):
            fail("link", self.search.refuse("link"))
        try:
            self.vfs.refuse_special("hard links")
        except Exception as exc:
            fail("link", exc)

    async def mknod(self, parent_inode: int, name: bytes, mode: int, rdev: int, ctx: Any) -> Any:
        try:
            self._refuse_in_trees("mknod", (parent_inode, name))
        except Exception as exc:
            fail("mknod", exc)
        try:
            if stat.S_IFMT(mode) not in (0, stat.S_IFREG):  # fifos, sockets, devices
                self.vfs.refuse_special("special files")
            return entry(
                await self.vfs.mknod(parent_inode, decode_name(name), mode=mode, owner=creator(ctx))
            )
        except Exception as exc:
            fail("mknod", exc)

    # -- files -----------------------------------------------------------------------------

    async def open(self, inode: int, flags: int, ctx: Any) -> Any:
        try:
            if self.versions.owns(inode):
                fh, keep_cache = await self.versions.open(inode, flags)
                return pyfuse3.FileInfo(fh=fh, keep_cache=keep_cache, direct_io=False)
            if self.search.owns(inode):
                # direct_io: read to the end whatever the size says, never from the page cache
                fh = await self.search.open(inode, flags)
                return pyfuse3.FileInfo(fh=fh, keep_cache=False, direct_io=True)
            fh, keep_cache = await self.vfs.open(inode, flags)
            return pyfuse3.FileInfo(fh=fh, keep_cache=keep_cache, direct_io=False)
        except Exception as exc:
            fail("open", exc)

    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int, ctx: Any) -> Any:
        try:
            self._refuse_in_trees("create", (parent_inode, name))
            fh, attr = await self.vfs.create(
                parent_inode, decode_name(name), flags, mode=mode, owner=creator(ctx)
            )
            return pyfuse3.FileInfo(fh=fh, keep_cache=False, direct_io=False), entry(attr)
        except Exception as exc:
            fail("create", exc)

    async def read(self, fh: int, off: int, size: int) -> bytes:
        try:
            if self.versions.owns_handle(fh):
                return await self.versions.read(fh, off, size)
            if self.search.owns_handle(fh):
                return await self.search.read(fh, off, size)
            return await self.vfs.read(fh, off, size)
        except Exception as exc:
            fail("read", exc)

    async def write(self, fh: int, off: int, buf: bytes) -> int:
        try:
            if self.versions.owns_handle(fh):
                raise self.versions.refuse("write")
            if self.search.owns_handle(fh):
                raise self.search.refuse("write")
            return await self.vfs.write(fh, off, buf)
        except Exception as exc:
            fail("write", exc)

    async def flush(self, fh: int) -> None:
        try:
            if self.versions.owns_handle(fh) or self.search.owns_handle(fh):
                return
            await self.vfs.flush(fh)
        except Exception as exc:
            fail("flush", exc)

    async def fsync(self, fh: int, datasync: bool) -> None:
        try:
            if self.versions.owns_handle(fh) or self.search.owns_handle(fh):
                return
            await self.vfs.fsync(fh)
        except Exception as exc:
            fail("fsync", exc)

    async def release(self, fh: int) -> None:
        try:
            if self.versions.owns_handle(fh):
                await self.versions.release(fh)
                return
            if self.search.owns_handle(fh):
                await self.search.release(fh)
                return
            await self.vfs.release(fh)
        except Exception as exc:
            fail("release", exc)

    # -- extended attributes: user.description where the store keeps descriptions
    # (memfs.core.ops.descriptions); else ENOSYS, so the kernel stops asking (docs/editors.md §3) --

    def _descriptions(self, op: str, inode: int) -> Descriptions:
        descriptions = self.vfs.descriptions
        if not descriptions.enabled:
            if self.above_root is None:
                fail(op, NotSupportedError("no extended attributes"))
            # one store of several: ENOSYS would stop the kernel asking every store of the mount
            fail(op, AttributeNotSupportedError("this store keeps no extended attributes"))
        if self.versions.owns(inode) or self.search.owns(inode):
            fail(op, NoAttributeError("versions and searches have no extended attributes"))
        return descriptions

    async def setxattr(self, inode: int, name: bytes, value: bytes, ctx: Any) -> None:
        descriptions = self._descriptions("setxattr", inode)
        try:
            # pyfuse3 hands no flags: XATTR_CREATE and XATTR_REPLACE are not told apart
            await descriptions.set(inode, decode_name(name), value)
        except Exception as exc:
            fail("setxattr", exc)

    async def getxattr(self, inode: int, name: bytes, ctx: Any) -> bytes:
        descriptions = self._descriptions("getxattr", inode)
        try:
            return await descriptions.get(inode, decode_name(name))
        except Exception as exc:
            fail("getxattr", exc)

    async def listxattr(self, inode: int, ctx: Any) -> Sequence[bytes]:
        descriptions = self._descriptions("listxattr", inode)
        try:
            return [name.encode() for name in await descriptions.names(inode)]
        except Exception as exc:
            fail("listxattr", exc)

    async def removexattr(self, inode: int, name: bytes, ctx: Any) -> None:
        descriptions = self._descriptions("removexattr", inode)
        try:
            await descriptions.remove(inode, decode_name(name))
        except Exception as exc:
            fail("removexattr", exc)
