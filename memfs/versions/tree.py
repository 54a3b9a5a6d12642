"""The read-only ``.versions/`` tree of a mount: the store at any moment, and each path's history.

Owns everything below ``MOUNTPOINT/.versions``:
- ``<time>/``: the whole store as it was at that instant (``parse_instant`` reads the name);
- the timeline: ``ls .versions`` lists one colon-free instant per change, plus ``history/`` and
  ``log.txt`` (every change, one line each);
- ``history/<memory path>/``: one file per version that was ever at that path, named
  ``<time>-<operation>-<actor>``, oldest first, plus ``log.txt`` with the details;
- the version index (every version's metadata, from paged ``view=basic`` listings, kept for the
  daemon's life and extended incrementally), point-in-time views computed from it, and a cache
  of version contents by sha256 without expiry, bounded by bytes.

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

It must not import pyfuse3 or the rest of the filesystem core (``vfs`` creates it and
``fuse_ops`` dispatches to it by inode and handle number: everything here is numbered from
``INODE_BASE`` up, far above the core's inodes), must not decide errnos, and must never write
to the store: every mutation below ``.versions`` is refused with ``ReadOnlyError``.

Invariants:
- ``VersionIndex.order`` is sorted by (created_at, arrival) and holds each known version once;
  a version's metadata only changes by redaction;
- inode numbers are never reused; a node leaves the table when the kernel forgot it and no
  handle is open on it; the root ``.versions`` node never leaves;
- each spelling of an instant is its own directory inode (the kernel forbids directory aliases).
"""

from __future__ import annotations

import bisect
import logging
import os
import re
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import cachetools
import trio

from memfs import paths
from memfs.api import StoreClient
from memfs.errors import (
    AccessDeniedError,
    InvalidArgumentError,
    IsDirectoryError,
    NoEntryError,
    NotDirectoryError,
    ReadOnlyError,
)
from memfs.models import Actor, MemoryVersion

log = logging.getLogger(__name__)

VERSIONS_NAME = ".versions"
INODE_BASE = 1 << 48  # the core numbers its inodes from 2 up; these never meet
HANDLE_BASE = 1 << 48
HISTORY_NAME = "history"
LOG_NAME = "log.txt"
MAX_NAME_BYTES = 255
MAX_INVALIDATIONS = 1000  # queued kernel invalidations kept when nobody takes them

# =============================================================================================
# names of instants


_ABSOLUTE = re.compile(
    r"^(?P<y>\d{4})-?(?P<mo>\d{2})-?(?P<d>\d{2})"
    r"(?:[Tt ](?P<h>\d{2})(?::?(?P<mi>\d{2})(?::?(?P<s>\d{2})(?:[.,](?P<f>\d+))?)?)?"
    r"(?P<tz>[Zz]|[+-]\d{2}(?::?\d{2})?)?)?$"
)
_RELATIVE = re.compile(r"^-(?:\d+[smhdw])+$")
_RELATIVE_PART = re.compile(r"(\d+)([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_UNIX = re.compile(r"^@(?P<s>\d{1,12})(?:\.(?P<f>\d+))?$")


def parse_instant(name: str, now: datetime | None = None) -> datetime | None:
    """The UTC instant a directory name under ``.versions`` stands for, or None.

    Accepted (times without a zone are UTC; fractions beyond microseconds are cut):
    ``2026-11-29T10:15:03Z``, ``2026-11-29T10:15:03.250Z``, colon-free ``2026-11-29T101503Z``
    and ``2026-11-29T101503.250123Z`` (the timeline's spelling), basic ``20261129T101503Z``,
    minutes ``2026-11-29T10:15Z``, offsets ``2026-11-29T11:15:03+01:00``, a date alone
    ``2026-11-29`` (midnight UTC, the start of that day), relative ``-90s``, ``-15m``, ``-2h``,
    ``-1d``, ``-1w``, ``-1h30m`` (before ``now``), and Unix time ``@1764411303[.5]``.
    """
    if _RELATIVE.match(name):
        seconds = sum(int(n) * _UNIT_SECONDS[u] for n, u in _RELATIVE_PART.findall(name))
        try:
            return (now or datetime.now(UTC)) - timedelta(seconds=seconds)
        except OverflowError:
            return None
    unix = _UNIX.match(name)
    if unix:
        micros = int((unix.group("f") or "").ljust(6, "0")[:6])
        try:
            return datetime.fromtimestamp(int(unix.group("s")), UTC) + timedelta(
                microseconds=micros
            )
        except (OverflowError, OSError, ValueError):
            return None
    match = _ABSOLUTE.match(name)
    if not match:
        return None
    g = match.groupdict()
    try:
        day = date(int(g["y"]), int(g["mo"]), int(g["d"]))
        if g["h"] is None:
            return datetime(day.year, day.month, day.day, tzinfo=UTC)
        moment = datetime(
            day.year,
            day.month,
            day.day,
            int(g["h"]),
            int(g["mi"] or 0),
            int(g["s"] or 0),
            int((g["f"] or "").ljust(6, "0")[:6]),
            tzinfo=UTC,
        )
    except ValueError:
        return None
    tz = g["tz"]
    if tz and tz not in ("Z", "z"):
        digits = tz[1:].replace(":", "")
        hours, minutes = int(digits[:2]), int(digits[2:] or 0)
        if hours > 23 or minutes > 59:
            return None
        offset = timedelta(hours=hours, minutes=minutes)
        moment = moment - offset if tz[0] == "+" else moment + offset
    return moment


def stamp(moment: datetime) -> str:
    """The timeline's colon-free, fixed-width, sortable spelling: ``2026-11-29T101503.250123Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H%M%S.%fZ")


_UNSAFE = re.compile(r"[^A-Za-z0-9._@+=-]")


def actor_label(actor: Actor | None) -> str:
    """``session-sesn_01``, ``api-apikey_01``, ``user-user_01``; ``unknown`` if none."""
    if actor is None:
        return "unknown"
    kind = actor.type.removesuffix("_actor").replace("_", "-") or "unknown"
    ident = _UNSAFE.sub("_", actor.id)
    return f"{kind}-{ident}" if ident else kind


def history_name(moment: datetime, role: str, actor: Actor | None, redacted: bool) -> str:
    """``<time>-<role>-<actor>[-redacted]``, cut to fit one name component."""
    tail = "-redacted" if redacted else ""
    head = f"{stamp(moment)}-{role}-"
    room = MAX_NAME_BYTES - len(head) - len(tail)
    return head + actor_label(actor)[:room] + tail


# =============================================================================================
# the version index


def _order_key(version: MemoryVersion, arrival: int) -> tuple[datetime, int, str]:
    return (version.created_at, arrival, version.id)


@dataclass(frozen=True)
class HistoryEntry:
    """One version as seen from one path: ``role`` is created, modified, renamed-in,
    renamed-out or deleted; ``other`` is the path at the other end of a rename."""

    name: str
    version_id: str
    role: str
    other: str | None = None


@dataclass
class View:
    """The store at one instant: files (path -> version) and directories (path -> names)."""

    instant: datetime
    generation: int
    complete: bool  # the index knew every version at or before the instant
    files: dict[str, MemoryVersion]
    dirs: dict[str, set[str]]


class VersionIndex:
    """Every version of one store (metadata only, ``view=basic``), oldest first."""

    def __init__(
        self,
        client: StoreClient,
        store_id: str,
        *,
        refresh_interval: float = 1.0,
        settled_after: float = 10.0,
        sweep_interval: float = 2.0,
        sweep_per_page: float = 1.0,
    ) -> None:
        self.client = client
        self.store_id = store_id
        self.refresh_interval = refresh_interval
        self.settled_after = settled_after  # instants older than this (s) get no new versions
        self.sweep_interval = sweep_interval  # full re-listings (redactions): at most this often
        self.sweep_per_page = sweep_per_page  # ... and at most once per this many s per page
        self.versions: dict[str, MemoryVersion] = {}
        self.order: list[tuple[datetime, int, str]] = []
        self.by_memory: dict[str, list[str]] = {}  # memory id -> version ids, oldest first
        self.paths: dict[str, str | None] = {}  # version id -> its path (inferred if redacted)
        self.generation = 0
        self.loaded = False
        self.refreshed_at = -1e18  # monotonic
        self.complete_until: datetime | None = None  # no version at or before is still unknown
        self.swept_at = -1e18  # monotonic time of the last full listing
        self.swept_pages = 0  # how many pages it took
        self.newly_redacted: set[str] = set()  # redactions learnt, not yet seen by the tree
        self._arrivals = 0
        self._lock = trio.Lock()
        self._checked: dict[str, float] = {}  # memory id -> monotonic time of its last re-listing
        self._history: tuple[int, dict[str, list[HistoryEntry]], dict[str, set[str]]] | None = None

    # -- loading ------------------------------------------------------------------------------

    def complete_at(self, instant: datetime) -> bool:
        return self.complete_until is not None and instant <= self.complete_until

    def sweep_due(self) -> float:
        """Seconds between full re-listings: ``sweep_interval``, or more for a long history
        (``sweep_per_page`` per page of 100 versions), so a big store is not re-read often."""
        return max(self.sweep_interval, self.sweep_per_page * self.swept_pages)

    async def refresh(
        self, *, force: bool = False, newer: bool = True, sweep: bool = False
    ) -> None:
        """Learn what changed in the store's history.

        ``newer``: versions newer than the newest known (at most every ``refresh_interval``);
        ``sweep``: the whole history again (at most every ``sweep_due()`` seconds), the only
        way to learn of redactions of old versions (no listing filters on ``redacted_at``).
        The first call always lists everything.
        """
        if not self._due(force=force, newer=newer, sweep=sweep):
            return
        async with self._lock:
            if not self._due(force=force, newer=newer, sweep=sweep):
                return
            started = time.monotonic()
            wall = datetime.now(UTC)
            full = not self.loaded or (sweep and started - self.swept_at >= self.sweep_due())
            newest = self.order[-1][0] if self.order else None
            changed: list[MemoryVersion] = []
            count = 0
            async for version in self.client.list_versions(
                self.store_id,
                created_gte=None if full else newest,
                limit=100,
                view="basic",
            ):
                count += 1
                if self.versions.get(version.id) != version:
                    changed.append(version)
            self.merge(reversed(changed))
            self.loaded = True
            self.refreshed_at = started
            self.complete_until = wall - timedelta(seconds=self.settled_after)
            if full:
                self.swept_at = started
                self.swept_pages = -(-count // 100)
                for memory_id in self.by_memory:
                    self._checked[memory_id] = started
            if changed:
                log.debug(
                    "version index: %d new or changed, %d known (full listing: %s)",
                    len(changed),
                    len(self.versions),
                    full,
                )

    def _due(self, *, force: bool, newer: bool, sweep: bool) -> bool:
        now = time.monotonic()
        if force or not self.loaded:
            return True
        if sweep and now - self.swept_at >= self.sweep_due():
            return True
        return newer and now - self.refreshed_at >= self.refresh_interval

    async def recheck(self, memory_id: str, interval: float) -> None:
        """Re-list one memory's versions (redactions, new versions) unless done recently."""
        if time.monotonic() - self._checked.get(memory_id, -1e18) < interval:
            return
        started = time.monotonic()
        listed = [
            v
            async for v in self.client.list_versions(
                self.store_id, memory_id=memory_id, limit=100, view="basic"
            )
        ]
        changed = [v for v in listed if self.versions.get(v.id) != v]
        if changed:
            self.merge(reversed(changed))
        self._checked[memory_id] = started

    def merge(self, versions: Iterable[MemoryVersion]) -> None:
        touched: set[str] = set()
        for version in versions:
            known = self.versions.get(version.id)
            self.versions[version.id] = version
            touched.add(version.memory_id)
            if known is not None:
                if version.redacted and not known.redacted:
                    self.newly_redacted.add(version.id)
                continue  # a redaction: same place in the order
            self._arrivals += 1
            bisect.insort(self.order, _order_key(version, self._arrivals))
            ids = self.by_memory.setdefault(version.memory_id, [])
            ids.append(version.id)
        if not touched:
            return
        rank = {key[2]: position for position, key in enumerate(self.order)}
        for memory_id in touched:
            ids = self.by_memory[memory_id]
            ids.sort(key=rank.__getitem__)
            self._infer_paths(ids)
        self.generation += 1

    def _infer_paths(self, ids: list[str]) -> None:
        """A redacted version has no path: it keeps the path of the version before it (or,
        for a first version, the one after it)."""
        known: str | None = None
        for version_id in ids:
            path = self.versions[version_id].path
            known = path if path is not None else known
            self.paths[version_id] = known
        known = None
        for version_id in reversed(ids):
            own = self.versions[version_id].path
            if own is not None:
                known = own
            elif self.paths[version_id] is None:
                self.paths[version_id] = known

    # -- questions ----------------------------------------------------------------------------

    def instants(self) -> list[datetime]:
        """Every instant at which the store changed, oldest first, without repeats."""
        seen: list[datetime] = []
        for moment, _, _ in self.order:
            if not seen or seen[-1] != moment:
                seen.append(moment)
        return seen

    def view(self, instant: datetime) -> View:
        cut = bisect.bisect_right(self.order, (instant, 1 << 62, "\U0010ffff"))
        latest: dict[str, MemoryVersion] = {}
        for _, _, version_id in self.order[:cut]:
            version = self.versions[version_id]
            latest[version.memory_id] = version
        files: dict[str, MemoryVersion] = {}
        for version in latest.values():
            path = self.paths.get(version.id)
            if version.operation == "deleted" or path is None:
                continue
            other = files.get(path)
            if other is None or other.created_at <= version.created_at:
                files[path] = version
        return View(instant, self.generation, self.complete_at(instant), files, _tree(files))

    def history(self) -> tuple[dict[str, list[HistoryEntry]], dict[str, set[str]]]:
        """path -> its entries (oldest first), and the directory tree of those paths."""
        if self._history is not None and self._history[0] == self.generation:
            return self._history[1], self._history[2]
        entries: dict[str, list[tuple[tuple[datetime, int, str], HistoryEntry]]] = {}
        position = {key[2]: key for key in self.order}

        def add(path: str, version: MemoryVersion, role: str, other: str | None = None) -> None:
            name = history_name(version.created_at, role, version.created_by, version.redacted)
            entry = HistoryEntry(name, version.id, role, other)
            entries.setdefault(path, []).append((position[version.id], entry))

        for ids in self.by_memory.values():
            before: str | None = None
            for version_id in ids:
                version = self.versions[version_id]
                path = self.paths.get(version_id)
                if path is None:
                    continue
                if version.operation == "created":
                    add(path, version, "created")
                elif version.operation == "deleted":
                    add(path, version, "deleted")
                elif before is not None and path != before:
                    add(path, version, "renamed-in", before)
                    add(before, version, "renamed-out", path)
                else:
                    add(path, version, "modified")
                before = path
        result: dict[str, list[HistoryEntry]] = {}
        for path, items in entries.items():
            items.sort(key=lambda item: item[0])
            named: list[HistoryEntry] = []
            taken: set[str] = set()
            for _, entry in items:
                name, n = entry.name, 1
                while name in taken or name == LOG_NAME:
                    n += 1
                    name = f"{entry.name}-{n}"
                taken.add(name)
                named.append(entry if name == entry.name else _renamed(entry, name))
            result[path] = named
        tree = _tree(dict.fromkeys(result, None))
        self._history = (self.generation, result, tree)
        return result, tree


def _renamed(entry: HistoryEntry, name: str) -> HistoryEntry:
    return HistoryEntry(name, entry.version_id, entry.role, entry.other)


def _tree(files: Iterable[str] | dict[str, object]) -> dict[str, set[str]]:
    """directory -> names of its children, for a set of file paths."""
    dirs: dict[str, set[str]] = {"/": set()}
    for path in files:
        parent, name = paths.split(path)
        dirs.setdefault(parent, set()).add(name)
        for directory in paths.ancestors(path):
            up, up_name = paths.split(directory)
            dirs.setdefault(up, set()).add(up_name)
            dirs.setdefault(directory, set())
    return dirs


# =============================================================================================
# the tree


@dataclass(frozen=True)
class VersionAttr:
    """File attributes of a node of the tree (the same fields as ``vfs.Attr``)."""

    ino: int
    mode: int
    nlink: int
    size: int
    uid: int
    gid: int
    atime: float
    mtime: float
    ctime: float

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)


@dataclass(eq=False)
class VNode:
    """One inode below ``.versions``. ``kind`` says which part of the tree it belongs to."""

    ino: int
    key: tuple[object, ...]
    kind: str  # root | view | vdir | vfile | hdir | hfile | log | hlog
    path: str = "/"  # the store path it shows (view dirs/files, history dirs)
    view: int = 0  # the view root's inode (vdir, vfile)
    instant: datetime | None = None  # view roots
    version_id: str | None = None  # vfile, hfile
    view_data: View | None = None  # view roots
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
    uid: int = field(default_factory=os.getuid)
    gid: int = field(default_factory=os.getgid)
    cache_bytes: int = 64 * 1024 * 1024
    refresh_interval: float = 1.0  # at most one "anything new?" listing per interval
    recheck: float = 2.0  # re-list a memory's versions before its content or history is shown
    settled_after: float = 10.0  # views of instants older than this get no new versions
    sweep_interval: float = 2.0  # re-list the whole history (redactions) at most this often...
    sweep_per_page: float = 1.0  # ...and at most once per this many seconds per page of 100


class VersionCache:
    """Version contents by sha256: immutable, so no expiry; bounded by bytes (LRU)."""

    def __init__(self, max_bytes: int) -> None:
        self._cache: cachetools.LRUCache[str, bytes] = cachetools.LRUCache(
            maxsize=max_bytes, getsizeof=lambda value: max(1, len(value))
        )

    def get(self, sha: str) -> bytes | None:
        return self._cache.get(sha)

    def put(self, sha: str, content: bytes) -> None:
        if len(content) <= self._cache.maxsize:
            self._cache[sha] = content

    @property
    def size(self) -> int:
        return int(self._cache.currsize)


class VersionsTree:
    """The ``.versions`` tree of one mount. See the module docstring."""

    def __init__(
        self,
        client: StoreClient,
        store_id: str,
        config: VersionsConfig | None = None,
        *,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.config = config or VersionsConfig()
        self.client = client
        self.store_id = store_id
        self.index = VersionIndex(
            client,
            store_id,
            refresh_interval=self.config.refresh_interval,
            settled_after=self.config.settled_after,
            sweep_interval=self.config.sweep_interval,
            sweep_per_page=self.config.sweep_per_page,
        )
        self.contents = VersionCache(self.config.cache_bytes)
        self.clock = clock or (lambda: datetime.now(UTC))
        self.started = time.time()
        self.nodes: dict[int, VNode] = {}
        self.by_key: dict[tuple[object, ...], VNode] = {}
        self.handles: dict[int, VHandle] = {}
        self._next_ino = INODE_BASE
        self._next_fh = HANDLE_BASE
        self._logs: dict[tuple[object, ...], tuple[int, bytes]] = {}
        self._invalidations: list[tuple[str, int, bytes]] = []
        self.root = self._node(("root",), "root")

    # -- numbering ----------------------------------------------------------------------------

    @staticmethod
    def owns(ino: int) -> bool:
        return ino >= INODE_BASE

    @staticmethod
    def owns_handle(fh: int) -> bool:
        return fh >= HANDLE_BASE

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
            newest = self.index.order[-1][0].timestamp() if self.index.order else self.started
            return self._attr(node.ino, directory, 0, newest)
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

    async def getattr(self, ino: int) -> VersionAttr:
        node = self._get(ino)
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
        """Kernel cache invalidations to run (``vfs.Invalidation`` tuples: ``("inode", ino,
        b"")`` or ``("entry", parent_ino, name)``), from a worker thread, never in a handler."""
        items, self._invalidations = self._invalidations, []
        return items

    # -- names --------------------------------------------------------------------------------

    async def lookup(self, parent: int, name: str) -> VersionAttr:
        """``parent`` is the mount root (for ``.versions``) or a node of this tree."""
        node = await self._child(parent, name)
        node.lookups += 1
        return self.attr(node)

    async def _child(self, parent: int, name: str) -> VNode:
        if not self.owns(parent):
            if name != VERSIONS_NAME:
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

    async def _root_child(self, name: str) -> VNode:
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
        # new versions only matter to recent instants; redactions (the sweep) to any
        await self._learn(newer=not self.index.complete_at(root.instant), sweep=True)
        data = root.view_data
        if data is None or data.generation != self.index.generation:
            data = self.index.view(root.instant)
            root.view_data = data
        return data

    async def _view_child(self, node: VNode, name: str) -> VNode:
        root = node if node.kind == "view" else self._get(node.view)
        data = await self._view(root)
        path = paths.join(node.path, name)
        version = data.files.get(path)
        if version is not None:
            child = self._node(("vfile", root.ino, path), "vfile", path=path, view=root.ino)
            child.version_id = version.id  # a view of a recent instant may have moved on
            return child
        if path in data.dirs:
            return self._node(("vdir", root.ino, path), "vdir", path=path, view=root.ino)
        raise NoEntryError(f"{path} did not exist at {stamp(data.instant)}")

    async def _history_child(self, node: VNode, name: str) -> VNode:
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
                child = await self._child(ino, name)
            except NoEntryError:
                continue
            result.append((name, child.ino))
        return result

    # -- files --------------------------------------------------------------------------------

    async def open(self, ino: int, flags: int) -> tuple[int, bool]:
        """Open for reading; returns (fh, keep_cache)."""
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

    def refuse(self, what: str) -> ReadOnlyError:
        """The error for any change below ``.versions``."""
        return ReadOnlyError(f"{what}: {VERSIONS_NAME} is read-only")

    async def _content(self, version_id: str) -> bytes:
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
        full = await self.client.get_version(self.store_id, version_id)
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
        self._logs[node.key] = (self.index.generation, data)
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
