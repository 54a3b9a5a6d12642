"""Clean, re-fetchable data of a mount: memory contents by sha, directory listings by path.

Everything here may vanish at any moment (LRU eviction, expiry) and is fetched again when
needed. Dirty data (a local copy not yet uploaded) must never be stored here: it lives on the
inode (``Node.data``) and in the journal until the write-back queue has uploaded it.

Freshness of listings: a listing is served for ``ttl`` seconds (1 s), or for as long as the
change feed *vouches* for the cache (``vouch(until)``: it polled successfully and dropped the
listings its changes touched). When the feed stops vouching (errors, a gap it cannot trust),
listings fall back to the short ``ttl``. ``directory_of(memory_id)`` tells the feed which cached
listing shows a memory, so a move away from a directory drops that directory too.

This module must not talk to the server or know about inodes or FUSE.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import cachetools

from memfs.models import ListItem, Memory

log = logging.getLogger(__name__)

DEFAULT_CONTENT_BYTES = 64 * 1024 * 1024


class ContentCache:
    """Memory contents keyed by their sha256, bounded by total bytes (LRU)."""

    def __init__(self, max_bytes: int = DEFAULT_CONTENT_BYTES) -> None:
        self.max_bytes = max_bytes
        self._cache: cachetools.LRUCache[str, bytes] = cachetools.LRUCache(
            maxsize=max(1, max_bytes), getsizeof=lambda value: max(1, len(value))
        )
        self.hits = 0
        self.misses = 0

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
        if len(content) <= self.max_bytes:
            self._cache[sha] = content

    @property
    def bytes(self) -> int:
        return int(self._cache.currsize)

    def __len__(self) -> int:
        return len(self._cache)


@dataclass(frozen=True)
class Listing:
    """A ``depth=1`` listing of one directory; ``started`` is when the request began."""

    started: float
    items: tuple[ListItem, ...]


class ListingCache:
    """Directory listings: ``ttl`` seconds, or while the change feed vouches (module doc)."""

    def __init__(self, ttl: float = 1.0, maxsize: int = 4096) -> None:
        self.ttl = ttl
        self.maxsize = maxsize
        self._cache: dict[str, Listing] = {}
        self._where: dict[str, str] = {}  # memory id -> directory whose listing shows it
        self._dropped: dict[str, float] = {}  # directory -> when its listing was last dropped
        self._cleared = -math.inf
        self.vouched_until = 0.0  # monotonic
        self.hits = 0
        self.misses = 0

    def vouch(self, until: float) -> None:
        """The change feed keeps cached listings current until ``until`` (monotonic)."""
        self.vouched_until = until

    def withdraw(self) -> None:
        """The feed cannot vouch any more: listings expire after ``ttl`` again."""
        self.vouched_until = 0.0

    def get(self, directory: str) -> Listing | None:
        listing = self._cache.get(directory)
        if listing is None:
            self.misses += 1
            return None
        now = time.monotonic()
        if now - listing.started < self.ttl or now < self.vouched_until:
            self.hits += 1
            return listing
        self.misses += 1  # kept: ``stale`` serves it while the server cannot be reached
        return None

    def stale(self, directory: str) -> Listing | None:
        """The last listing of ``directory`` however old (for when the server is away)."""
        return self._cache.get(directory)

    def put(self, directory: str, listing: Listing) -> bool:
        """Keep ``listing`` unless it began before a change dropped the directory's listing
        (it may not show that change); True if kept."""
        if listing.started < max(self._cleared, self._dropped.get(directory, -math.inf)):
            return False
        if len(self._cache) >= self.maxsize and directory not in self._cache:
            oldest = min(self._cache, key=lambda d: self._cache[d].started)
            self._remove(oldest)
        self._remove(directory)
        self._cache[directory] = listing
        for item in listing.items:
            if isinstance(item, Memory):
                self._where[item.id] = directory
        return True

    def directory_of(self, memory_id: str) -> str | None:
        return self._where.get(memory_id)

    def drop(self, directory: str) -> None:
        """Forget the listing of ``directory``; one already being fetched will not be kept."""
        now = time.monotonic()
        if len(self._dropped) > 10000:
            self._cleared = now  # forget old drop times, conservatively
            self._dropped.clear()
        self._dropped[directory] = now
        self._remove(directory)

    def _remove(self, directory: str) -> None:
        listing = self._cache.pop(directory, None)
        if listing is None:
            return
        for item in listing.items:
            if isinstance(item, Memory) and self._where.get(item.id) == directory:
                del self._where[item.id]

    def clear(self) -> None:
        self._cleared = time.monotonic()
        self._dropped.clear()
        self._cache.clear()
        self._where.clear()

    def __len__(self) -> int:
        return len(self._cache)
