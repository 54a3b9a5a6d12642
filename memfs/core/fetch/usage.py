"""How full the store is, for ``statfs`` (``df``, ``df -i``): memories held and their bytes.

The API has no usage call, so the first ``statfs`` of a mount counts the store with a full
``view=basic`` listing (100 memories a request: 20 requests for a full store). ``statfs`` waits
for the count at most ``wait`` seconds (0.5): on a slow server it answers with what the count has
seen so far (an undercount, for a few seconds) rather than hold up the ``grep -r`` or ``find``
that asked while the count goes on in the background. From then on the
change feed keeps the figures current (every version it reports carries the memory's id and
size), so ``statfs``, which ``find``, ``du``, ``rm -r`` and ``grep -r`` call on every walk (gnulib
fts asks for the filesystem type), costs no request. While the feed cannot vouch for what it
reports (it is down, or found a gap), the store is counted again when asked, at most once per
``recount_after`` seconds.

This module must not know about inodes or FUSE.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import trio

from memfs.contract import paths
from memfs.contract.errors import ApiConnectionError, ApiError
from memfs.contract.models import MemoryVersion
from memfs.contract.store_api import StoreAPI

log = logging.getLogger(__name__)

BLOCK_SIZE = 4096


class StoreUsage:
    """Memory sizes by id: counted once, then maintained from the change feed's versions."""

    def __init__(
        self,
        store: StoreAPI,
        feed_is_current: Callable[[], bool],
        *,
        recount_after: float = 60.0,
        wait: float = 0.5,
    ) -> None:
        self.store = store
        self.feed_is_current = feed_is_current
        self.recount_after = recount_after
        self.wait = wait
        self.nursery: trio.Nursery | None = None  # None: statfs waits for the whole count
        self._sizes: dict[str, int] = {}
        self._bytes = 0
        self._counted_at: float | None = None  # monotonic
        self._recount = False
        self._changed_while_counting: set[str] = set()
        self._counting: trio.Event | None = None  # set when the count running now ends
        self._seen = 0  # memories the running count has listed so far
        self._seen_bytes = 0
        self.counts = 0

    def run_in(self, nursery: trio.Nursery) -> None:
        """Run background work in ``nursery`` from now on (the daemon's, once it runs)."""
        self.nursery = nursery

    def apply(self, versions: list[MemoryVersion]) -> None:
        """Versions reported by the change feed, any order within the batch."""
        for version in sorted(versions, key=lambda v: v.created_at):
            if self._counting is not None:
                self._changed_while_counting.add(version.memory_id)
            if version.operation == "deleted":
                self._set(version.memory_id, None)
            else:
                self._set(version.memory_id, version.content_size_bytes)

    def forget(self) -> None:
        """The feed missed changes (a gap): count again when next asked."""
        self._recount = True

    async def figures(self) -> tuple[int, int]:
        """(memories, bytes), counting the store first if the figures cannot be trusted."""
        now = time.monotonic()
        stale = (
            self._counted_at is None
            or self._recount
            or (not self.feed_is_current() and now - self._counted_at > self.recount_after)
        )
        if stale and self._counting is None:
            self._counting = trio.Event()
            if self.nursery is None:
                await self._count()
            else:
                self.nursery.start_soon(self._count)
        if self._counting is not None:
            with trio.move_on_after(self.wait):
                await self._counting.wait()
        if self._counting is not None and self._counted_at is None:
            return self._seen, self._seen_bytes  # the first count is still going on
        return len(self._sizes), self._bytes

    async def _count(self) -> None:
        self._changed_while_counting.clear()
        self._seen = self._seen_bytes = 0
        listed: dict[str, int] = {}
        try:
            async for item in self.store.list_below(None):
                listed[item.id] = item.content_size_bytes
                self._seen += 1
                self._seen_bytes += item.content_size_bytes
        except (ApiError, ApiConnectionError) as exc:
            if self.nursery is None:
                raise
            log.info("counting the store for statfs failed: %s", exc)
            return
        finally:
            assert self._counting is not None
            self._counting.set()
            self._counting = None
        # a change the feed applied during the listing is newer than what the listing saw
        for memory_id in self._changed_while_counting:
            listed.pop(memory_id, None)
            if memory_id in self._sizes:
                listed[memory_id] = self._sizes[memory_id]
        self._sizes = listed
        self._bytes = sum(listed.values())
        self._counted_at = time.monotonic()
        self._recount = False
        self.counts += 1

    def _set(self, memory_id: str, size: int | None) -> None:
        self._bytes -= self._sizes.pop(memory_id, 0)
        if size is not None:
            self._sizes[memory_id] = size
            self._bytes += size


def statfs_fields(
    count: int, used: int, max_memories: int, max_content_bytes: int, *, room: bool
) -> dict[str, int]:
    """``statfs`` of a store holding ``count`` memories of ``used`` bytes: blocks for the
    limits (every memory at full size), free what the limits leave, none without ``room``."""
    blocks = max_memories * max_content_bytes // BLOCK_SIZE
    free = max(0, blocks - (used + BLOCK_SIZE - 1) // BLOCK_SIZE) if room else 0
    return {
        "f_bsize": BLOCK_SIZE,
        "f_frsize": BLOCK_SIZE,
        "f_blocks": blocks,
        "f_bfree": free,
        "f_bavail": free,
        "f_files": max_memories,
        "f_ffree": max(0, max_memories - count),
        "f_favail": max(0, max_memories - count),
        "f_namemax": paths.MAX_NAME_BYTES,
    }
