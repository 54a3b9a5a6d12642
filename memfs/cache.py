"""Clean, re-fetchable data of a mount: memory contents by sha, directory listings by path.

Everything here may vanish at any moment (LRU eviction, TTL expiry) and is fetched again when
needed. Dirty data (a local copy not yet uploaded) must never be stored here: it lives on the
inode (``Node.data``) until the write-back queue has uploaded it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import cachetools

from memfs.models import ListItem

log = logging.getLogger(__name__)


class ContentCache:
    """Memory contents keyed by their sha256, bounded by total bytes (LRU)."""

    def __init__(self, max_bytes: int = 16 * 1024 * 1024) -> None:
        self._cache: cachetools.LRUCache[str, bytes] = cachetools.LRUCache(
            maxsize=max_bytes, getsizeof=lambda value: max(1, len(value))
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

    def put(self, sha: str, content: bytes) -> None:
        self._cache[sha] = content


@dataclass(frozen=True)
class Listing:
    """A ``depth=1`` listing of one directory; ``started`` is when the request began."""

    started: float
    items: tuple[ListItem, ...]


class ListingCache:
    """Directory listings for ``ttl`` seconds (one listing serves a whole ``ls -l``)."""

    def __init__(self, ttl: float = 1.0, maxsize: int = 1024) -> None:
        self._cache: cachetools.TTLCache[str, Listing] = cachetools.TTLCache(
            maxsize=maxsize, ttl=ttl, timer=time.monotonic
        )

    def get(self, directory: str) -> Listing | None:
        return self._cache.get(directory)

    def put(self, directory: str, listing: Listing) -> None:
        self._cache[directory] = listing

    def drop(self, directory: str) -> None:
        self._cache.pop(directory, None)

    def clear(self) -> None:
        self._cache.clear()
