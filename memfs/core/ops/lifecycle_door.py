"""The daemon's side of a core's door (the ``Lifecycle`` role of
``memfs.core.store_core``): the calls a mount or a sync makes around the file operations —
start the background tasks, replay the journal, the figures of a status, the end's flush, saves
and reports.

``Vfs`` takes these methods from ``LifecycleDoor``, as it takes the change feed's from
``ChangeFeedDoor``; they never touch an open file's data but through ``Commits.save_open``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import trio

from memfs.core.fetch.orphans import StoreGone
from memfs.core.fetch.prefetch import BulkFetcher
from memfs.core.fetch.usage import StoreUsage
from memfs.core.model.budget import LocalBudget
from memfs.core.model.inodes import InodeTable
from memfs.core.ops.commit import Commits
from memfs.core.ops.durable import Durable
from memfs.core.ops.parts import CoreParts
from memfs.core.ops.reports import CoreReport, CoreStatus, take_final_report, take_status
from memfs.core.ops.uploader import Uploader
from memfs.writeback.queue import WriteBack


class LifecycleDoor:
    """The daemon's calls into one store's core (a part of ``Vfs``, which sets these attributes
    from its ``CoreParts``)."""

    parts: CoreParts
    _table: InodeTable
    _bulk: BulkFetcher
    _usage: StoreUsage
    _gone: StoreGone
    _writeback: WriteBack
    _durable: Durable
    _commits: Commits
    _budget: LocalBudget
    _uploader: Uploader
    _on_activity: Callable[[], None] | None

    async def start(self, nursery: trio.Nursery) -> None:
        """Start the background tasks in ``nursery``: the write-back queue, bulk fetches
        ahead of a walk, the store's usage counts, the journal's flushes of drops."""
        await nursery.start(self._writeback.run)
        await nursery.start(self._durable.flusher.run)
        self._bulk.run_in(nursery)
        self._usage.run_in(nursery)

    def load_journal(self) -> int:
        """Queue what an earlier daemon acknowledged and never uploaded; how many records."""
        return self._durable.load()

    def set_activity_hook(self, hook: Callable[[], None]) -> None:
        """``hook`` runs at a kernel request after an idle second (the change feed wakes)."""
        self._on_activity = hook

    @property
    def pending_uploads(self) -> int:
        return len(self._writeback)

    @property
    def upload_requests(self) -> int:
        """Changes asked for so far (a flush that saw this number has nothing new to do)."""
        return self._writeback.requests

    @property
    def local_bytes(self) -> int:
        """Bytes held for local-only, refused and waiting files (``LocalBudget.total``)."""
        return self._budget.total

    def retry_waiting_for_room(self) -> None:
        self._uploader.retry_waiting_for_room()

    def save_open_files(self) -> int:
        """At the end, commit what files still open for writing hold, as close would; how many."""
        return self._commits.save_open(conflicts=self._durable.conflict_count)

    async def fetch_everything(self, *, in_flight: int = 8) -> None:
        """Every content and listing into the caches, sub-trees side by side (a first sync)."""
        await self._bulk.fetch_tree(in_flight=in_flight)

    def save_conflict(self, path: str, data: bytes) -> None:
        """``data`` lost a race for ``path`` before reaching the core (a sync's file changed on
        both sides): a conflict copy, as for an upload's; the file keeps the server's version."""
        node = self._table.by_path.get(path)
        self._durable.save_conflict(path, node.memory_id if node is not None else None, data)

    async def flush_all(self, *, patience: float = 0.0) -> list[BaseException]:
        """Upload all pending now, deferred deletes and moves too; retry ``patience`` seconds."""
        return await self._uploader.flush_all(patience=patience)

    def hand_over(self) -> tuple[Path, list[str]] | None:
        """If the store was deleted: its pending changes as plain files (where; a line each)."""
        return self._durable.hand_over() if self._gone.gone else None

    def snapshot(self, *, conflicts: int) -> CoreStatus:
        """What ``memfs status`` shows, now; the newest ``conflicts`` conflicts listed."""
        return take_status(self.parts, conflicts=conflicts)

    def final_report(self) -> CoreReport:
        """What the unmount report says of this store, once the final flush is over."""
        return take_final_report(self.parts)
