"""The inode table: every file and directory the kernel may hold, by number, path and memory id.

Owns the numbering (monotonic, never reused while the daemon lives), the binding of nodes to
paths (``by_path``), the stable number of each memory id (a memory keeps its inode for the
daemon's lifetime, across renames), and the kernel's lookup counts (raised by lookup, create,
readdirplus; lowered by forget).

Invariants:
- ``by_path[p].path == p`` for every bound node; an unbound node has ``path is None``;
- ``by_id[m].memory_id == m``; a memory id is bound to at most one node;
- a node leaves the table only when it is unbound, not open and the kernel forgot it; memory
  nodes and directory nodes otherwise stay (cheap: a store has at most 2,000 memories);
- ``subdirs[d]`` is the number of directory nodes in ``by_parent[d]`` (a directory's nlink).

This module holds state only; it must not talk to the store or know about FUSE.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum

log = logging.getLogger(__name__)

ROOT_INODE = 1  # pyfuse3.ROOT_INODE: the root of a mount of one store (``memfs.contract.numbers``)


class Kind(Enum):
    FILE = "file"
    DIR = "dir"
    SYMLINK = "symlink"


@dataclass(eq=False)
class Node:
    """One inode. File state is described field by field; see docs/semantics.md."""

    ino: int
    kind: Kind
    path: str | None
    # -- the memory this node is bound to on the server (files only) --
    memory_id: str | None = None
    remote_path: str | None = None  # the path the server has for memory_id
    base_sha: str | None = None  # content sha the local copy is based on (server's, last seen)
    remote_size: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None
    synced_at: float = 0.0  # monotonic time of the last server answer about this node
    description: str | None = None  # the memory's description as last heard (None: unknown)
    # -- local state --
    data: bytearray | None = None  # the local copy, shared by every open handle (never cached)
    # refused content moved out of memory into its kept copy (memfs.core.ops.refusals): its size
    # (``data`` is None meanwhile, till an open loads it back); None: not moved out
    kept_size: int | None = None
    local_only: bool = False
    target: bytes = b""  # symlinks only
    mtime: float | None = None  # client-set (utimens) or last local write
    atime: float | None = None
    mtime_ns: int | None = None  # exactly as client-set (utimens), see vfs.attr
    atime_ns: int | None = None
    ctime: float = field(default_factory=time.time)
    open_count: int = 0
    lookups: int = 0
    # a memory renamed away from ``departed_from`` (rule 3): re-creating that path in time
    # adopts the memory; ``departed_at`` is monotonic
    departed_from: str | None = None
    departed_at: float = 0.0
    dirty: bool = False  # data differs from what the server has (or the node is new)
    # the store could not take this content when asked (full: waiting for room; away or busy:
    # retried), so it stays here: charged to the local budget until uploaded
    # (memfs.core.model.budget)
    held_back: bool = False
    gen: int = 0  # bumped by every local change of data, so an upload knows if it is current
    last_open_sha: str | None = None  # for keep_cache
    refused: str | None = None  # why the content is not uploaded (memfs.core.ops.refusals), or None
    refused_gen: int = 0  # the generation (``gen``) of the content refused
    # a description set here (``user.description``), not yet uploaded; None: none pending
    new_description: str | None = None
    # -- kept locally for the daemon's lifetime, never uploaded (the store has no modes) --
    mode: int | None = None  # permission bits (create, mkdir, chmod); None: the mount's default
    uid: int | None = None  # owner (create, mkdir, chown); None: the mount's owner
    gid: int | None = None
    subdirs_known: bool = False  # directories: a listing was merged, or made here (nlink)

    @property
    def is_dir(self) -> bool:
        return self.kind is Kind.DIR

    def changed_here(self) -> None:
        """A local change of its data: dirty, a new generation (``gen``), new times."""
        self.dirty = True
        self.gen += 1
        self.mtime = time.time()
        self.ctime = self.mtime

    def size(self) -> int:
        if self.kind is Kind.SYMLINK:
            return len(self.target)
        if self.data is not None:
            return len(self.data)
        if self.kept_size is not None:
            return self.kept_size
        return self.remote_size if self.kind is Kind.FILE else 0


class InodeTable:
    """See the module docstring."""

    def __init__(self, first: int = ROOT_INODE) -> None:
        """Numbers from ``first`` up (the root's): the range the mount's router handed the
        store's files (``memfs.contract.numbers``)."""
        self.root_ino = first
        self._next = first + 1
        self.nodes: dict[int, Node] = {}
        self.by_path: dict[str, Node] = {}
        self.by_id: dict[str, Node] = {}
        # directory path -> {name: node} of the bound nodes directly in it (lookups and
        # directory views never scan the whole table)
        self.by_parent: dict[str, dict[str, Node]] = {}
        self.subdirs: Counter[str] = Counter()
        root = Node(ino=first, kind=Kind.DIR, path="/")
        self.nodes[first] = root
        self.by_path["/"] = root

    @property
    def root(self) -> Node:
        return self.nodes[self.root_ino]

    def get(self, ino: int) -> Node | None:
        return self.nodes.get(ino)

    def new(self, kind: Kind, path: str | None) -> Node:
        node = Node(ino=self._next, kind=kind, path=None)
        self._next += 1
        self.nodes[node.ino] = node
        if path is not None:
            self.bind(node, path)
        return node

    def bind(self, node: Node, path: str) -> None:
        """Bind ``node`` to ``path``; a node already there is unbound first."""
        other = self.by_path.get(path)
        if other is not None and other is not node:
            self.unbind(other)
        if node.path is not None and self.by_path.get(node.path) is node:
            del self.by_path[node.path]
            self._unindex(node.path)
        node.path = path
        self.by_path[path] = node
        if path != "/":
            directory, _, name = path.rpartition("/")
            self.by_parent.setdefault(directory or "/", {})[name] = node
            if node.is_dir:
                self.subdirs[directory or "/"] += 1

    def _unindex(self, path: str) -> None:
        directory, _, name = path.rpartition("/")
        entries = self.by_parent.get(directory or "/")
        if entries is not None:
            gone = entries.pop(name, None)
            if gone is not None and gone.is_dir:
                self.subdirs[directory or "/"] -= 1
                if not self.subdirs[directory or "/"]:
                    del self.subdirs[directory or "/"]
            if not entries:
                del self.by_parent[directory or "/"]

    def unbind(self, node: Node) -> None:
        if node.path is not None and self.by_path.get(node.path) is node:
            del self.by_path[node.path]
            self._unindex(node.path)
        node.path = None
        self.maybe_drop(node)

    def set_memory(self, node: Node, memory_id: str | None) -> None:
        """Bind ``node`` to ``memory_id`` (None: the node no longer stands for a memory)."""
        if node.memory_id is not None and self.by_id.get(node.memory_id) is node:
            del self.by_id[node.memory_id]
        node.memory_id = memory_id
        if memory_id is not None:
            other = self.by_id.get(memory_id)
            if other is not None and other is not node:
                other.memory_id = None
            self.by_id[memory_id] = node

    def remember(self, node: Node, count: int = 1) -> None:
        node.lookups += count

    def forget(self, ino: int, count: int) -> None:
        node = self.nodes.get(ino)
        if node is None or ino == self.root_ino:
            return
        node.lookups = max(0, node.lookups - count)
        self.maybe_drop(node)

    def maybe_drop(self, node: Node) -> None:
        """Drop a node nobody can reach any more (unbound, closed, forgotten, no memory)."""
        if (
            node.path is None
            and node.lookups == 0
            and node.open_count == 0
            and node.memory_id is None
            and node.ino != self.root_ino
        ):
            self.nodes.pop(node.ino, None)

    def child(self, directory: str, name: str) -> Node | None:
        """The node bound to ``name`` in ``directory``, if any."""
        return self.by_parent.get(directory, {}).get(name)

    def children_of(self, directory: str) -> dict[str, Node]:
        """Bound nodes directly in ``directory``: name -> node (a copy)."""
        return dict(self.by_parent.get(directory, {}))

    def below(self, directory: str) -> list[Node]:
        """Bound nodes strictly below ``directory``."""
        directory = directory.rstrip("/") or "/"
        prefix = "/" if directory == "/" else directory + "/"
        found: list[Node] = []
        for parent, entries in self.by_parent.items():
            if parent == directory or parent.startswith(prefix):
                found.extend(entries.values())
        return found
