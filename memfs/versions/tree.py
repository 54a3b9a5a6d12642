"""The read-only ``.versions/`` tree of a mount: the store at any moment, and each path's history.

Owns everything below ``MOUNTPOINT/.versions``:
- ``<time>/``: the whole store as it was at that instant (``parse_instant`` reads the name);
- the timeline: ``ls .versions`` lists one colon-free instant per change, plus ``history/`` and
  ``log.txt`` (every change, one line each);
- ``history/<memory path>/``: one file per version that was ever at that path, named
  ``<time>-<operation>-<actor>``, oldest first, plus ``log.txt`` with the details;
- the version index (every version's metadata, from paged ``view=basic`` listings, kept for the
  daemon's life and extended incrementally) and point-in-time views computed from it, in
  ``memfs.versions.index``; the names of instants and history files in ``memfs.versions.names``;
  here, a cache of version contents by sha256 without expiry, bounded by bytes.

Cost rules: a view is built from version listings, never one request per memory; the first use
pages through the store's history once, later uses ask only for versions newer than the newest
known (at most once a second, and never for views of instants safely in the past); contents are
fetched lazily, at ``open``. Redactions of old versions can only be learnt by listing them again:
before content is served, and when a history directory (or an entry in it) is listed, looked
in or stat'ed, the memories of that path are re-listed (``view=basic``, each at most every
``recheck`` seconds); views and the store's log re-list the whole history (the "sweep") at most
every max(``sweep_interval``, ``sweep_per_page`` per page of it). Redacted versions stay listed,
with mode 0000, and opening one is EACCES (``AccessDeniedError``); kernel invalidations for what
a learnt redaction changed (the old history name, cached modes) are queued for
``take_invalidations``.

It is a ``memfs.core.tree.Tree``. It must not import pyfuse3 or the rest of the filesystem
core (``core.build`` makes it, the mount's router hands it the requests for its numbers:
everything here is numbered in the range its builder hands it, ``memfs.contract.numbers``: from
2**48 in a mount of one store, far above the core's inodes), must not decide errnos, and must
never write to the store: every mutation below ``.versions`` is refused with ``ReadOnlyError``
(``ReadOnlyTree``).

Invariants (the index's own are in ``memfs.versions.index``):
- inode numbers are never reused; a node leaves the table when the kernel forgot it and no
  handle is open on it; the root ``.versions`` node never leaves;
- each spelling of an instant is its own directory inode (the kernel forbids directory aliases).
"""

from __future__ import annotations

import logging
import os
import stat
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from memfs.contract import paths
from memfs.contract.cache_budget import BudgetedCache, CacheBudget
from memfs.contract.errors import (
    AccessDeniedError,
    InvalidArgumentError,
    IsDirectoryError,
    NoEntryError,
    NotDirectoryError,
    ReadOnlyError,
)
from memfs.contract.models import MemoryVersion
from memfs.contract.node_attr import NodeAttr
from memfs.contract.numbers import SINGLE_STORE, NumberRange
from memfs.contract.read_only_tree import ReadOnlyTree
from memfs.contract.store_api import StoreAPI
from memfs.host.portable import user_id
from memfs.versions.index import VersionIndex, View
from memfs.versions.names import HISTORY_NAME, LOG_NAME, parse_instant, stamp

log = logging.getLogger(__name__)

VERSIONS_NAME = ".versions"
MAX_INVALIDATIONS = 1000  # queued kernel invalidations kept when nobody takes them
KEEP_RECENT = 16  # entries of .versions the kernel is never asked to forget (see _shed)


@dataclass(frozen=True)
class VersionAttr(NodeAttr):
    """File attributes of a node of the tree (its own type: the tree's cache timeouts)."""


@dataclass(eq=False, slots=True)
class VNode:
    """One inode below ``.versions``. ``kind`` says which part of the tree it belongs to."""

    ino: int
    key: tuple[object, ...]
    kind: str  # root | view | vdir | vfile | hdir | hfile | log | hlog
    path: str = "/"  # the store path it shows (view dirs/files, history dirs)
    view: int = 0  # the view root's inode (vdir, vfile)
    instant: datetime | None = None  # view roots
    version_id: str | None = None  # vfile, hfile
    lookups: int = 0
    open_count: int = 0

    @property
    def is_dir(self) -> bool:
        return self.kind in ("root", "view", "vdir", "hdir")


@dataclass
class VHandle:
    fh: int
    node: VNode
    data: bytes


@dataclass
class VersionsConfig:
    uid: int = field(default_factory=lambda: user_id() or 0)
    gid: int = field(default_factory=os.getgid)
    cache_bytes: int = 64 * 1024 * 1024
    refresh_interval: float = 1.0  # at most one "anything new?" listing per interval
    recheck: float = 2.0  # re-list a memory's versions before its content or history is shown
    settled_after: float = 10.0  # views of instants older than this get no new versions
    sweep_interval: float = 2.0  # re-list the whole history (redactions) at most this often...
    sweep_per_page: float = 1.0  # ...and at most once per this many seconds per page of 100
    # nodes kept before the kernel is asked to forget the least recently used views (and
    # history): it holds every node it was shown until memory pressure, ~300 bytes each here
    max_nodes: int = 2000
    # False when the store API keeps no history (Capabilities.versions): .versions is ENOENT
    enabled: bool = True


class VersionCache:
    """Version contents by sha256: immutable, so no expiry; charged by bytes to a
    ``CacheBudget`` (the mount's, shared with its content cache; its own of ``max_bytes`` if
    none is given), least recently used first."""

    def __init__(self, max_bytes: int, *, budget: CacheBudget | None = None) -> None:
        self.budget = budget or CacheBudget(max_bytes)
        self._cache: BudgetedCache[str, bytes] = BudgetedCache(
            self.budget, len, name="version contents"
        )

    def get(self, sha: str) -> bytes | None:
        return self._cache.get(sha)

    def put(self, sha: str, content: bytes) -> None:
        self._cache.put(sha, content)

    @property
    def size(self) -> int:
        return self._cache.bytes


def view_bytes(view: View) -> int:
    """A view's cache charge: its dicts and sets, about 150 bytes a file (measured)."""
    return VIEW_BYTES + VIEW_FILE_BYTES * len(view.files)


VIEW_BYTES = 200
VIEW_FILE_BYTES = 150


@dataclass(eq=False, slots=True)
class ListedVersion:
    """An entry of a listing, its attributes taken with the listing (``readdir_attrs``)."""

    name: bytes
    ino: int
    attributes: VersionAttr
    tree: VersionsTree

    async def attr(self) -> VersionAttr | None:
        # the index may be gone now: an entry the tree dropped since is left out
        return self.attributes if self.ino in self.tree.nodes else None

    def remember(self) -> None:
        self.tree.remember(self.ino)


class VersionsTree(ReadOnlyTree):
    """The ``.versions`` tree of one mount. See the module docstring."""

    tree_name = VERSIONS_NAME

    def __init__(
        self,
        store: StoreAPI,
        config: VersionsConfig | None = None,
        *,
        clock: Callable[[], datetime] | None = None,
        numbers: NumberRange = SINGLE_STORE.versions,
        cache_budget: CacheBudget | None = None,
    ) -> None:
        """``cache_budget``: the bytes version contents share with the mount's other caches
        (None: a budget of their own, ``config.cache_bytes``)."""
        self.config = config or VersionsConfig()
        self.numbers = numbers  # its inodes and handles; the root is the first
        self.store = store
        self.contents = VersionCache(self.config.cache_bytes, budget=cache_budget)
        self.index = VersionIndex(
            store,
            refresh_interval=self.config.refresh_interval,
            settled_after=self.config.settled_after,
            sweep_interval=self.config.sweep_interval,
            sweep_per_page=self.config.sweep_per_page,
            budget=self.contents.budget,
        )
        self.clock = clock or (lambda: datetime.now(UTC))
        self.started = time.time()
        self.nodes: dict[int, VNode] = {}
        self.by_key: dict[tuple[object, ...], VNode] = {}
        self.handles: dict[int, VHandle] = {}
        self._next_ino = numbers.first
        self._next_fh = numbers.first
        # point-in-time views by their root's inode (the kernel may hold thousands of roots),
        # and rendered log.txt files: (index generation, text), charged to the cache budget
        self._views: BudgetedCache[int, View] = BudgetedCache(
            self.contents.budget, view_bytes, name="version views"
        )
        self._logs: BudgetedCache[tuple[object, ...], tuple[int, bytes]] = BudgetedCache(
            self.contents.budget, lambda log: len(log[1]), name="version logs"
        )
        self._invalidations: list[tuple[str, int, bytes]] = []
        # names in .versions (views, history) by their last use, least recent first: which
        # the kernel is asked to forget when the tree holds more than config.max_nodes
        self._entries_used: OrderedDict[str, None] = OrderedDict()
        self._listed_only: dict[str, None] = {}  # shown by `ls .versions`, never used since
        self.root = self._node(("root",), "root")

    # -- numbering ----------------------------------------------------------------------------

    def owns(self, ino: int) -> bool:
        return ino in self.numbers

    def _node(self, key: tuple[object, ...], kind: str, **fields: object) -> VNode:
        node = self.by_key.get(key)
        if node is None:
            node = VNode(ino=self._next_ino, key=key, kind=kind)
            for name, value in fields.items():
                setattr(node, name, value)
            self._next_ino += 1
            self.nodes[node.ino] = node
            self.by_key[key] = node
        return node

    def _used(self, name: str, *, listed: bool = False) -> None:
        """``name`` in ``.versions`` (a view, ``history``) was used; ``listed``: only shown
        by ``ls .versions`` (the kernel holds it all the same: the first it may forget)."""
        if not listed:
            self._listed_only.pop(name, None)
            self._entries_used[name] = None
            self._entries_used.move_to_end(name)
        elif name not in self._entries_used:
            self._listed_only[name] = None

    def _shed(self) -> list[tuple[str, int, bytes]]:
        """When the tree holds more than ``config.max_nodes`` nodes: invalidations asking the
        kernel to forget every entry of ``.versions`` (views and history) but the
        ``KEEP_RECENT`` used last. It forgets their subtrees (FORGET for every node below that
        no open file holds) and ``forget`` drops our nodes; a name asked about is not asked
        again until it is used again (the kernel looks it up, or ``ls .versions`` shows it)."""
        if len(self.nodes) <= self.config.max_nodes:
            return []
        names = list(self._listed_only)
        self._listed_only.clear()
        while len(self._entries_used) > KEEP_RECENT:
            names.append(self._entries_used.popitem(last=False)[0])
        items = [("entry", self.root.ino, name.encode("utf-8")) for name in names]
        if items:
            log.debug(
                "versions: %d nodes; the kernel is asked to forget %d", len(self.nodes), len(items)
            )
        return items

    def _get(self, ino: int) -> VNode:
        node = self.nodes.get(ino)
        if node is None:
            raise NoEntryError(f"no inode {ino} below {VERSIONS_NAME}")
        return node

    def remember(self, ino: int, count: int = 1) -> None:
        node = self.nodes.get(ino)
        if node is not None:
            node.lookups += count

    def forget(self, ino: int, count: int) -> None:
        node = self.nodes.get(ino)
        if node is None or node is self.root:
            return
        node.lookups = max(0, node.lookups - count)
        self._maybe_drop(node)

    def _maybe_drop(self, node: VNode) -> None:
        if node.lookups == 0 and node.open_count == 0 and node is not self.root:
            self.nodes.pop(node.ino, None)
            if self.by_key.get(node.key) is node:
                del self.by_key[node.key]

    # -- attributes ---------------------------------------------------------------------------

    def _attr(self, ino: int, mode: int, size: int, mtime: float) -> VersionAttr:
        nlink = 2 if stat.S_ISDIR(mode) else 1
        return VersionAttr(
            ino, mode, nlink, size, self.config.uid, self.config.gid, mtime, mtime, mtime
        )

    def attr(self, node: VNode) -> VersionAttr:
        directory = stat.S_IFDIR | 0o755
        if node.kind in ("root", "hdir"):
            newest = self.index.newest()
            return self._attr(
                node.ino, directory, 0, newest.timestamp() if newest else self.started
            )
        if node.kind in ("view", "vdir"):
            root = node if node.kind == "view" else self.nodes.get(node.view)
            instant = root.instant if root is not None and root.instant else None
            return self._attr(node.ino, directory, 0, instant.timestamp() if instant else 0.0)
        if node.kind in ("log", "hlog"):
            return self._attr(node.ino, stat.S_IFREG | 0o644, len(self._log(node)), self.started)
        version = self.index.versions.get(node.version_id or "")
        if version is None:
            return self._attr(node.ino, stat.S_IFREG | 0o644, 0, self.started)
        mode = stat.S_IFREG | (0 if version.redacted else 0o644)
        return self._attr(
            node.ino, mode, version.content_size_bytes or 0, version.created_at.timestamp()
        )

    async def dir_attr(self, ino: int) -> VersionAttr:
        """As the tree knows it: no request (the ``.`` and ``..`` of a listing)."""
        return self.attr(self._get(ino))

    async def getattr(self, ino: int) -> VersionAttr:
        node = self._get(ino)
        with self.index.charge.held():
            if node.kind in ("hdir", "hfile", "hlog"):
                await self._recheck_path(node.path)
            elif node.kind in ("vfile", "log"):
                await self._learn(newer=False, sweep=True)
            return self.attr(node)

    # -- freshness ----------------------------------------------------------------------------

    async def _learn(self, *, newer: bool = True, sweep: bool = False) -> None:
        """Bring the index up to date (rate-limited, see ``VersionIndex.refresh``)."""
        await self.index.refresh(newer=newer, sweep=sweep)
        self._collect_redactions()

    async def _recheck_path(self, path: str) -> None:
        """Re-list the versions of every memory that was ever at ``path`` (usually one), each
        at most every ``recheck`` seconds: a history directory shows redactions at once."""
        await self.index.refresh()
        entries, _ = self.index.history()
        memories = {self.index.versions[e.version_id].memory_id for e in entries.get(path, ())}
        for memory_id in sorted(memories):
            await self.index.recheck(memory_id, self.config.recheck)
        self._collect_redactions()

    def _collect_redactions(self) -> None:
        """Queue kernel invalidations for what newly learnt redactions changed: the mode of
        every node showing such a version, the name of its history entries, the logs."""
        redacted = self.index.newly_redacted
        if not redacted:
            return
        items: list[tuple[str, int, bytes]] = []
        for node in list(self.nodes.values()):
            if node.kind in ("log", "hlog"):
                items.append(("inode", node.ino, b""))
            if node.version_id not in redacted:
                continue
            items.append(("inode", node.ino, b""))
            parent = self.by_key.get(("hdir", node.path))
            if node.kind == "hfile" and parent is not None:
                items.append(("entry", parent.ino, str(node.key[2]).encode("utf-8")))
        log.debug("versions: %d redaction(s) learnt", len(redacted))
        redacted.clear()
        self._invalidations.extend(items)
        del self._invalidations[:-MAX_INVALIDATIONS]  # undrained (no kernel): keep the newest

    def take_invalidations(self) -> list[tuple[str, int, bytes]]:
        """Invalidations (``Invalidation`` tuples) to run from a worker thread, never in a
        handler: what learnt redactions changed, and the entries to forget."""
        items, self._invalidations = self._invalidations, []
        return items + self._shed()

    # -- names --------------------------------------------------------------------------------

    async def lookup(self, parent: int, name: str) -> VersionAttr:
        """``parent`` is the mount root (for ``.versions``) or a node of this tree."""
        with self.index.charge.held():
            node = await self._child(parent, name)
            node.lookups += 1
            return self.attr(node)

    async def _child(self, parent: int, name: str) -> VNode:
        if not self.owns(parent):
            if name != VERSIONS_NAME or not self.config.enabled:
                raise NoEntryError(name)
            return self.root
        node = self._get(parent)
        if name in (".", ".."):
            return node  # the kernel resolves these itself (supports_dot_lookup)
        if not node.is_dir:
            raise NotDirectoryError(f"{name}: not a directory")
        if node.kind == "root":
            return await self._root_child(name)
        if node.kind in ("view", "vdir"):
            return await self._view_child(node, name)
        return await self._history_child(node, name)

    async def _root_child(self, name: str, *, listed: bool = False) -> VNode:
        if name != LOG_NAME:
            self._used(name, listed=listed)
        if name == HISTORY_NAME:
            return self._node(("hdir", "/"), "hdir", path="/")
        if name == LOG_NAME:
            return self._node(("log",), "log")
        instant = parse_instant(name, self.clock())
        if instant is None:
            raise NoEntryError(f"{name}: not a time (see docs/semantics.md, .versions)")
        # a relative name means a new instant at each lookup: a new directory each time
        key: tuple[object, ...] = (
            ("view", name, instant) if name.startswith("-") else ("view", name)
        )
        return self._node(key, "view", path="/", instant=instant)

    async def _view(self, root: VNode) -> View:
        assert root.instant is not None
        self._used(str(root.key[1]))
        # new versions only matter to recent instants; redactions (the sweep) to any
        await self._learn(newer=not self.index.complete_at(root.instant), sweep=True)
        data = self._views.get(root.ino)
        if data is None or data.generation != self.index.generation:
            data = self.index.view(root.instant)
            self._views.put(root.ino, data)
        return data

    async def _view_child(self, node: VNode, name: str) -> VNode:
        root = node if node.kind == "view" else self._get(node.view)
        data = await self._view(root)
        path = sys.intern(paths.join(node.path, name))  # one copy for the views showing it
        version = data.files.get(path)
        if version is not None:
            child = self._node(("vfile", root.ino, path), "vfile", path=path, view=root.ino)
            child.version_id = version.id  # a view of a recent instant may have moved on
            return child
        if path in data.dirs:
            return self._node(("vdir", root.ino, path), "vdir", path=path, view=root.ino)
        raise NoEntryError(f"{path} did not exist at {stamp(data.instant)}")

    async def _history_child(self, node: VNode, name: str) -> VNode:
        self._used(HISTORY_NAME)
        await self._recheck_path(node.path)
        entries, tree = self.index.history()
        if node.path != "/" and name == LOG_NAME and node.path in entries:
            return self._node(("hlog", node.path), "hlog", path=node.path)
        for entry in entries.get(node.path, ()):
            if entry.name == name:
                return self._node(
                    ("hfile", node.path, name), "hfile", path=node.path, version_id=entry.version_id
                )
        if name in tree.get(node.path, ()):
            path = paths.join(node.path, name)
            return self._node(("hdir", path), "hdir", path=path)
        raise NoEntryError(f"{name}: no history")

    # -- directories --------------------------------------------------------------------------

    async def readdir(self, ino: int) -> list[tuple[str, int]]:
        """(name, inode) of every entry, sorted; each entry counts as a lookup when replied."""
        with self.index.charge.held():
            return await self._readdir(ino)

    async def readdir_attrs(self, ino: int) -> list[tuple[str, int, VersionAttr]]:
        """``readdir`` with each entry's attributes, taken from the same index (the index may
        be dropped before the kernel reads the listing: never compute them then)."""
        with self.index.charge.held():
            entries = await self._readdir(ino)
            return [(name, child, self.attr(self.nodes[child])) for name, child in entries]

    async def opendir(self, ino: int) -> list[ListedVersion]:
        """The listing a mount replies (``readdir_attrs``)."""
        entries = await self.readdir_attrs(ino)
        return [ListedVersion(name.encode("utf-8"), i, attr, self) for name, i, attr in entries]

    async def _readdir(self, ino: int) -> list[tuple[str, int]]:
        node = self._get(ino)
        if not node.is_dir:
            raise NotDirectoryError("not a directory")
        if node.kind == "root":
            await self._learn()  # instants never change: redactions need no sweep here
            names = [stamp(moment) for moment in self.index.instants()]
            names += [HISTORY_NAME, LOG_NAME]
        elif node.kind in ("view", "vdir"):
            root = node if node.kind == "view" else self._get(node.view)
            data = await self._view(root)
            names = list(data.dirs.get(node.path, ()))
        else:
            await self._recheck_path(node.path)
            entries, tree = self.index.history()
            names = [entry.name for entry in entries.get(node.path, ())]
            if node.path in entries:
                names.append(LOG_NAME)
            names += [n for n in tree.get(node.path, ()) if n not in names]
        result = []
        for name in sorted(set(names)):
            try:
                if node.kind == "root":  # shown, not used: the first the kernel may forget
                    child = await self._root_child(name, listed=True)
                else:
                    child = await self._child(ino, name)
            except NoEntryError:
                continue
            result.append((name, child.ino))
        return result

    def parent(self, ino: int) -> int | None:
        """The inode of the directory holding ``ino`` (its ``..``); None for ``.versions``
        itself, whose parent is the mount root (not this tree's)."""
        node = self._get(ino)
        if node is self.root:
            return None
        if node.kind in ("view", "log"):
            return self.root.ino
        if node.kind in ("vdir", "vfile"):
            up = paths.parent(node.path)
            if up == "/":
                return node.view
            # the kernel holds a directory's parent while it holds the directory: known
            return self._node(("vdir", node.view, up), "vdir", path=up, view=node.view).ino
        directory = node.path if node.kind in ("hfile", "hlog") else paths.parent(node.path)
        if node.kind == "hdir" and node.path == "/":
            return self.root.ino
        return self._node(("hdir", directory), "hdir", path=directory).ino

    # -- files --------------------------------------------------------------------------------

    async def open(self, ino: int, flags: int) -> tuple[int, bool]:
        """Open for reading; returns (fh, keep_cache)."""
        with self.index.charge.held():
            return await self._open(ino, flags)

    async def _open(self, ino: int, flags: int) -> tuple[int, bool]:
        node = self._get(ino)
        if (flags & os.O_ACCMODE) != os.O_RDONLY or flags & (os.O_TRUNC | os.O_APPEND):
            raise ReadOnlyError(f"{VERSIONS_NAME} is read-only")
        if node.is_dir:
            raise IsDirectoryError("is a directory")
        if node.kind == "log":
            await self._learn(sweep=True)
            data, keep = self._log(node), False
        elif node.kind == "hlog":
            await self._recheck_path(node.path)
            data, keep = self._log(node), False
        else:
            data, keep = await self._content(node.version_id or ""), False
        node.open_count += 1
        handle = VHandle(self._next_fh, node, data)
        self._next_fh += 1
        self.handles[handle.fh] = handle
        return handle.fh, keep

    async def read(self, fh: int, offset: int, size: int) -> bytes:
        handle = self.handles.get(fh)
        if handle is None:
            raise InvalidArgumentError(f"no open file {fh}")
        return handle.data[offset : offset + size]

    async def release(self, fh: int) -> None:
        handle = self.handles.pop(fh, None)
        if handle is not None:
            handle.node.open_count -= 1
            self._maybe_drop(handle.node)

    async def readlink(self, ino: int) -> bytes:
        self._get(ino)
        raise InvalidArgumentError("not a symbolic link")

    async def _content(self, version_id: str) -> bytes:
        await self.index.refresh(newer=False)  # lists the history again if it was dropped
        version = self.index.versions.get(version_id)
        if version is None:
            raise NoEntryError(f"unknown version {version_id}")
        await self.index.recheck(version.memory_id, self.config.recheck)
        self._collect_redactions()
        version = self.index.versions[version_id]
        _refuse_redacted(version)
        if version.operation == "deleted" or version.content_sha256 is None:
            return b""
        cached = self.contents.get(version.content_sha256)
        if cached is not None:
            return cached
        full = await self.store.get_version(version_id)
        if full.redacted:
            self.index.merge([full])
            self._collect_redactions()
            _refuse_redacted(full)
        content = (full.content or "").encode("utf-8")
        self.contents.put(version.content_sha256, content)
        return content

    # -- generated text -----------------------------------------------------------------------

    def _log(self, node: VNode) -> bytes:
        cached = self._logs.get(node.key)
        if cached is not None and cached[0] == self.index.generation:
            return cached[1]
        text = self._store_log() if node.kind == "log" else self._path_log(node.path)
        data = text.encode("utf-8")
        self._logs.put(node.key, (self.index.generation, data))
        return data

    def _describe(self, version: MemoryVersion) -> str:
        if version.redacted:
            by = version.redacted_by.describe() if version.redacted_by else "unknown"
            assert version.redacted_at is not None
            return f"redacted at {stamp(version.redacted_at)} by {by}"
        if version.operation == "deleted":
            return "no content"
        return f"{version.content_size_bytes} bytes sha256 {(version.content_sha256 or '')[:12]}"

    def _store_log(self) -> str:
        lines = []
        for _, _, version_id in self.index.order:
            version = self.index.versions[version_id]
            actor = version.created_by.describe() if version.created_by else "unknown"
            path = self.index.paths.get(version_id) or "?"
            lines.append(
                f"{stamp(version.created_at)}  {version.operation:<8}  {path}  by {actor}  "
                f"{version.id} of {version.memory_id}  {self._describe(version)}\n"
            )
        return "".join(lines)

    def _path_log(self, path: str) -> str:
        entries, _ = self.index.history()
        lines = []
        for entry in entries.get(path, ()):
            version = self.index.versions[entry.version_id]
            actor = version.created_by.describe() if version.created_by else "unknown"
            what = entry.role
            if entry.role == "renamed-in":
                what = f"renamed from {entry.other}"
            elif entry.role == "renamed-out":
                what = f"renamed to {entry.other}"
            lines.append(
                f"{entry.name}\n  {what} by {actor}\n  version {version.id} of memory "
                f"{version.memory_id}, {self._describe(version)}\n"
            )
        return "".join(lines)


def _refuse_redacted(version: MemoryVersion) -> None:
    if version.redacted:
        by = version.redacted_by.describe() if version.redacted_by else "unknown"
        raise AccessDeniedError(
            f"version {version.id} was redacted at "
            f"{stamp(version.redacted_at or version.created_at)} by {by}; its content is gone"
        )
