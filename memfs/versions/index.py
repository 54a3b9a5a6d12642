"""The version index of a store: every version's metadata (from paged ``view=basic``
listings), extended incrementally, and the point-in-time views and per-path histories computed
from it. See ``memfs.versions.tree`` for the cost rules.

It grows with the store's history (about 650 bytes a version), so it is charged to the mount's
cache budget (``DroppableCharge``): when it is the least recently used part of the budget, it
is dropped whole, and its next use lists the history again (one paged listing, as at the first
use). A view is a function of the versions at or before its instant, so a view computed after
a rebuild is the one computed before (redactions aside, which a rebuild learns like a sweep).

Invariants: ``VersionIndex.order`` is sorted by (created_at, arrival) and holds each known
version once; a version's metadata only changes by redaction; the index is never dropped
while held (a listing is being merged, or the tree answers a request from it).
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import trio

from memfs.contract import paths
from memfs.contract.cache_budget import CacheBudget, DroppableCharge
from memfs.contract.models import Actor, MemoryVersion
from memfs.contract.store_api import StoreAPI
from memfs.contract.version_view import files_at, infer_paths
from memfs.versions.names import LOG_NAME, history_name

log = logging.getLogger(__name__)

# What the cache budget is charged for the index (measured with tracemalloc on versions parsed
# from the wire, tests/core/test_memory_bounds.py): a version, compacted, with its place in
# the order and the maps, and an entry of the computed histories (its name, mostly).
VERSION_BYTES = 650
HISTORY_ENTRY_BYTES = 300
UNBOUNDED = 1 << 62


def _order_key(version: MemoryVersion, arrival: int) -> tuple[datetime, int, str]:
    return (version.created_at, arrival, version.id)


@dataclass(frozen=True, slots=True)
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
        store: StoreAPI,
        *,
        refresh_interval: float = 1.0,
        settled_after: float = 10.0,
        sweep_interval: float = 2.0,
        sweep_per_page: float = 1.0,
        budget: CacheBudget | None = None,
    ) -> None:
        """``budget``: the cache budget the index is charged to and dropped from when it is
        the least recently used there (None: a budget of its own, never short)."""
        self.store = store
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
        self._history_entries = 0
        self._actors: dict[Actor, Actor] = {}  # the few authors, shared by their versions
        self._lock = trio.Lock()
        self._checked: dict[str, float] = {}  # memory id -> monotonic time of its last re-listing
        self._history: tuple[int, dict[str, list[HistoryEntry]], dict[str, set[str]]] | None = None
        self._newest: datetime | None = None  # of every version ever known (kept by drop)
        self._rebuilding = False  # dropped and not yet listed whole again
        self.charge = DroppableCharge(
            budget or CacheBudget(UNBOUNDED), name="version index", drop=self.drop
        )

    # -- loading ------------------------------------------------------------------------------

    def complete_at(self, instant: datetime) -> bool:
        return self.complete_until is not None and instant <= self.complete_until

    def sweep_due(self) -> float:
        """Seconds between full re-listings: longer for a long history (re-read less often)."""
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
        self.charge.touch()
        if not self._due(force=force, newer=newer, sweep=sweep):
            return
        with self.charge.held():  # never dropped half-merged
            async with self._lock:
                if not self._due(force=force, newer=newer, sweep=sweep):
                    return
                started = time.monotonic()
                wall = datetime.now(UTC)
                full = not self.loaded or (sweep and started - self.swept_at >= self.sweep_due())
                newest = self.order[-1][0] if self.order else None
                changed: list[MemoryVersion] = []
                count = 0
                async for version in self.store.list_versions(since=None if full else newest):
                    count += 1
                    if self.versions.get(version.id) != version:
                        changed.append(version)
                self.merge(reversed(changed))
                self.loaded = True
                self.refreshed_at = started
                self.complete_until = wall - timedelta(seconds=self.settled_after)
                if full:
                    self._rebuilding = False
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
        self.charge.touch()
        started = time.monotonic()
        with self.charge.held():
            listed = [v async for v in self.store.list_versions(memory_id=memory_id)]
        changed = [v for v in listed if self.versions.get(v.id) != v]
        if changed:
            self.merge(reversed(changed))
        self._checked[memory_id] = started

    def merge(self, versions: Iterable[MemoryVersion]) -> None:
        touched: set[str] = set()
        for version in versions:
            version = self._compact(version)
            known = self.versions.get(version.id)
            self.versions[version.id] = version
            touched.add(version.memory_id)
            if known is not None:
                if version.redacted and not known.redacted:
                    self.newly_redacted.add(version.id)
                continue  # a redaction: same place in the order
            if version.redacted and self._rebuilding:
                self.newly_redacted.add(version.id)  # perhaps redacted while dropped
            if self._newest is None or version.created_at > self._newest:
                self._newest = version.created_at
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
        self._charge()

    def _charge(self) -> None:
        """Tell the budget what the index holds now (an estimate: ``VERSION_BYTES`` a version,
        ``HISTORY_ENTRY_BYTES`` an entry of the histories while they are computed)."""
        entries = 0 if self._history is None else self._history_entries
        self.charge.set(VERSION_BYTES * len(self.versions) + HISTORY_ENTRY_BYTES * entries)

    def drop(self) -> None:
        """Forget every version (the cache budget needs the room, and the index was its least
        recently used part): the next ``refresh`` lists the whole history again. What the
        kernel was shown stays true: versions are immutable but for redactions, which the
        new listing reports (``newly_redacted``) like a sweep."""
        log.debug("version index: dropping %d versions (cache budget)", len(self.versions))
        self.versions = {}
        self.order = []
        self.by_memory = {}
        self.paths = {}
        self._checked = {}
        self._actors = {}
        self._history = None
        self.loaded = False
        self.complete_until = None
        self.refreshed_at = self.swept_at = -1e18
        self._rebuilding = True

    def newest(self) -> datetime | None:
        """When the newest version known (now or before a drop) was made."""
        return self._newest

    def _compact(self, version: MemoryVersion) -> MemoryVersion:
        """``version`` sharing the strings and actors its neighbours hold: from the wire, each
        version carries its own copy of its store's id, its memory's id, its path and its
        author (about 300 of the ~1 kB a version took)."""
        actor = version.created_by
        if actor is not None:
            actor = self._actors.setdefault(actor, actor)
        return dataclasses.replace(
            version,
            memory_id=sys.intern(version.memory_id),
            memory_store_id=sys.intern(version.memory_store_id),
            operation=sys.intern(version.operation),  # type: ignore[arg-type]
            path=None if version.path is None else sys.intern(version.path),
            created_by=actor,
        )

    def _infer_paths(self, ids: list[str]) -> None:
        """A redacted version has no path: ``version_view.infer_paths`` gives it one."""
        inferred = infer_paths([self.versions[version_id].path for version_id in ids])
        self.paths.update(zip(ids, inferred, strict=True))

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
        files = files_at((version, self.paths.get(version.id)) for version in latest.values())
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
        self._history_entries = sum(map(len, result.values()))
        self._charge()
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
