"""Changes of a Databricks store, made up by comparing listings: ``ListingDiff``.

The API has neither versions nor a change listing. Each poll of the change feed lists the
mounted entries without content (BASIC view) and compares the listing with the previous one:
an entry never seen is ``created``, one with another ``update_time`` or path ``modified``, one
gone ``deleted``. Each becomes one made-up ``MemoryVersion`` (id: entry id and update time),
kept in a short log that ``recent`` answers from, as the Memory Stores API answers
``memory_versions``: newest first, at or after ``since``.

Made-up times are strictly increasing in the order changes are found (never before the entry's
own ``update_time``), so the poller's ``since`` never skips one; a delete gets the local clock.
The first listing is the starting point: nothing before it is reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from memfs.api.databricks.client import Entry
from memfs.contract.models import MemoryVersion, Operation, Page, format_time

LOG_SIZE = 1_000  # versions kept for ``recent``; an older ``since`` is told of a gap
TICK = timedelta(microseconds=1)


@dataclass(frozen=True)
class _Seen:
    path: str
    update_time: datetime


class ListingDiff:
    """The last listing of one mount's entries and the versions found by comparing them."""

    def __init__(self) -> None:
        self._seen: dict[str, _Seen] | None = None  # None: no listing yet (the starting point)
        self._log: list[MemoryVersion] = []  # oldest first
        self._forgotten_until: datetime | None = None  # versions up to here fell off the log
        self._clock = datetime.min.replace(tzinfo=UTC)

    def changed(self, entry: Entry) -> bool:
        """True if ``entry`` will be reported by the next ``compare`` (its hash is needed)."""
        if self._seen is None:
            return False
        seen = self._seen.get(entry.id)
        return seen is None or seen.update_time != entry.update_time or seen.path != entry.path

    def compare(
        self, store_id: str, listed: list[Entry], hashes: Mapping[str, tuple[str, int]]
    ) -> None:
        """Record the versions between the last listing and ``listed``; ``hashes`` holds the
        content hash and size of every entry that ``changed``."""
        now = {e.id: _Seen(e.path, e.update_time) for e in listed}
        if self._seen is None:
            self._seen = now
            return
        found: list[tuple[Entry | None, str, Operation]] = []
        for changed in sorted(listed, key=lambda e: e.update_time):
            if self.changed(changed):
                kind: Operation = "modified" if changed.id in self._seen else "created"
                found.append((changed, changed.id, kind))
        found += [(None, gone, "deleted") for gone in self._seen if gone not in now]
        for entry, entry_id, operation in found:
            if entry is None:
                previous = self._seen[entry_id]
                moment = self._tick(max(datetime.now(UTC), previous.update_time))
                path: str | None = previous.path
                sha, size = None, None
            else:
                moment = self._tick(entry.update_time)
                path = entry.path
                sha, size = hashes[entry_id]
            self._log.append(
                MemoryVersion(
                    id=f"{entry_id}@{format_time(moment)}",
                    memory_id=entry_id,
                    memory_store_id=store_id,
                    operation=operation,
                    created_at=moment,
                    path=path,
                    content_sha256=sha,
                    content_size_bytes=size,
                )
            )
        if len(self._log) > LOG_SIZE:
            self._forgotten_until = self._log[-LOG_SIZE - 1].created_at
            del self._log[:-LOG_SIZE]
        self._seen = now

    def _tick(self, moment: datetime) -> datetime:
        self._clock = max(moment, self._clock + TICK)
        return self._clock

    def recent(self, since: datetime | None, limit: int) -> Page[MemoryVersion]:
        """Versions at or after ``since`` (None: the newest), newest first, at most ``limit``;
        a next page (a gap for the change feed) if more matched or some fell off the log."""
        newest = [v for v in reversed(self._log) if since is None or v.created_at >= since]
        forgotten = self._forgotten_until
        gap = since is not None and forgotten is not None and since <= forgotten
        more = since is not None and (len(newest) > limit or gap)
        return Page(newest[:limit], "more" if more else None)
