"""The root of a mount of several stores: the stores' directories laid over local scratch.

``RootTree`` serves the router's slot 0 in a mount of several stores (a session): the mount's
root directory and everything of ``memfs.mount.scratch`` below it, as a ``memfs.core.Tree``. At
the root, each store is the directory named by its slug (the router hands what is below it to
the store's own slot); every other name is scratch. A store's directory cannot be removed or
renamed (EBUSY, as a mount point; ``unlink`` of one is EISDIR), and its name cannot be made
again (EEXIST). Scratch has no extended attributes (ENODATA, and ENOTSUP to set one: never
ENOSYS, which would make the kernel stop asking every store of the mount).

It decides no errno (``memfs.mount.fuse_ops`` maps the errors it raises).
"""

from __future__ import annotations

import stat
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from memfs.contract.errors import (
    AttributeNotSupportedError,
    BusyError,
    ExistsError,
    InvalidArgumentError,
    IsDirectoryError,
    NoAttributeError,
    RemoteUnavailableError,
)
from memfs.contract.node_attr import NodeAttr
from memfs.contract.numbers import NumberRange
from memfs.core import AttrChange, Listed, Xattrs
from memfs.mount.router import Route, any_name
from memfs.mount.scratch import Scratch, ScratchNode, now_ns


class StoreDirectory(Protocol):
    """What the root needs of a store's slot: its root, and the root's attributes."""

    root_ino: int

    async def getattr(self, ino: int) -> NodeAttr: ...


def scratch_attr(node: ScratchNode, *, links: int = 0) -> NodeAttr:
    """A scratch node's attributes (``links``: more than its own, the root's stores)."""
    return NodeAttr(
        node.ino,
        node.mode,
        node.links + links,  # 0 once unlinked or removed, while still open (as tmpfs)
        node.size,
        node.uid,
        node.gid,
        node.atime_ns / 1e9,
        node.mtime_ns / 1e9,
        node.ctime_ns / 1e9,
        atime_ns=node.atime_ns,
        mtime_ns=node.mtime_ns,
        ctime_ns=node.ctime_ns,
    )


@dataclass(eq=False, slots=True)
class _ListedScratch:
    name: bytes
    node: ScratchNode
    root: RootTree

    async def attr(self) -> NodeAttr | None:
        return self.root.attr(self.node)

    def remember(self) -> None:
        self.root.scratch.remember(self.node)


@dataclass(eq=False, slots=True)
class _ListedStore:
    name: bytes
    store: StoreDirectory

    async def attr(self) -> NodeAttr | None:
        return await self.store.getattr(self.store.root_ino)

    def remember(self) -> None:
        return  # a store's root is never forgotten: no lookup count to keep


class RootTree:
    """Slot 0 of a mount of several stores (module docstring): a tree, and the slot."""

    def __init__(self, scratch: Scratch, stores: dict[str, StoreDirectory]) -> None:
        self.scratch = scratch
        self.stores = stores  # by slug: the directories at the root
        self.root_ino = scratch.root.ino
        self.routes = [(scratch.numbers, Route(self, decode=any_name))]
        self.grafts: dict[bytes, Route] = {}
        self.xattrs: Xattrs = self

    def _store_named(self, parent: int, name: str) -> StoreDirectory | None:
        return self.stores.get(name) if parent == self.root_ino else None

    def _refuse_store(self, parent: int, name: str, error: Exception) -> None:
        if self._store_named(parent, name) is not None:
            raise error

    def attr(self, node: ScratchNode) -> NodeAttr:
        # the stores' directories are subdirectories of the root
        return scratch_attr(node, links=len(self.stores) if node is self.scratch.root else 0)

    def _owner(self, owner: tuple[int, int] | None) -> tuple[int, int]:
        return owner if owner is not None else (self.scratch.root.uid, self.scratch.root.gid)

    # -- names and attributes --------------------------------------------------------------

    async def lookup(self, parent: int, name: str) -> NodeAttr:
        store = self._store_named(parent, name)
        if store is not None:  # its root is never forgotten: no lookup count to keep
            return await store.getattr(store.root_ino)
        return self.attr(self.scratch.lookup(parent, name))

    async def getattr(self, ino: int) -> NodeAttr:
        return self.attr(self.scratch.node(ino))

    async def dir_attr(self, ino: int) -> NodeAttr:
        return self.attr(self.scratch.node(ino))

    async def setattr(self, ino: int, change: AttrChange, fh: int | None) -> NodeAttr:
        node = self.scratch.node(ino)
        if change.size is not None:
            self.scratch.set_size(node, change.size)
        self.scratch.set_attributes(
            node,
            mode=change.mode,
            uid=change.uid,
            gid=change.gid,
            atime_ns=change.atime_ns,
            mtime_ns=change.mtime_ns,
        )
        return self.attr(node)

    def forget(self, ino: int, count: int) -> None:
        self.scratch.forget(ino, count)

    async def statfs(self) -> dict[str, int]:
        return self.scratch.statfs()

    # -- directories -----------------------------------------------------------------------

    def parent(self, ino: int) -> int | None:
        node = self.scratch.node(ino)
        return (node.parent or node).ino

    async def opendir(self, ino: int) -> Sequence[Listed]:
        self.scratch.directory(ino)
        listing: list[Listed] = [
            _ListedScratch(any_name_bytes(name), node, self)
            for name, node in self.scratch.readdir(ino)
        ]
        if ino == self.root_ino:
            stores: list[Listed] = [
                _ListedStore(any_name_bytes(n), s) for n, s in self.stores.items()
            ]
            listing = sorted(listing + stores, key=lambda listed: any_name(listed.name))
        return listing

    async def fsyncdir(self) -> None:
        return  # nothing is ever uploaded from here

    async def mkdir(
        self, parent: int, name: str, mode: int, owner: tuple[int, int] | None
    ) -> NodeAttr:
        self._refuse_store(parent, name, ExistsError("a store's directory"))
        return self.attr(self.scratch.make(parent, name, stat.S_IFDIR | mode, self._owner(owner)))

    async def rmdir(self, parent: int, name: str) -> None:
        self._refuse_store(parent, name, BusyError("a store's directory"))
        self.scratch.rmdir(parent, name)

    async def unlink(self, parent: int, name: str) -> None:
        self._refuse_store(parent, name, IsDirectoryError("a store's directory"))
        self.scratch.unlink(parent, name)

    async def rename(
        self, old_parent: int, old_name: str, new_parent: int, new_name: str, flags: int
    ) -> None:
        busy = BusyError("a store's directory is never renamed or replaced")
        self._refuse_store(old_parent, old_name, busy)
        self._refuse_store(new_parent, new_name, busy)
        self.scratch.rename(old_parent, old_name, new_parent, new_name, flags)

    async def symlink(
        self, parent: int, name: str, target: bytes, owner: tuple[int, int] | None
    ) -> NodeAttr:
        self._refuse_store(parent, name, ExistsError("a store's directory"))
        return self.attr(self.scratch.symlink(parent, name, target, self._owner(owner)))

    async def readlink(self, ino: int) -> bytes:
        node = self.scratch.nodes.get(ino)
        if node is None or not stat.S_ISLNK(node.mode):
            raise InvalidArgumentError("not a symbolic link")
        return node.target

    async def link(self, ino: int, new_parent: int, new_name: str) -> NodeAttr:
        self._refuse_store(new_parent, new_name, ExistsError("a store's directory"))
        return self.attr(self.scratch.link(ino, new_parent, new_name))

    async def mknod(
        self, parent: int, name: str, mode: int, owner: tuple[int, int] | None
    ) -> NodeAttr:
        self._refuse_store(parent, name, ExistsError("a store's directory"))
        return self.attr(self.scratch.make(parent, name, mode, self._owner(owner)))

    # -- files -----------------------------------------------------------------------------

    async def open(self, ino: int, flags: int) -> tuple[int, bool]:
        return self.scratch.open(ino, flags), True

    async def create(
        self, parent: int, name: str, flags: int, mode: int, owner: tuple[int, int] | None
    ) -> tuple[int, bool, NodeAttr]:
        self._refuse_store(parent, name, ExistsError("a store's directory"))
        fh, node = self.scratch.create(parent, name, mode, flags, self._owner(owner))
        return fh, True, self.attr(node)

    async def read(self, fh: int, offset: int, size: int) -> bytes:
        return self.scratch.read(fh, offset, size)

    async def write(self, fh: int, offset: int, buf: bytes) -> int:
        return self.scratch.write(fh, offset, buf)

    async def flush(self, fh: int) -> None:
        return  # held in memory only: nothing to save

    async def fsync(self, fh: int) -> None:
        return

    async def release(self, fh: int) -> None:
        self.scratch.release(fh)

    # -- extended attributes: none in scratch (never ENOSYS: see the module docstring) -------

    async def setxattr(self, ino: int, name: bytes, value: bytes) -> None:
        raise AttributeNotSupportedError("local scratch keeps no extended attributes")

    async def getxattr(self, ino: int, name: bytes) -> bytes:
        raise NoAttributeError("local scratch keeps no extended attributes")

    async def listxattr(self, ino: int) -> list[bytes]:
        return []

    async def removexattr(self, ino: int, name: bytes) -> None:
        raise NoAttributeError("local scratch keeps no extended attributes")


def any_name_bytes(name: str) -> bytes:
    """A scratch name as the kernel gave it (``any_name`` undone)."""
    return name.encode("utf-8", "surrogateescape")


class UnavailableStore:
    """The slot of a store that could not be opened when the mount started (not found, key
    refused, server down): its directory is there, empty and read-only, and everything in it
    is EIO with the reason in the log and ``memfs status`` (never ENOSYS, which would make the
    kernel stop sending that request to the whole mount); the other stores work."""

    def __init__(self, root_ino: int, reason: str, *, uid: int, gid: int) -> None:
        self.root_ino = root_ino
        self.reason = reason
        now = now_ns()
        self.root = ScratchNode(root_ino, stat.S_IFDIR | 0o555, uid, gid, now, now, now, links=2)
        self.routes = [(NumberRange(root_ino, root_ino + 1), Route(self))]
        self.grafts: dict[bytes, Route] = {}
        self.xattrs: Xattrs = self

    def _unavailable(self) -> RemoteUnavailableError:
        return RemoteUnavailableError(f"this store could not be opened: {self.reason}")

    async def getattr(self, ino: int) -> NodeAttr:
        if ino != self.root_ino:
            raise self._unavailable()
        return scratch_attr(self.root)

    async def dir_attr(self, ino: int) -> NodeAttr:
        return await self.getattr(ino)

    def forget(self, ino: int, count: int) -> None:
        return

    def parent(self, ino: int) -> int | None:
        return None

    async def statfs(self) -> dict[str, int]:
        raise self._unavailable()

    async def fsyncdir(self) -> None:
        raise self._unavailable()

    async def lookup(self, parent: int, name: str) -> NodeAttr:
        raise self._unavailable()

    async def opendir(self, ino: int) -> Sequence[Listed]:
        raise self._unavailable()

    async def setattr(self, ino: int, change: AttrChange, fh: int | None) -> NodeAttr:
        raise self._unavailable()

    async def mkdir(
        self, parent: int, name: str, mode: int, owner: tuple[int, int] | None
    ) -> NodeAttr:
        raise self._unavailable()

    async def mknod(
        self, parent: int, name: str, mode: int, owner: tuple[int, int] | None
    ) -> NodeAttr:
        raise self._unavailable()

    async def create(
        self, parent: int, name: str, flags: int, mode: int, owner: tuple[int, int] | None
    ) -> tuple[int, bool, NodeAttr]:
        raise self._unavailable()

    async def symlink(
        self, parent: int, name: str, target: bytes, owner: tuple[int, int] | None
    ) -> NodeAttr:
        raise self._unavailable()

    async def link(self, ino: int, new_parent: int, new_name: str) -> NodeAttr:
        raise self._unavailable()

    async def unlink(self, parent: int, name: str) -> None:
        raise self._unavailable()

    async def rmdir(self, parent: int, name: str) -> None:
        raise self._unavailable()

    async def rename(
        self, old_parent: int, old_name: str, new_parent: int, new_name: str, flags: int
    ) -> None:
        raise self._unavailable()

    async def readlink(self, ino: int) -> bytes:
        raise self._unavailable()

    async def open(self, ino: int, flags: int) -> tuple[int, bool]:
        raise self._unavailable()

    async def read(self, fh: int, offset: int, size: int) -> bytes:
        raise self._unavailable()

    async def write(self, fh: int, offset: int, buf: bytes) -> int:
        raise self._unavailable()

    async def flush(self, fh: int) -> None:
        raise self._unavailable()

    async def fsync(self, fh: int) -> None:
        raise self._unavailable()

    async def release(self, fh: int) -> None:
        return

    async def getxattr(self, ino: int, name: bytes) -> bytes:
        raise NoAttributeError("this store could not be opened")

    async def listxattr(self, ino: int) -> list[bytes]:
        return []

    async def setxattr(self, ino: int, name: bytes, value: bytes) -> None:
        raise self._unavailable()

    async def removexattr(self, ino: int, name: bytes) -> None:
        raise self._unavailable()
