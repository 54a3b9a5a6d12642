"""The change feed's side of a core's door: what ``memfs.mount.changefeed`` calls as the store's
versions arrive (or fail to), on the caches and trees they concern.

``Vfs`` takes these methods from ``ChangeFeedDoor``; they touch the listings, the store's
usage counts, the store-gone check, the remote changes and the kernel invalidations the
namespace and ``.versions/`` queue, never an open file or dirty data.
"""

from __future__ import annotations

from memfs.contract.models import MemoryVersion
from memfs.core.fetch.cache import ListingCache
from memfs.core.fetch.orphans import StoreGone
from memfs.core.fetch.usage import StoreUsage
from memfs.core.ops.namespace import Invalidator, Namespace
from memfs.core.ops.remote import RemoteChanges
from memfs.versions.tree import VersionsTree


class ChangeFeedDoor:
    """The change feed's calls into one store's core (a part of ``Vfs``, which sets these
    attributes from its ``CoreParts``)."""

    _listings: ListingCache
    _usage: StoreUsage
    _gone: StoreGone
    _remote: RemoteChanges
    _namespace: Namespace
    versions: VersionsTree
    invalidator: Invalidator | None  # runs kernel invalidations (the daemon: worker thread)

    def feed_starts(self) -> None:
        """A feed starts: listings and counts taken before may miss a change it never reports,
        so they are not vouched for (the listings stay, an outage's fallback)."""
        self._listings.distrust_older()
        self._usage.forget()

    def vouch_listings(self, until: float) -> None:
        """Listings are current until ``until`` (monotonic; ``math.inf``: a subscribed stream)."""
        self._listings.vouch(until)

    def withdraw_listings(self) -> None:
        """The change feed may miss changes from now on: listings are fetched again."""
        self._listings.withdraw()

    async def apply_changes(self, versions: list[MemoryVersion], *, complete: bool) -> int:
        """A batch of the change feed: its versions applied; when the batch may be incomplete
        (a gap), the listings are compared instead (``resync``). How many were applied."""
        applied = self.apply_versions(versions)
        if not complete:
            await self.resync()
        return applied

    async def feed_failed(self, error: Exception) -> bool:
        """The change feed's request failed with ``error``: listings are no longer vouched
        for; True if the store itself is gone (the feed stops)."""
        self._listings.withdraw()
        return await self._gone.confirm(error)

    @property
    def gone_since(self) -> str | None:
        """UTC time the store was found deleted (None: it exists)."""
        return self._gone.since

    def apply_versions(self, versions: list[MemoryVersion]) -> int:
        """The change feed's versions (``RemoteChanges.apply_versions``)."""
        return self._remote.apply_versions(versions)

    async def resync(self) -> int:
        """The change feed had a gap (``RemoteChanges.resync``)."""
        return await self._remote.resync()

    async def invalidations_due(self) -> None:
        """Return when invalidations must run without waiting for the change feed's next batch."""
        await self._namespace.invalidations_due()

    async def run_invalidations(self) -> None:
        """Hand queued kernel invalidations to the invalidator (from the feed's tasks)."""
        items = self._namespace.take_invalidations() + self.versions.take_invalidations()
        if items and self.invalidator is not None:
            await self.invalidator(items)
