"""Clean, re-fetchable data of a mount: memory contents by sha, directory listings by path.

Everything here may vanish at any moment (LRU eviction, expiry) and is fetched again when
needed. Dirty data (a local copy not yet uploaded) must never be stored here: it lives on the
inode (``Node.data``) and in the journal until the write-back queue has uploaded it.

Freshness of listings: a listing is served for ``ttl`` seconds (1 s), or for as long as the
change feed *vouches* for the cache (``vouch(until)``: it polled successfully and brought the
listings its changes touched up to date). When the feed stops vouching (errors, a gap it cannot
trust), listings fall back to the short ``ttl``.

Cached listings are patched rather than dropped when a memory changes (``record`` for a write's
answer, ``apply_version`` for a change the feed reported): the memory's item moves to the listing
of its new directory, ancestors' listings gain the directory prefixes its path implies, and a
directory left empty disappears from its parent's listing. A directory of 2,000 memories costs 20
listing requests, so dropping it on every change would cost that much per write. Only what
cannot be derived is dropped (a memory moved in from a directory that is not cached: its
``created_at`` is unknown; a directory that may have emptied but whose listing is not cached).

This module must not talk to the server or know about inodes or FUSE.
"""

from __future__ import annotations

import bisect
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cached_property
from typing import TypeGuard

from memfs.contract import paths
from memfs.contract.cache_budget import BudgetedCache, CacheBudget
from memfs.contract.models import ListItem, Memory, MemoryPrefix, MemoryVersion
from memfs.core.model.config import DEFAULT_CONTENT_BYTES

log = logging.getLogger(__name__)

_START_OF_TIME = datetime.min.replace(tzinfo=UTC)
_END_OF_TIME = datetime.max.replace(tzinfo=UTC)


class ContentCache:
    """Memory contents keyed by their sha256, charged by bytes to a ``CacheBudget`` (LRU
    across the caches that share it; its own budget of ``max_bytes`` if none is given)."""

    def __init__(
        self, max_bytes: int = DEFAULT_CONTENT_BYTES, *, budget: CacheBudget | None = None
    ) -> None:
        self.budget = budget or CacheBudget(max_bytes)
        self._cache: BudgetedCache[str, bytes] = BudgetedCache(self.budget, len, name="contents")
        self.hits = 0
        self.misses = 0

    @property
    def max_bytes(self) -> int:
        """The budget this cache shares (with the other caches handed the same one)."""
        return self.budget.max_bytes

    def get(self, sha: str | None) -> bytes | None:
        if sha is None:
            return None
        value = self._cache.get(sha)
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return value

    def peek(self, sha: str | None) -> bool:
        """True if ``sha`` is cached (counts nothing)."""
        return sha is not None and sha in self._cache

    def put(self, sha: str, content: bytes) -> None:
        self._cache.put(sha, bytes(content))  # never a caller's bytearray or memoryview

    @property
    def bytes(self) -> int:
        return self._cache.bytes

    def __len__(self) -> int:
        return len(self._cache)


@dataclass(frozen=True)
class Listing:
    """A ``depth=1`` listing of one directory; ``started`` is when the request began.

    Immutable (a syscall may hold it while a patch replaces it in the cache). Lookups by name
    and by memory id use an index built once per fetched listing; a patch (``with_item``,
    ``without``) hands the new listing its predecessor's index, corrected for the one item
    it changes, so a directory of 2,000 memories is never scanned again to look up one name.
    """

    started: float
    items: tuple[ListItem, ...]
    # memory id -> when a change to it was patched in (monotonic): what the listing says of
    # that memory is as new as the patch, not as old as ``started``
    patched: Mapping[str, float] = field(default_factory=dict)

    def known_at(self, memory_id: str | None) -> float:
        """How recent the listing's word on ``memory_id`` is (its presence or absence)."""
        if memory_id is None:
            return self.started
        return self.patched.get(memory_id, self.started)

    def named(self, name: str) -> tuple[ListItem, ...]:
        """The items called ``name`` (a memory and a prefix may share one), in path order."""
        return self._index.by_name.get(name, ())

    def name_of(self, memory_id: str) -> str | None:
        return self._index.names_of_ids.get(memory_id)

    def memory(self, memory_id: str) -> Memory | None:
        """The item of ``memory_id``, if the listing shows it."""
        name = self.name_of(memory_id)
        for item in self.named(name) if name is not None else ():
            if _is_memory(item, memory_id):
                return item
        return None

    def directory_item(self, directory: str) -> MemoryPrefix | None:
        """The prefix item of ``directory`` (a child of the listed one), if listed."""
        prefix = paths.as_prefix(directory)
        for item in self.named(paths.basename(directory)):
            if isinstance(item, MemoryPrefix) and item.path == prefix:
                return item
        return None

    def with_item(self, item: ListItem, *, now: float) -> Listing:
        """This listing with ``item`` in path order, as the server sorts (``started`` kept);
        a memory's entry is as new as ``now``."""
        items = list(self.items)
        bisect.insort(items, item, key=_path_of)
        patched = self.patched
        if isinstance(item, Memory):
            patched = {**patched, item.id: now}
        return self._patched(replace(self, items=tuple(items), patched=patched), added=item)

    def without(self, item: ListItem, *, now: float) -> Listing:
        """This listing without ``item`` (one of its items); a memory's absence is as new as
        ``now``."""
        items = self.items
        at = bisect.bisect_left(items, item.path, key=_path_of)
        while at < len(items) and items[at] is not item and items[at].path == item.path:
            at += 1
        if at >= len(items) or items[at] is not item:  # not in path order: look everywhere
            at = next(n for n, i in enumerate(items) if i is item)
        patched = self.patched
        if isinstance(item, Memory):
            patched = {**patched, item.id: now}
        remaining = items[:at] + items[at + 1 :]
        return self._patched(replace(self, items=remaining, patched=patched), removed=item)

    def _patched(
        self, listing: Listing, *, added: ListItem | None = None, removed: ListItem | None = None
    ) -> Listing:
        """Seed ``listing`` (this one patched) with this one's index, corrected."""
        if "_index" in self.__dict__:  # not built yet: the new listing builds its own if asked
            listing.__dict__["_index"] = self._index.changed(added=added, removed=removed)
        return listing

    @cached_property
    def _index(self) -> _Index:
        return _Index.of(self.items)


@dataclass(frozen=True)
class _Index:
    """A listing's items by entry name, and the entry names of its memories by id."""

    by_name: dict[str, tuple[ListItem, ...]]
    names_of_ids: dict[str, str]

    @classmethod
    def of(cls, items: tuple[ListItem, ...]) -> _Index:
        by_name: dict[str, tuple[ListItem, ...]] = {}
        names_of_ids: dict[str, str] = {}
        for item in items:
            name = listing_name(item)
            by_name[name] = (*by_name.get(name, ()), item)
            if isinstance(item, Memory):
                names_of_ids[item.id] = name
        return cls(by_name, names_of_ids)

    def changed(self, *, added: ListItem | None, removed: ListItem | None) -> _Index:
        """A copy with one item added or removed (dict copies: no Python work per entry)."""
        by_name = dict(self.by_name)
        names_of_ids = self.names_of_ids
        if added is not None:
            name = listing_name(added)
            by_name[name] = tuple(sorted((*by_name.get(name, ()), added), key=_path_of))
            if isinstance(added, Memory):
                names_of_ids = {**names_of_ids, added.id: name}
        if removed is not None:
            name = listing_name(removed)
            left = tuple(i for i in by_name.get(name, ()) if i is not removed)
            if left:
                by_name[name] = left
            else:
                by_name.pop(name, None)
            if isinstance(removed, Memory):
                names_of_ids = dict(names_of_ids)
                names_of_ids.pop(removed.id, None)
        return _Index(by_name, names_of_ids)


def _path_of(item: ListItem) -> str:
    return item.path


def listing_name(item: ListItem) -> str:
    """The entry name of a listing item: ``/d/a.md`` -> ``a.md``, ``/d/sub/`` -> ``sub``."""
    return paths.basename(item.path.rstrip("/"))


def listing_bytes(listing: Listing) -> int:
    """A listing's cache charge: its Python objects, about 800 bytes an item (measured)."""
    return LISTING_BYTES + LISTING_ITEM_BYTES * len(listing.items)


LISTING_BYTES = 200
LISTING_ITEM_BYTES = 800


class ListingCache:
    """Directory listings: ``ttl`` seconds, or while the change feed vouches (module doc).

    Charged to a ``CacheBudget`` (``listing_bytes`` each; the mount's, shared with its
    contents; its own of ``DEFAULT_CONTENT_BYTES`` if none is given) and to at most
    ``maxsize`` directories: the budget evicts the listing used least recently, as the whole
    listing of a directory (``evict_oldest``), only between two calls of this class."""

    def __init__(
        self, ttl: float = 1.0, maxsize: int = 4096, *, budget: CacheBudget | None = None
    ) -> None:
        self.ttl = ttl
        self.maxsize = maxsize
        self.name = "listings"
        self.budget = budget or CacheBudget(DEFAULT_CONTENT_BYTES)
        self.bytes = 0  # charged to the budget: the sum of ``_charged``
        self._charged: dict[str, int] = {}  # directory -> its listing's bytes
        self._used: dict[str, int] = {}  # directory -> the budget's clock at its last use
        self.budget.join(self)
        self._cache: dict[str, Listing] = {}
        self._where: dict[str, str] = {}  # memory id -> directory whose listing shows it
        self._changed: dict[str, float] = {}  # directory -> when its listing was dropped/patched
        self._latest: dict[str, datetime] = {}  # memory id -> newest state seen (server time)
        self._gone: list[str] = []  # directories that left their parent's listing (take_gone)
        self._cleared = -math.inf
        self.vouched_until = 0.0  # monotonic
        # listings begun before this (monotonic) are not covered by the feed's vouch: the feed
        # reports changes from its start on, so they may miss one (``distrust_older``)
        self._trusted_from = -math.inf
        self.hits = 0
        self.misses = 0
        self.patches = 0  # changes applied to cached listings instead of fetching them again

    def vouch(self, until: float) -> None:
        """The change feed keeps cached listings current until ``until`` (monotonic)."""
        self.vouched_until = until

    def distrust_older(self) -> None:
        """Older listings may miss the new feed's changes: not vouched for, kept for ``stale``."""
        self._trusted_from = time.monotonic()

    def withdraw(self) -> None:
        """The feed cannot vouch any more: listings expire after ``ttl`` again."""
        self.vouched_until = 0.0

    def get(self, directory: str) -> Listing | None:
        listing = self._cache.get(directory)
        if listing is None:
            self.misses += 1
            return None
        now = time.monotonic()
        vouched = now < self.vouched_until and listing.started >= self._trusted_from
        if now - listing.started < self.ttl or vouched:
            self.hits += 1
            self._used[directory] = self.budget.tick()
            return listing
        self.misses += 1  # kept: ``stale`` serves it while the server cannot be reached
        return None

    def stale(self, directory: str) -> Listing | None:
        """The last listing of ``directory`` however old (for when the server is away)."""
        return self._cache.get(directory)

    def put(self, directory: str, listing: Listing) -> bool:
        """Keep ``listing`` unless it began before a change dropped or patched the directory's
        listing (it may not show that change); True if kept."""
        if listing.started < max(self._cleared, self._changed.get(directory, -math.inf)):
            return False
        if len(self._cache) >= self.maxsize and directory not in self._cache:
            oldest = min(self._cache, key=lambda d: self._cache[d].started)
            self._remove(oldest)
        self._remove(directory)
        self._keep(directory, listing)
        for item in listing.items:
            if isinstance(item, Memory):
                self._where[item.id] = directory
                if item.updated_at > self._latest.get(item.id, _START_OF_TIME):
                    self._latest[item.id] = item.updated_at
        if not listing.items:
            self._prune_empty(directory)  # no memory below it: not a directory on the server
        self.budget.make_room()  # here only: evictions never interrupt a patch
        return True

    def drop(self, directory: str) -> None:
        """Forget the listing of ``directory``; one already being fetched will not be kept."""
        self._mark_changed(directory)
        self._remove(directory)

    def _mark_changed(self, directory: str) -> None:
        """A fetch of ``directory`` begun before now may miss a change: it will not be kept."""
        now = time.monotonic()
        if len(self._changed) > 10000:
            self._cleared = now  # forget old change times, conservatively
            self._changed.clear()
        self._changed[directory] = now

    # -- patching listings with changes ---------------------------------------------------

    def record(self, memory: Memory) -> None:
        """The server's state of ``memory`` (a write's answer): patch the cached listings."""
        if self._is_news(memory.id, memory.updated_at, memory.memory_version_id):
            self.patches += 1
            self._move(memory, self._item(memory.id))

    def apply_version(self, version: MemoryVersion) -> None:
        """Bring the cached listings up to a change the feed reported (see the module doc)."""
        deleted = version.operation == "deleted"
        if not deleted and (version.path is None or version.content_sha256 is None):
            return  # redacted: a version's content was removed, the head did not change
        if not self._is_news(version.memory_id, version.created_at, version.id):
            return
        self.patches += 1
        current = self._item(version.memory_id)
        if deleted:
            self._latest[version.memory_id] = _END_OF_TIME  # ids are never reused
            if current is not None:
                self._without(self._where[version.memory_id], version.memory_id)
            elif version.path is not None:
                self.vacated(paths.parent(version.path))
            return
        assert version.path is not None and version.content_sha256 is not None
        if current is None and version.operation != "created":
            # moved in from a listing we do not hold: its created_at is unknown
            self.drop(paths.parent(version.path))
            self._add_prefixes(version.path)
            return
        memory = Memory(
            id=version.memory_id,
            memory_store_id=version.memory_store_id,
            path=version.path,
            content_sha256=version.content_sha256,
            content_size_bytes=version.content_size_bytes or 0,
            memory_version_id=version.id,
            created_at=current.created_at if current is not None else version.created_at,
            updated_at=version.created_at,
        )
        self._move(memory, current)

    def remove(self, memory_id: str) -> None:
        """``memory_id`` was deleted (this mount's delete was answered)."""
        self._latest[memory_id] = _END_OF_TIME
        directory = self._where.get(memory_id)
        if directory is not None:
            self.patches += 1
            self._without(directory, memory_id)

    def _is_news(self, memory_id: str, when: datetime, version_id: str) -> bool:
        """True if ``when`` is later than any state of the memory seen so far (and note it).

        Answers and reported versions can arrive in any order: an older state must never
        undo a newer one, even when the listing that showed the newer one is gone.
        """
        seen = self._latest.get(memory_id)
        if seen is not None and seen >= when:
            current = self._item(memory_id)
            if seen == when and current is not None and current.memory_version_id != version_id:
                self.drop(self._where[memory_id])  # two versions at one instant: re-list
            return False
        if len(self._latest) > 100_000:
            self._latest.clear()  # bounded; listings re-teach it
        self._latest[memory_id] = when
        return True

    def vacated(self, directory: str) -> None:
        """A memory left ``directory`` and no cached listing showed it there: a fetch begun
        before now will not be kept, and if the directory's own listing is not cached (it may
        be empty now), its parent's listing, which shows it, is dropped."""
        self._mark_changed(directory)
        if directory == "/" or directory in self._cache:
            return
        parent = paths.parent(directory)
        above = self._cache.get(parent)
        if above is not None and above.directory_item(directory) is not None:
            self.drop(parent)
            self._gone.append(directory)  # perhaps: the kernel must ask again

    def take_gone(self) -> list[str]:
        """Directories patching removed from (or may have removed from) a parent's listing
        since the last call: the kernel's entries for them must be dropped."""
        gone, self._gone = self._gone, []
        return gone

    def _item(self, memory_id: str) -> Memory | None:
        directory = self._where.get(memory_id)
        listing = self._cache.get(directory) if directory is not None else None
        return listing.memory(memory_id) if listing is not None else None

    def _move(self, memory: Memory, current: Memory | None) -> None:
        directory = paths.parent(memory.path)
        if current is not None:
            self._without(self._where[memory.id], memory.id, keep=directory)
        self._mark_changed(directory)
        listing = self._cache.get(directory)
        if listing is not None:
            item = replace(memory, content=None)
            self._keep(directory, listing.with_item(item, now=time.monotonic()))
            self._where[memory.id] = directory
        self._add_prefixes(memory.path)

    def _without(self, directory: str, memory_id: str, *, keep: str | None = None) -> None:
        """Take ``memory_id`` out of the listing of ``directory``; a directory left empty
        leaves its parent's listing too (unless it is ``keep``, where the memory goes)."""
        self._mark_changed(directory)
        listing = self._cache.get(directory)
        if listing is None:
            return
        item = listing.memory(memory_id)
        if item is not None:
            listing = listing.without(item, now=time.monotonic())
        else:  # not shown: its absence is as new as now all the same
            listing = replace(listing, patched={**listing.patched, memory_id: time.monotonic()})
        self._keep(directory, listing)
        if self._where.get(memory_id) == directory:
            del self._where[memory_id]
        if not listing.items and directory != keep:
            self._prune_empty(directory)

    def _prune_empty(self, directory: str) -> None:
        """``directory`` has no memories left: it leaves its parent's listing, and so on up."""
        while directory != "/":
            parent = paths.parent(directory)
            above = self._cache.get(parent)
            if above is None:
                return
            shown = above.directory_item(directory)
            if shown is None:
                return
            self._mark_changed(parent)
            above = above.without(shown, now=time.monotonic())
            self._keep(parent, above)
            self._gone.append(directory)
            if above.items:
                return
            directory = parent

    def _add_prefixes(self, path: str) -> None:
        """Every cached ancestor listing shows the directories on the way to ``path``."""
        for directory in reversed(paths.ancestors(path)):
            parent = paths.parent(directory)
            listing = self._cache.get(parent)
            if listing is not None and listing.directory_item(directory) is None:
                self._mark_changed(parent)
                prefix = MemoryPrefix(paths.as_prefix(directory))
                self._keep(parent, listing.with_item(prefix, now=time.monotonic()))

    def _keep(self, directory: str, listing: Listing) -> None:
        """Hold ``listing`` as ``directory``'s (new, or a patch of the one held)."""
        self._cache[directory] = listing
        self._used.setdefault(directory, self.budget.tick())
        size = listing_bytes(listing)
        self._charge(size - self._charged.get(directory, 0))
        self._charged[directory] = size

    def _charge(self, size: int) -> None:
        self.bytes += size
        self.budget.used += size
        self.budget.released += max(0, -size)

    # -- the budget's side (memfs.contract.cache_budget) ------------------------------------------

    def oldest_tick(self) -> int:
        return min(self._used.values())

    def evict_oldest(self) -> None:
        """Forget the listing used least recently (it is fetched again when needed)."""
        self._remove(min(self._used, key=self._used.__getitem__))

    def _remove(self, directory: str) -> None:
        listing = self._cache.pop(directory, None)
        if listing is None:
            return
        self._charge(-self._charged.pop(directory))
        del self._used[directory]
        for item in listing.items:
            if isinstance(item, Memory) and self._where.get(item.id) == directory:
                del self._where[item.id]

    def clear(self) -> None:
        self._cleared = time.monotonic()
        self._changed.clear()
        self._cache.clear()
        self._where.clear()
        self._charge(-self.bytes)
        self._charged.clear()
        self._used.clear()

    def __len__(self) -> int:
        return len(self._cache)


def _is_memory(item: ListItem, memory_id: str) -> TypeGuard[Memory]:
    return isinstance(item, Memory) and item.id == memory_id
