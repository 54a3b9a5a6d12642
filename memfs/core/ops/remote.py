"""Remote changes: the change feed's versions applied to what the mount holds, and the re-listing
when the feed cannot be trusted (a gap).

Cached listings are patched (``memfs.core.fetch.cache.ListingCache.apply_version``), settled nodes
re-bound to the server's path and content, and kernel invalidations queued (``namespace``);
nodes with local changes are left alone (their upload's precondition decides: a conflict, never
a silent overwrite). It must not upload anything nor change a node that is not settled.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable

from memfs.contract import paths
from memfs.contract.errors import NoEntryError, NotFoundError
from memfs.contract.models import MemoryVersion
from memfs.core.fetch.cache import ListingCache
from memfs.core.fetch.usage import StoreUsage
from memfs.core.model.state import CoreState
from memfs.core.ops.namespace import Namespace

# Past this many changes to one directory in one feed batch, its cached listing is dropped (one
# re-listing, N/100 requests) rather than patched (each patch copies the listing: O(N) each).
PATCH_LIMIT = 100


class RemoteChanges:
    """Applies the change feed to one mount; see the module docstring."""

    def __init__(
        self,
        state: CoreState,
        namespace: Namespace,
        listings: ListingCache,
        usage: StoreUsage,
        *,
        room_may_have_appeared: Callable[[], None],
    ) -> None:
        self.state = state
        self.table = state.table
        self.namespace = namespace
        self.listings = listings
        self.usage = usage
        # deletes were seen: creates the full store refused are queued again (``Uploader``)
        self.room_may_have_appeared = room_may_have_appeared

    def apply_versions(self, versions: list[MemoryVersion]) -> int:
        """Apply versions reported by the change feed (any order); return how many mattered.

        Cached listings they touch are dropped; kernel invalidations are queued (the feed runs
        them from a worker thread). Nodes with local changes do not follow (conflicts).
        """
        namespace = self.namespace
        self.usage.apply(versions)
        if self.state.waiting_for_room and any(v.operation == "deleted" for v in versions):
            self.room_may_have_appeared()
        ordered = sorted(versions, key=lambda v: v.created_at)
        busy = Counter(paths.parent(v.path) for v in ordered if v.path)
        for directory, count in busy.items():
            if count > PATCH_LIMIT:
                self.listings.drop(directory)
        for version in ordered:
            self.listings.apply_version(version)  # patched, not dropped (memfs.core.fetch.cache)
            known = self.table.by_id.get(version.memory_id)
            if (
                known is not None
                and version.operation != "deleted"
                and known.base_sha == version.content_sha256
                and known.remote_path == version.path
            ):
                continue  # this mount's own upload (or already seen): nothing new
            if version.path:
                self._invalidate_new_name(version.path)
        applied = 0
        for version in ordered:
            holder = self.table.by_id.get(version.memory_id)
            if holder is None or not namespace.settled(holder):
                continue
            if holder.updated_at is not None and version.created_at < holder.updated_at:
                continue
            if holder.open_count > 0 and holder.data is not None:
                # open with a local copy based on the old head: a write must still meet the
                # precondition of that head (a conflict, never a silent overwrite); the change
                # is applied when the last handle closes
                self.state.deferred_versions.setdefault(holder.ino, []).append(version)
                continue
            if version.operation == "deleted":
                self.state.tombstones.add(version.memory_id)
                self.listings.vacated(paths.parent(holder.path or "/"))
                namespace.forget_memory(holder)
                applied += 1
                continue
            if version.path and version.path != holder.remote_path:
                self.listings.vacated(paths.parent(holder.path or "/"))
                parent_ino = namespace.parent_ino(holder.path)
                if parent_ino is not None and holder.path is not None:
                    name = paths.basename(holder.path).encode()
                    namespace.queue_invalidations([("entry", parent_ino, name)])
                if version.path in self.table.by_path:
                    namespace.forget_memory(holder)
                else:
                    self.table.bind(holder, version.path)
                    holder.remote_path = version.path
                applied += 1
            if version.content_sha256 and version.content_sha256 != holder.base_sha:
                holder.base_sha = version.content_sha256
                holder.remote_size = version.content_size_bytes or 0
                holder.updated_at = version.created_at
                if holder.open_count == 0:
                    holder.data = None
                namespace.queue_invalidations([("inode", holder.ino, b"")])
                applied += 1
        return applied

    def _invalidate_new_name(self, path: str) -> None:
        """``path`` may be new: drop the negative entry the kernel may hold for it, or for the
        first directory on the way to it that this mount does not know yet."""
        directory, name = paths.split(path)
        while True:
            parent = self.table.by_path.get(directory)
            if parent is not None and parent.is_dir:  # a file there: a clash begins, drop it too
                self.namespace.queue_invalidations([("entry", parent.ino, name.encode())])
                return
            if directory == "/":
                return
            directory, name = paths.split(directory)

    async def resync(self) -> int:
        """The change feed cannot be trusted (a gap): re-list every directory the kernel holds.

        Each listing is compared with the inodes (``Namespace.children``), which queues
        invalidations for what changed. Returns the number of directories listed.
        """
        self.listings.withdraw()
        self.listings.clear()
        self.usage.forget()  # the gap may hide creates and deletes
        directories = [
            node.path
            for node in list(self.table.nodes.values())
            if node.is_dir and node.path is not None and (node.lookups > 0 or node.path == "/")
        ]
        for directory in directories:
            with contextlib.suppress(NoEntryError, NotFoundError):
                await self.namespace.children(directory)
        return len(directories)
