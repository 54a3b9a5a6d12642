"""``Tree``: what a mount serves of any tree of numbered nodes (a store's files, its
``.versions/`` and ``.search/``, a mount's local scratch), and ``FilesTree``, a store's core as
one.

A tree answers in attributes (``NodeAttr``) and handle numbers, never hands out its nodes: a
listing is a list of ``Listed`` entries (``memfs.core.store_core``) that say their attributes
when the kernel reads them and count the lookup the kernel takes. Names arrive decoded by the
mount's rules for that tree and leave as the bytes the kernel is given. Every number a tree
hands out is in the range it was built with (``memfs.contract.numbers``), so the mount's router
finds the tree from the number.

It must not speak pyfuse3 nor decide errnos: a tree raises ``memfs.contract.errors`` and the
mount's adapter maps them.
"""

from __future__ import annotations

import stat
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from memfs.contract.errors import AttributeNotSupportedError, NoAttributeError, NotSupportedError
from memfs.contract.node_attr import NodeAttr
from memfs.contract.numbers import NumberRange
from memfs.core.ops.namespace import decode_name
from memfs.core.store_core import Descriptions, Listed, StoreFiles

# why a file's content is not uploaded (not UTF-8, too large...), read-only, on refused files
REFUSED_XATTR = b"user.memfs.refused"


@dataclass(frozen=True)
class AttrChange:
    """What a ``setattr`` asks to change (None: left as it is)."""

    size: int | None = None
    mode: int | None = None
    uid: int | None = None
    gid: int | None = None
    atime_ns: int | None = None
    mtime_ns: int | None = None


class Tree(Protocol):
    """The requests a mount hands one tree, in the tree's numbers. ``owner``: the creator's
    uid and gid (None: the mount's)."""

    async def lookup(self, parent: int, name: str) -> NodeAttr: ...

    async def getattr(self, ino: int) -> NodeAttr: ...

    async def dir_attr(self, ino: int) -> NodeAttr:
        """A directory's attributes for a ``.`` or ``..`` entry, asking the store nothing."""
        ...

    async def setattr(self, ino: int, change: AttrChange, fh: int | None) -> NodeAttr: ...

    def forget(self, ino: int, count: int) -> None: ...

    def parent(self, ino: int) -> int | None:
        """The directory holding ``ino``; None for the root (its ``..`` is the mount's)."""
        ...

    async def opendir(self, ino: int) -> Sequence[Listed]:
        """The listing of a directory, taken when it is opened."""
        ...

    async def open(self, ino: int, flags: int) -> tuple[int, bool]:
        """The new handle, and whether the kernel may keep the pages it cached."""
        ...

    async def create(
        self, parent: int, name: str, flags: int, mode: int, owner: tuple[int, int] | None
    ) -> tuple[int, bool, NodeAttr]: ...

    async def read(self, fh: int, offset: int, size: int) -> bytes: ...

    async def write(self, fh: int, offset: int, buf: bytes) -> int: ...

    async def flush(self, fh: int) -> None: ...

    async def fsync(self, fh: int) -> None: ...

    async def release(self, fh: int) -> None: ...

    async def mkdir(
        self, parent: int, name: str, mode: int, owner: tuple[int, int] | None
    ) -> NodeAttr: ...

    async def mknod(
        self, parent: int, name: str, mode: int, owner: tuple[int, int] | None
    ) -> NodeAttr: ...

    async def symlink(
        self, parent: int, name: str, target: bytes, owner: tuple[int, int] | None
    ) -> NodeAttr: ...

    async def link(self, ino: int, new_parent: int, new_name: str) -> NodeAttr: ...

    async def unlink(self, parent: int, name: str) -> None: ...

    async def rmdir(self, parent: int, name: str) -> None: ...

    async def rename(
        self, old_parent: int, old_name: str, new_parent: int, new_name: str, flags: int
    ) -> None: ...

    async def readlink(self, ino: int) -> bytes: ...


class Xattrs(Protocol):
    """The extended attributes of every number of one slot of the mount (a store's trees
    share the store's); names as the kernel gives them, read once the request is allowed."""

    async def getxattr(self, ino: int, name: bytes) -> bytes: ...

    async def setxattr(self, ino: int, name: bytes, value: bytes) -> None: ...

    async def listxattr(self, ino: int) -> list[bytes]: ...

    async def removexattr(self, ino: int, name: bytes) -> None: ...


class FilesTree:
    """A store's files and directories, served from its core (module docstring). Its
    extended attributes are ``user.description`` (``Descriptions``) for the whole slot of the
    store: none for its read-only trees, and where the store keeps no descriptions ENOSYS, so
    that the kernel stops asking (docs/editors.md §3), or ENOTSUP when the store is one of
    several (``several``), where ENOSYS would stop it asking every store of the mount.
    ``numbers``: the range of its files (the store's other trees are beside it)."""

    def __init__(self, core: StoreFiles, numbers: NumberRange, *, several: bool = False) -> None:
        self.core = core
        self.numbers = numbers
        self.root_ino = core.root_ino
        self.several = several

    async def lookup(self, parent: int, name: str) -> NodeAttr:
        return await self.core.lookup(parent, name)

    async def getattr(self, ino: int) -> NodeAttr:
        return await self.core.getattr(ino)

    async def dir_attr(self, ino: int) -> NodeAttr:
        return await self.core.getattr(ino)

    async def setattr(self, ino: int, change: AttrChange, fh: int | None) -> NodeAttr:
        return await self.core.setattr(
            ino,
            size=change.size,
            atime_ns=change.atime_ns,
            mtime_ns=change.mtime_ns,
            fh=fh,
            mode=change.mode,
            uid=change.uid,
            gid=change.gid,
        )

    def forget(self, ino: int, count: int) -> None:
        self.core.forget(ino, count)

    def parent(self, ino: int) -> int | None:
        return None if ino == self.root_ino else self.core.parent_ino(ino)

    async def opendir(self, ino: int) -> Sequence[Listed]:
        return await self.core.listing(ino)

    async def open(self, ino: int, flags: int) -> tuple[int, bool]:
        return await self.core.open(ino, flags)

    async def create(
        self, parent: int, name: str, flags: int, mode: int, owner: tuple[int, int] | None
    ) -> tuple[int, bool, NodeAttr]:
        fh, attr = await self.core.create(parent, name, flags, mode=mode, owner=owner)
        return fh, False, attr

    async def read(self, fh: int, offset: int, size: int) -> bytes:
        return await self.core.read(fh, offset, size)

    async def write(self, fh: int, offset: int, buf: bytes) -> int:
        return await self.core.write(fh, offset, buf)

    async def flush(self, fh: int) -> None:
        await self.core.flush(fh)

    async def fsync(self, fh: int) -> None:
        await self.core.fsync(fh)

    async def fsyncdir(self) -> None:
        await self.core.fsync_dir()

    async def release(self, fh: int) -> None:
        await self.core.release(fh)

    async def mkdir(
        self, parent: int, name: str, mode: int, owner: tuple[int, int] | None
    ) -> NodeAttr:
        return await self.core.mkdir(parent, name, mode=mode, owner=owner)

    async def mknod(
        self, parent: int, name: str, mode: int, owner: tuple[int, int] | None
    ) -> NodeAttr:
        if stat.S_IFMT(mode) not in (0, stat.S_IFREG):  # fifos, sockets, devices
            self.core.refuse_special("special files")
        return await self.core.mknod(parent, name, mode=mode, owner=owner)

    async def symlink(
        self, parent: int, name: str, target: bytes, owner: tuple[int, int] | None
    ) -> NodeAttr:
        return await self.core.symlink(parent, name, target)

    async def link(self, ino: int, new_parent: int, new_name: str) -> NodeAttr:
        self.core.refuse_special("hard links")
        raise AssertionError("refuse_special always raises")

    async def unlink(self, parent: int, name: str) -> None:
        await self.core.unlink(parent, name)

    async def rmdir(self, parent: int, name: str) -> None:
        await self.core.rmdir(parent, name)

    async def rename(
        self, old_parent: int, old_name: str, new_parent: int, new_name: str, flags: int
    ) -> None:
        await self.core.rename(old_parent, old_name, new_parent, new_name, flags)

    async def readlink(self, ino: int) -> bytes:
        return await self.core.readlink(ino)

    async def statfs(self) -> dict[str, int]:
        return await self.core.statfs()

    # -- extended attributes of the store's slot (class docstring) ---------------------------

    def _descriptions(self, ino: int) -> Descriptions:
        descriptions = self.core.descriptions
        if not descriptions.enabled:
            if not self.several:
                raise NotSupportedError("no extended attributes")
            raise AttributeNotSupportedError("this store keeps no extended attributes")
        if ino not in self.numbers:
            raise NoAttributeError("versions and searches have no extended attributes")
        return descriptions

    async def getxattr(self, ino: int, name: bytes) -> bytes:
        if name == REFUSED_XATTR:
            why = self.core.refusal(ino) if ino in self.numbers else None
            if why is None:
                raise NoAttributeError("the file is not refused")
            return why.encode()
        descriptions = self._descriptions(ino)
        return await descriptions.get(ino, decode_name(name))

    async def setxattr(self, ino: int, name: bytes, value: bytes) -> None:
        descriptions = self._descriptions(ino)
        # pyfuse3 hands no flags: XATTR_CREATE and XATTR_REPLACE are not told apart
        await descriptions.set(ino, decode_name(name), value)

    async def listxattr(self, ino: int) -> list[bytes]:
        refused = [REFUSED_XATTR] if ino in self.numbers and self.core.refusal(ino) else []
        if refused and not self.core.descriptions.enabled:
            return refused  # the one attribute of a store without descriptions
        return [name.encode() for name in await self._descriptions(ino).names(ino)] + refused

    async def removexattr(self, ino: int, name: bytes) -> None:
        descriptions = self._descriptions(ino)
        await descriptions.remove(ino, decode_name(name))
