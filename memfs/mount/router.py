"""The router of a mount: which tree (``memfs.core.Tree``) serves a number, and which a name.

Owns the inode and file-handle numbers of the mount: every slot of
``memfs.contract.numbers.SLOT`` numbers is served by a ``Slot`` (a store's files, its
``.search/`` and ``.versions/`` share the store's slot, in the ranges of
``StoreNumbers.in_slot``), so the slot of a number is the number shifted right, and the tree
its range within the slot; nobody is asked. A mount of one store serves it in slot 0: the
numbers it always had (the root is inode 1). The trees number in their slot themselves (they
were built with its ranges), so the kernel invalidations a core queues already carry the
kernel's numbers.

Each tree is served as a ``Route``: the tree, how long the kernel may keep its names and
attributes, and how its names are read. Two names in a store's root are another tree's:
``.versions`` and ``.search`` (``Slot.grafts``). In a mount of several stores, the ``..`` of a
store's root is the mount's root (slot 0's).

A request that names two numbers of two slots (a rename or a hard link from one store to
another, or between a store and the local scratch) is EXDEV: ``mv`` copies instead; of two
trees of one store's slot (its files and a read-only tree), EROFS.

It decides no errno itself (``memfs.mount.fuse_ops`` does), keeps no state of a tree and does
not speak pyfuse3.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from memfs.contract.errors import (
    CrossDeviceError,
    InvalidArgumentError,
    NoEntryError,
    ReadOnlyError,
)
from memfs.contract.node_attr import NodeAttr
from memfs.contract.numbers import SLOT, NumberRange, StoreNumbers
from memfs.contract.paths import MAX_NAME_BYTES
from memfs.core import FilesTree, StoreCore, Tree, Xattrs, decode_name
from memfs.mount import storelog
from memfs.search.tree import SEARCH_NAME
from memfs.versions.tree import VERSIONS_NAME

SLOT_BITS = SLOT.bit_length() - 1
# the renameat2 flags a tree may be asked for: RENAME_NOREPLACE (1) and RENAME_EXCHANGE (2).
# Any other (RENAME_WHITEOUT, 4: an overlay filesystem's) is EINVAL here for every tree,
# never a plain rename.
RENAME_FLAGS_SERVED = 1 | 2

# The kernel keeps entries and attributes this long without asking (warm stat at local-disk
# speed); the change feed invalidates them at once when the store changes elsewhere.
ENTRY_TIMEOUT = 60.0
ATTR_TIMEOUT = 60.0
# /.versions is never invalidated by the change feed: its entries expire after a second
VERSIONS_TIMEOUT = 1.0
# /.search files are searched anew at each open: the kernel keeps neither their names nor sizes
SEARCH_TIMEOUT = 0.0


def slot_of(number: int) -> int:
    """The slot an inode or handle number belongs to."""
    return number >> SLOT_BITS


def any_name(raw: bytes) -> str:
    """A name as text: any bytes, as on tmpfs (undecodable ones kept as surrogates)."""
    return raw.decode("utf-8", "surrogateescape")


@dataclass(frozen=True)
class Route:
    """A tree as the mount serves it. ``decode``: its names as text (a store's are UTF-8);
    ``direct_io``: every read goes to the tree, whatever the size says, never the page cache."""

    tree: Tree
    entry_timeout: float = ENTRY_TIMEOUT
    attr_timeout: float = ATTR_TIMEOUT
    decode: Callable[[bytes], str] = decode_name
    direct_io: bool = False


class Slot(Protocol):
    """What serves one slot: its trees by range, the names of its root that are another of
    its trees', the extended attributes of all its numbers, and ``df`` and ``fsync`` of a
    directory, which name no tree."""

    root_ino: int
    routes: list[tuple[NumberRange, Route]]
    grafts: dict[bytes, Route]
    xattrs: Xattrs

    async def getattr(self, ino: int) -> NodeAttr: ...

    async def statfs(self) -> dict[str, int]: ...

    async def fsyncdir(self) -> None: ...


class StoreSlot:
    """The slot of one store: its files (``memfs.core.FilesTree``), ``.search`` and
    ``.versions``, in the ranges its core was built with (its root is the slot's first number
    plus one). ``several``: one store of a mount of several."""

    def __init__(self, core: StoreCore, *, several: bool = False) -> None:
        numbers = StoreNumbers.in_slot(core.root_ino - 1)
        self.root_ino = core.root_ino
        self.files = FilesTree(core, numbers.files, several=several)
        long_names = partial(decode_name, max_bytes=MAX_NAME_BYTES)  # queries and instants too
        versions = Route(core.versions, VERSIONS_TIMEOUT, VERSIONS_TIMEOUT, long_names)
        search = Route(core.search, SEARCH_TIMEOUT, SEARCH_TIMEOUT, long_names, direct_io=True)
        self.routes = [
            (numbers.files, Route(self.files)),
            (numbers.search, search),
            (numbers.versions, versions),
        ]
        self.grafts = {VERSIONS_NAME.encode(): versions, SEARCH_NAME.encode(): search}
        self.xattrs: Xattrs = self.files

    async def getattr(self, ino: int) -> NodeAttr:
        return await self.files.getattr(ino)

    async def statfs(self) -> dict[str, int]:
        return await self.files.statfs()

    async def fsyncdir(self) -> None:
        await self.files.fsyncdir()


class Router:
    """The trees of a mount by number and name (module docstring)."""

    def __init__(self) -> None:
        self._slots: dict[int, Slot] = {}
        self._statfs: Slot | None = None  # whose figures ``df`` shows
        # a mount of several stores: each slot's store, for the log (``storelog``)
        self._names: dict[int, str | None] | None = None

    def serve(
        self, slot: int, served: Slot, *, statfs: bool = False, name: str | None = None
    ) -> None:
        """Hand the requests for the numbers of ``slot`` to ``served``; with ``statfs``,
        statfs too (the kernel names no inode for it); ``name``: the store's, for the log
        lines its requests make (a mount of several stores)."""
        self._slots[slot] = served
        if name is not None or self._names is not None:
            self._names = (self._names or {}) | {slot: name}
        if statfs or self._statfs is None:
            self._statfs = served

    def slot(self, number: int) -> Slot:
        """The slot of a number the kernel names in a request (its store's, in the log)."""
        index = number >> SLOT_BITS
        served = self._slots.get(index)
        if self._names is not None:
            storelog.CURRENT.set(self._names.get(index))
        if served is None:
            raise NoEntryError(f"no tree serves number {number}")
        return served

    def route(self, number: int) -> Route:
        """The tree serving a number the kernel names in a request."""
        return self._route(self.slot(number), number)

    def cache_of(self, number: int) -> Route:
        """The route of a number the mount hands the kernel (an entry's: for its timeouts)."""
        return self._route(self._slots[number >> SLOT_BITS], number)

    @staticmethod
    def _route(served: Slot, number: int) -> Route:
        for numbers, route in served.routes:
            if number in numbers:
                return route
        raise NoEntryError(f"no tree serves number {number}")

    def named(self, parent: int, name: bytes) -> Route:
        """The tree that answers for ``name`` in the directory ``parent``."""
        served = self.slot(parent)
        if parent == served.root_ino and name in served.grafts:
            return served.grafts[name]
        return self._route(served, parent)

    def placed(self, ino: int) -> int | None:
        """The directory the mount shows ``ino`` in when that is a store's root in a mount of
        several (the mount's root, where the store's own tree ends); else None."""
        index = ino >> SLOT_BITS
        if index == 0 or 0 not in self._slots or ino != self._slots[index].root_ino:
            return None
        return self._slots[0].root_ino

    def up(self, ino: int, route: Route) -> int:
        """The ``..`` of the directory ``ino``."""
        placed = self.placed(ino)
        if placed is not None:
            return placed
        parent = route.tree.parent(ino)
        return self._slots[ino >> SLOT_BITS].root_ino if parent is None else parent

    def pair(self, op: str, first: Route, first_number: int, second: Route, number: int) -> Route:
        """The tree of a request naming two numbers (rename, link), if they are one tree's."""
        if first_number >> SLOT_BITS != number >> SLOT_BITS:
            raise CrossDeviceError(f"{op} between two stores, or a store and scratch")
        if first is not second:  # a store's files and one of its read-only trees
            raise ReadOnlyError(f"{op}: {VERSIONS_NAME} and {SEARCH_NAME} are read-only")
        return first

    @staticmethod
    def check_rename_flags(flags: int) -> None:
        if flags & ~RENAME_FLAGS_SERVED:
            raise InvalidArgumentError(f"renameat2 flags {flags:#x} are not supported")

    def statfs_slot(self) -> Slot:
        if self._statfs is None:
            raise NoEntryError("nothing is served")
        return self._statfs
