"""What a core says about itself: ``CoreStatus`` (``memfs status``) and ``CoreReport`` (the
unmount report), each taken whole at one moment from a core's parts by ``take_status`` and
``take_final_report`` (``Vfs.snapshot`` and ``Vfs.final_report``; no ``await`` while they are
collected). The mount words them: ``memfs.mount.status`` and ``status_text`` the status,
``memfs.mount.report`` the unmount report.

It reads the parts and changes nothing, but for the refusals of files removed since, which the
final report forgets (``Refusals.report``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memfs.core.model.clashes import Clash
from memfs.core.ops.durable import ConflictInfo
from memfs.core.ops.parts import CoreParts


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
    open_for_writing: list[str]  # the paths of files open for writing (``memfs umount`` asks)


@dataclass(frozen=True)
class CoreReport:
    """What a core leaves for the unmount report (``memfs.mount.report``), once its final flush
    is over."""

    store_id: str
    gone_since: str | None
    pending: list[dict[str, str | None]]  # journal records not uploaded, and why
    refused: list[dict[str, str | None]]  # refused files still in the mount, and their copies
    conflicts: list[ConflictInfo]  # the kept ones, oldest first
    conflict_count: int  # kept or not
    # files open for writing when the mount ended, and where their content went (``open_at_end``)
    open_at_end: list[dict[str, str | None]]


def take_status(parts: CoreParts, *, conflicts: int) -> CoreStatus:
    """What ``memfs status`` shows, now; the newest ``conflicts`` conflicts listed."""
    durable, contents, listings, bulk = parts.durable, parts.contents, parts.listings, parts.bulk
    journal = durable.journal
    store_search = parts.search.search
    return CoreStatus(
        store_id=parts.store.store_id,
        read_only=parts.state.read_only,
        gone_since=parts.gone.since,
        requests=parts.store.request_counts(),
        cache=CacheFigures(
            content_hits=contents.hits,
            content_misses=contents.misses,
            content_bytes=contents.bytes,
            content_items=len(contents),
            content_limit_bytes=contents.max_bytes,
            listing_hits=listings.hits,
            listing_misses=listings.misses,
            listings=len(listings),
            listing_patches=listings.patches,
            prefetches=bulk.prefetches,
            walk_prefetches=bulk.walk_prefetches,
            prefetch_pages=bulk.pages,
            walk_most_in_flight=bulk.most_in_flight,
            inodes=len(parts.state.table.nodes),
        ),
        uploads=UploadFigures(
            pending=len(parts.writeback),
            waiting=sorted(map(durable.describe, parts.writeback.keys())),
            journal_records=len(journal) if journal is not None else 0,
            journal_dir=str(journal.directory) if journal is not None else None,
            failed=dict(durable.failed.values()),
            waiting_for_room=sorted(map(durable.describe, parts.state.waiting_for_room)),
            retrying=dict(durable.retrying.values()),
            replayed=durable.replayed,
            untouched=durable.untouched,
        ),
        refused=durable.refusals.status(),
        local_budget=parts.budget.status(),
        conflict_count=durable.conflict_count,
        recent_conflicts=durable.conflicts[-conflicts:] if conflicts else [],
        clashes=_shown_clashes(parts),
        search_by_server=store_search.by_server,
        search_local_documents=len(store_search.local.index),
        memory=_memory_holders(parts),
        open_for_writing=sorted(
            {h.node.path for h in parts.files.handles.values() if h.writable and h.node.path}
        ),
    )


def _memory_holders(parts: CoreParts) -> dict[str, dict[str, int]]:
    """What holds the daemon's memory, as the core counts it: the caches sharing the cache
    budget (bytes and entries each) and the structures outside it (entries; bytes where
    known)."""
    budget = parts.contents.budget
    holders = {
        "cache budget": {
            "bytes": budget.used,
            "limit": budget.max_bytes,
            "evictions": budget.evictions,
            "released": budget.released,
        }
    }
    for name, (size, entries) in budget.by_cache().items():
        holders[name] = {"bytes": size, "entries": entries}
    index = parts.search.search.local.index
    return holders | {
        "inodes": {"entries": len(parts.state.table.nodes)},
        "version index": {  # in the budget too; entries here are versions
            "bytes": parts.versions.index.charge.bytes,
            "entries": len(parts.versions.index.versions),
        },
        "version nodes": {"entries": len(parts.versions.nodes)},
        "search index": {"bytes": index.bytes, "entries": len(index)},
        "local files": {"bytes": parts.budget.total},
    }


def _shown_clashes(parts: CoreParts) -> list[ShownClash]:
    def shown(clash: Clash) -> bool:
        node = parts.state.table.by_id.get(clash.memory_id)
        return node is not None and node.path == clash.shown_path

    return [ShownClash(c.memory_path, c.shown_path) for c in parts.state.clashes.current(shown)]


def take_final_report(parts: CoreParts) -> CoreReport:
    """What the unmount report says of this store, once the final flush is over (it
    forgets the refusals of files removed since: ``Refusals.report``)."""
    durable = parts.durable
    return CoreReport(
        store_id=parts.store.store_id,
        gone_since=parts.gone.since,
        pending=durable.not_uploaded(),
        refused=durable.refusals.report(),
        conflicts=list(durable.conflicts),
        conflict_count=durable.conflict_count,
        open_at_end=open_at_end(parts),
    )


def open_at_end(parts: CoreParts) -> list[dict[str, str | None]]:
    """Each file open for writing when the mount ended (``Commits.save_open``), by path: where
    its content is now (``saved``), and the copy, conflict copy or journal that holds it
    (``where``): ``version`` (the store has it), ``conflict copy`` (another writer's version
    stays; the content is the conflict copy ``where``), ``kept copy`` (refused by the store:
    the file ``where``), ``journal`` (not uploaded: replayed from ``where`` by the next mount),
    ``not kept`` (a local-only name: never uploaded, gone with the mount; or a commit that
    failed: ``where`` says why)."""
    durable, refusals = parts.durable, parts.durable.refusals
    journal = str(durable.journal.directory) if durable.journal is not None else None
    entries: list[dict[str, str | None]] = []
    for saved in parts.commits.saved_open.values():
        node = saved.node
        path = node.path or saved.path
        saved_as: str
        where: str | None = None
        later = durable.conflict_count - saved.conflicts_before
        conflict = next(
            (c for c in reversed(durable.conflicts[-later:] if later else []) if c.path == path),
            None,
        )
        if node.local_only:
            saved_as, where = "not kept", "a local-only name: never uploaded"
        elif node.refused is not None:
            copy = refusals.copies.get(node.ino)
            saved_as, where = ("kept copy", str(copy)) if copy else ("not kept", "it was empty")
        elif conflict is not None:
            saved_as, where = "conflict copy", conflict.saved_as or None
        elif saved.failed is not None and not parts.writeback.pending(node.ino):
            saved_as, where = "not kept", saved.failed
        elif node.dirty or parts.writeback.pending(node.ino):
            saved_as, where = "journal", journal
        else:
            saved_as = "version"
        entries.append({"path": path, "saved": saved_as, "where": where})
    return sorted(entries, key=lambda entry: entry["path"] or "")
