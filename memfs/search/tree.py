"""The read-only ``.search/`` directory of a mount: ``cat MOUNTPOINT/.search/<query>``.

Owns everything below ``MOUNTPOINT/.search``: each name looked up there is a query, a regular
file (mode 0444, size 0) whose content, computed when it is opened, is the ranked results of
``memfs.search.engine.StoreSearch`` in the text format of ``memfs.search.engine.render`` (one hit a
line: path, relevance, description, best line, tab-separated). The directory lists nothing (a query
is any name) and is not listed in the mount's root; every change below it is refused with
``ReadOnlyError`` (EROFS).

Freshness: each open searches anew (after the mount's pending uploads are sent), and
``fuse_ops`` opens these files with ``direct_io`` and zero entry and attribute timeouts, so the
kernel neither caches their pages nor their size: a search after a write finds it, and ``cat``
reads to the end although ``stat`` says 0 bytes.

It is a ``memfs.core.tree.Tree`` (``ReadOnlyTree`` refuses its changes). It must not import
pyfuse3 nor decide errnos; the mount's router hands it the requests for its numbers: everything
here is numbered in the range its builder hands it (``memfs.contract.numbers``: from 2**47 in a
mount of one store, between the store's files and its ``.versions`` tree).

Invariants: inode numbers are never reused; a query node leaves the table when the kernel
forgot it and no handle is open on it; the root ``.search`` node never leaves.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from dataclasses import dataclass
from typing import Never

from memfs.contract.errors import (
    InvalidArgumentError,
    IsDirectoryError,
    NoEntryError,
    NotDirectoryError,
)
from memfs.contract.node_attr import NodeAttr
from memfs.contract.numbers import SINGLE_STORE, NumberRange
from memfs.contract.read_only_tree import ReadOnlyTree
from memfs.search.engine import DEFAULT_LIMIT, StoreSearch, render

log = logging.getLogger(__name__)

SEARCH_NAME = ".search"


@dataclass(frozen=True)
class SearchAttr(NodeAttr):
    """File attributes of a node of the tree (its own type: never cached by the kernel)."""


@dataclass(eq=False)
class QueryNode:
    ino: int
    query: str
    lookups: int = 0
    open_count: int = 0


class SearchTree(ReadOnlyTree):
    """The ``.search`` directory of one mount. See the module docstring."""

    tree_name = SEARCH_NAME

    def __init__(
        self,
        search: StoreSearch,
        *,
        uid: int,
        gid: int,
        limit: int = DEFAULT_LIMIT,
        numbers: NumberRange = SINGLE_STORE.search,
    ) -> None:
        self.search = search
        self.numbers = numbers  # its inodes and handles; the root is the first
        self.uid = uid
        self.gid = gid
        self.limit = limit
        self.started = time.time()
        self.root_ino = numbers.first
        self.nodes: dict[int, QueryNode] = {}
        self._by_query: dict[str, QueryNode] = {}
        self._handles: dict[int, tuple[QueryNode, bytes]] = {}
        self._next_ino = numbers.first + 1
        self._next_fh = numbers.first

    def owns(self, ino: int) -> bool:
        return ino in self.numbers

    def _attr(self, ino: int, mode: int) -> SearchAttr:
        nlink = 2 if stat.S_ISDIR(mode) else 1
        now = time.time()  # a query's results are as new as the moment they are asked
        return SearchAttr(ino, mode, nlink, 0, self.uid, self.gid, now, now, self.started)

    def _query(self, ino: int) -> QueryNode:
        node = self.nodes.get(ino)
        if node is None:
            raise NoEntryError(f"no inode {ino} below {SEARCH_NAME}")
        return node

    async def getattr(self, ino: int) -> SearchAttr:
        if ino == self.root_ino:
            return self._attr(ino, stat.S_IFDIR | 0o555)
        return self._attr(self._query(ino).ino, stat.S_IFREG | 0o444)

    async def dir_attr(self, ino: int) -> SearchAttr:
        return await self.getattr(ino)

    async def lookup(self, parent: int, name: str) -> SearchAttr:
        """``parent`` is the mount root (for ``.search``) or the ``.search`` directory."""
        if not self.owns(parent):
            if name != SEARCH_NAME:
                raise NoEntryError(name)
            return await self.getattr(self.root_ino)
        if parent != self.root_ino:
            raise NotDirectoryError(f"{name}: a search result is not a directory")
        node = self._by_query.get(name)
        if node is None:
            node = QueryNode(self._next_ino, name)
            self._next_ino += 1
            self.nodes[node.ino] = node
            self._by_query[name] = node
        node.lookups += 1
        return await self.getattr(node.ino)

    def forget(self, ino: int, count: int) -> None:
        node = self.nodes.get(ino)
        if node is not None:
            node.lookups = max(0, node.lookups - count)
            self._maybe_drop(node)

    def _maybe_drop(self, node: QueryNode) -> None:
        if node.lookups == 0 and node.open_count == 0:
            self.nodes.pop(node.ino, None)
            if self._by_query.get(node.query) is node:
                del self._by_query[node.query]

    async def readdir(self, ino: int) -> list[tuple[str, int]]:
        """Nothing: every name is a query, none is listed."""
        if ino != self.root_ino:
            self._query(ino)
            raise NotDirectoryError("not a directory")
        return []

    async def opendir(self, ino: int) -> list[Never]:
        """Nothing to list (``readdir``)."""
        await self.readdir(ino)
        return []

    def parent(self, ino: int) -> int | None:
        return None  # only .search is a directory: the mount's root holds it

    async def open(self, ino: int, flags: int) -> tuple[int, bool]:
        """Search now; returns the handle of the results (the kernel keeps no page of them)."""
        if (flags & os.O_ACCMODE) != os.O_RDONLY or flags & (os.O_TRUNC | os.O_APPEND):
            raise self.refuse("open for writing")
        if ino == self.root_ino:
            raise IsDirectoryError("is a directory")
        node = self._query(ino)
        hits = await self.search.search(node.query, limit=self.limit)
        log.debug("search %r: %d hit(s)", node.query, len(hits))
        node.open_count += 1
        fh = self._next_fh
        self._next_fh += 1
        self._handles[fh] = (node, render(hits).encode("utf-8"))
        return fh, False

    async def read(self, fh: int, offset: int, size: int) -> bytes:
        held = self._handles.get(fh)
        if held is None:
            raise InvalidArgumentError(f"no open file {fh}")
        return held[1][offset : offset + size]

    async def release(self, fh: int) -> None:
        held = self._handles.pop(fh, None)
        if held is not None:
            held[0].open_count -= 1
            self._maybe_drop(held[0])

    async def readlink(self, ino: int) -> bytes:
        raise InvalidArgumentError("not a symbolic link")
