"""One byte budget shared by caches of clean, re-fetchable data, least recently used first.

A mount's content cache, its ``.versions/`` content cache and its directory listings each hold
data that can be fetched again; a ``CacheBudget`` bounds what they hold *together*
(``--cache-size``): each is a ``BudgetedCache`` handed the same budget, and when a ``put``
takes the total over the limit, the entry used least recently among *all* of them leaves
first (each use takes a number from the budget's one clock; the cache whose oldest entry has
the smallest number gives it up). So a walk of the history does not double the mount's memory,
and several stores of one daemon can share one budget by being handed one object.

Structures that are built whole rather than entry by entry join the same budget: a
``PinnedCharge`` (the local search index: never evicted, the others make room) and a
``DroppableCharge`` (the version index: dropped whole when it is the least recently used, and
built again at its next use).

Invariants: ``CacheBudget.used`` is the sum of the sizes of the entries of its caches and of
its charges, and after every ``put`` it is at most ``max_bytes`` (an entry larger than the
whole budget is not kept), unless pinned or held charges alone take more. Sizes are what the
caller's ``sizeof`` says (bytes for contents; an estimate for listings and indexes); the
process's RSS holds more (Python objects, the allocator's slack), which the goal's fixed 40 MB
is for.

Not thread-safe: caches and their budget belong to the daemon's trio thread (``memfs.core``).
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class CacheBudget:
    """The bytes several ``BudgetedCache`` objects share (module docstring)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max(1, max_bytes)
        self.used = 0
        self.evictions = 0
        # bytes taken out of the caches so far (evicted, replaced, dropped): the daemon gives
        # freed memory back to the system as this grows (memfs.mount.memory.MemoryReturn)
        self.released = 0
        self._caches: list[_Member] = []
        self._clock = itertools.count()

    def tick(self) -> int:
        """The next number of the shared clock (a use)."""
        return next(self._clock)

    def join(self, cache: _Member) -> None:
        self._caches.append(cache)

    def by_cache(self) -> dict[str, tuple[int, int]]:
        """cache name -> (bytes, entries), for status and the memory benchmark."""
        return {cache.name: (cache.bytes, len(cache)) for cache in self._caches}

    def make_room(self) -> None:
        """Evict least recently used entries, across the caches, until within the budget."""
        while self.used > self.max_bytes:
            oldest = min(
                (c for c in self._caches if len(c)), key=lambda c: c.oldest_tick(), default=None
            )
            if oldest is None:
                return
            oldest.evict_oldest()
            self.evictions += 1


class _Member(Protocol):
    """What the budget needs of a cache it evicts from."""

    name: str
    bytes: int

    def __len__(self) -> int: ...
    def oldest_tick(self) -> int: ...
    def evict_oldest(self) -> None: ...


@dataclass
class _Entry(Generic[V]):
    value: V
    size: int
    used: int  # the budget's clock at the last use


class BudgetedCache(Generic[K, V]):
    """A map whose entries are charged to a ``CacheBudget`` and evicted LRU across it.

    ``sizeof``: the bytes an entry is charged (at least 1); ``on_evict``: told of each entry the
    budget takes away (a cache keeping an index of its entries updates it there)."""

    def __init__(
        self,
        budget: CacheBudget,
        sizeof: Callable[[V], int],
        *,
        name: str,
        on_evict: Callable[[K, V], None] | None = None,
    ) -> None:
        self.budget = budget
        self.name = name
        self.bytes = 0
        self._sizeof = sizeof
        self._on_evict = on_evict
        self._entries: OrderedDict[K, _Entry[V]] = OrderedDict()  # least recently used first
        budget.join(self)

    def get(self, key: K) -> V | None:
        """The value of ``key`` (a use: it becomes the most recent), or None."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        entry.used = self.budget.tick()
        self._entries.move_to_end(key)
        return entry.value

    def peek(self, key: K) -> V | None:
        """The value of ``key`` without counting a use."""
        entry = self._entries.get(key)
        return None if entry is None else entry.value

    def put(self, key: K, value: V) -> bool:
        """Keep ``value`` (replacing ``key``'s); False if it is larger than the whole budget."""
        size = max(1, self._sizeof(value))
        self.pop(key)
        if size > self.budget.max_bytes:
            return False
        self._entries[key] = _Entry(value, size, self.budget.tick())
        self._charge(size)
        self.budget.make_room()
        return True

    def pop(self, key: K) -> V | None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        self._charge(-entry.size)
        return entry.value

    def clear(self) -> None:
        self._charge(-self.bytes)
        self._entries.clear()

    def oldest_tick(self) -> int:
        return next(iter(self._entries.values())).used

    def evict_oldest(self) -> None:
        key, entry = self._entries.popitem(last=False)
        self._charge(-entry.size)
        if self._on_evict is not None:
            self._on_evict(key, entry.value)

    def _charge(self, size: int) -> None:
        self.bytes += size
        self.budget.used += size
        self.budget.released += max(0, -size)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[K]:
        return iter(self._entries)

    def items(self) -> Iterator[tuple[K, V]]:
        return ((key, entry.value) for key, entry in self._entries.items())


class PinnedCharge:
    """Bytes a structure holds whole, not entry by entry (a local search index): charged to
    the budget, so the caches it shares make room for them; never evicted itself."""

    def __init__(self, budget: CacheBudget, *, name: str) -> None:
        self.budget = budget
        self.name = name
        self.bytes = 0
        budget.join(self)

    def set(self, size: int) -> None:
        """The structure holds ``size`` bytes now."""
        self.budget.used += size - self.bytes
        self.budget.released += max(0, self.bytes - size)
        self.bytes = size
        self.budget.make_room()

    def __len__(self) -> int:
        return 0  # nothing the budget can take away

    def oldest_tick(self) -> int:
        raise LookupError("a pinned charge has no entries")

    def evict_oldest(self) -> None:
        raise LookupError("a pinned charge has no entries")


class DroppableCharge:
    """Bytes a structure holds whole and can build again (the version index): charged to the
    budget like a cache of one entry, used when ``touch`` is called; when it is the least
    recently used of the budget, the budget calls ``drop`` (the structure forgets its data,
    and builds it again at its next use). Never dropped while ``held``: a structure is
    inconsistent while it is being extended, and its users read it across awaits."""

    def __init__(self, budget: CacheBudget, *, name: str, drop: Callable[[], None]) -> None:
        self.budget = budget
        self.name = name
        self.bytes = 0
        self.drops = 0
        self._drop = drop
        self._used = budget.tick()
        self._held = 0
        budget.join(self)

    def touch(self) -> None:
        self._used = self.budget.tick()

    def set(self, size: int) -> None:
        """The structure holds ``size`` bytes now (others make room; never itself)."""
        self._held += 1
        try:
            self.budget.used += size - self.bytes
            self.budget.released += max(0, self.bytes - size)
            self.bytes = size
            self.budget.make_room()
        finally:
            self._held -= 1

    @contextmanager
    def held(self) -> Iterator[None]:
        """Not dropped inside (a counter: nested and concurrent holders are fine)."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1

    def __len__(self) -> int:
        return 1 if self.bytes and not self._held else 0  # 0: nothing the budget may take

    def oldest_tick(self) -> int:
        return self._used

    def evict_oldest(self) -> None:
        self.budget.used -= self.bytes
        self.budget.released += self.bytes
        self.bytes = 0
        self.drops += 1
        self._drop()
