"""What a core says about itself: ``CoreStatus`` (``memfs status``) and ``CoreReport`` (the
unmount report), each taken whole at one moment by ``Vfs.snapshot`` and ``Vfs.final_report``
(no ``await`` while they are collected). The mount words them (``memfs.mount.status``).

It holds data only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memfs.core.ops.durable import ConflictInfo


@dataclass(frozen=True)
class CacheFigures:
    """The caches of a core (``memfs status``: the names are the status document's)."""

    content_hits: int
    content_misses: int
    content_bytes: int
    content_items: int
    content_limit_bytes: int
    listing_hits: int
    listing_misses: int
    listings: int
    listing_patches: int
    prefetches: int
    walk_prefetches: int
    prefetch_pages: int
    walk_most_in_flight: int  # walk fetches running at once, at most
    inodes: int


@dataclass(frozen=True)
class UploadFigures:
    """What waits to be uploaded, and what became of it (the status document's names)."""

    pending: int
    waiting: list[str]
    journal_records: int
    journal_dir: str | None
    failed: dict[str, str]
    waiting_for_room: list[str]
    retrying: dict[str, str]
    replayed: int
    untouched: int


@dataclass(frozen=True)
class ShownClash:
    """A file memory shown under a derived name beside a same-named directory."""

    memory_path: str
    shown_path: str


@dataclass(frozen=True)
class CoreStatus:
    """What ``memfs status`` shows of one store's core, at one moment."""

    store_id: str
    read_only: bool
    gone_since: str | None  # UTC time the store was found deleted
    requests: dict[str, Any]  # by endpoint (``StoreAPI.request_counts``)
    cache: CacheFigures
    uploads: UploadFigures
    refused: dict[str, object]
    local_budget: dict[str, object]
    conflict_count: int
    recent_conflicts: list[ConflictInfo]  # the newest ``STATUS_CONFLICTS``, oldest first
    clashes: list[ShownClash]
    search_by_server: bool | None  # None: undecided until the first search
    search_local_documents: int
    # what holds memory, as the core counts it: name -> {"bytes": ..., "entries": ...}
    memory: dict[str, dict[str, int]]


@dataclass(frozen=True)
class CoreReport:
    """What a core leaves for the unmount report, once its final flush is over."""

    store_id: str
    gone_since: str | None
    pending: list[dict[str, str | None]]  # journal records not uploaded, and why
    refused: list[dict[str, str | None]]  # refused files still in the mount, and their copies
    conflicts: list[ConflictInfo]  # the kept ones, oldest first
    conflict_count: int  # kept or not
