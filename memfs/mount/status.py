"""What a mount reports about itself: ``memfs status MOUNTPOINT [--json]`` while it runs, and
the unmount report that ``memfs umount [--json]`` and the session runner read when it ends.

Owns the status document (the mount point, the store's name and id, the daemon's log file,
requests by endpoint, cache hits and misses, bytes cached, pending uploads and journal records,
the workspace the journal belongs to and the store's journals the mount leaves alone (another
workspace's, or one of an earlier memfs that recorded none: ``JournalsOfStore``), the paths
waiting, refused or in conflict, the files open for writing, the change feed's health in words
and its lag, recent errors), the
``RecentErrors`` log handler that remembers the last warnings and errors, the ``StatusWriter``
task that the daemon runs to publish the document every second as
``<runtime dir>/memfs/<hash of the mount point>.status`` (written atomically; reading it costs
the daemon nothing and works even while the mount is busy), and the text rendering.

The unmount report (``unmount_report``) is the JSON document the daemon leaves when it exits, as
``<runtime dir>/memfs/<hash of the mount point>.report.json`` (0600, written atomically): what
was not uploaded (``pending``: journal records, with the error ``memfs status`` shows for them),
refused files, the files open for writing when the mount ended and where their content went
(``open_at_end``), conflicts, the store's deletion and where its changes were handed over, and the
errors of the final flush. It is built from the state ``collect`` reads, so the two agree;
``report_sections`` words it (``memfs umount`` prints it, the session runner's stop report quotes
it).

``collect`` must not change any state of the mount (``unmount_report`` runs once it is over:
it forgets the refusals of files removed since, as the refusals module says).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from memfs.contract.paths import shown
from memfs.host.private import replace_file

if TYPE_CHECKING:
    from memfs.core.store_core import ConflictInfo, CoreStatus, StoreCore
    from memfs.mount.changefeed import ChangeFeed
    from memfs.writeback.journal import WaitingJournal
    from memfs.writeback.workspace import WorkspaceId

log = logging.getLogger(__name__)

STATUS_INTERVAL = 1.0
STATUS_CONFLICTS = 10  # the newest conflicts ``memfs status`` lists (the rest are counted)
REPORT_TYPE = "memfs_unmount_report"


class RecentErrors(logging.Handler):
    """Keeps the last ``size`` WARNING-or-worse messages of the ``memfs`` loggers."""

    def __init__(self, size: int = 20) -> None:
        super().__init__(level=logging.WARNING)
        self.records: collections.deque[dict[str, str]] = collections.deque(maxlen=size)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:
            message = str(record.msg)
        self.records.append(
            {
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created)),
                "level": record.levelname,
                "message": message[:500],
            }
        )


@dataclass(frozen=True)
class JournalsOfStore:
    """The workspace of a mount's journal, and the store's journals it leaves alone (found at
    mount: other workspaces', and one of an earlier memfs that recorded no workspace)."""

    workspace: WorkspaceId
    not_replayed: list[WaitingJournal] = field(default_factory=list)

    def status(self) -> dict[str, Any]:
        """The ``uploads`` part of the status document that says so."""
        return {
            "workspace": {"api": self.workspace.api, "base_url": self.workspace.base_url},
            "not_replayed": [
                {
                    "directory": str(journal.directory),
                    "records": journal.records,
                    "workspace": None
                    if journal.workspace is None
                    else {"api": journal.workspace.api, "base_url": journal.workspace.base_url},
                    "why": _why_not_replayed(journal),
                }
                for journal in self.not_replayed
            ],
        }


def _why_not_replayed(journal: WaitingJournal) -> str:
    if journal.workspace is None:
        return (
            "written by an earlier memfs, which recorded no workspace: mount with "
            "--replay-legacy-journal to upload it to this mount's workspace"
        )
    return f"waits for a mount of {journal.workspace}"


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def feed_health(feed: ChangeFeed) -> dict[str, Any]:
    """The change feed's state, and the same in words (``health``) for ``memfs status``."""
    health = feed.health()
    since = None if health.since is None else _utc(health.since)
    words = {
        "connected": "connected (the server's change stream)",
        "reconnecting": f"reconnecting since {since} ({health.why or 'no answer'})",
        "polling": f"polling every {health.interval:g} s ({'in use' if feed.in_use() else 'idle'})",
        "stopped": "stopped: the store no longer exists",
    }[health.state]
    return {"state": health.state, "since": since, "health": words}


def log_file() -> str | None:
    """The file this process logs to (None: a terminal or nowhere): ``memfs mount`` sets up one
    file handler on the root logger."""
    for handler in logging.getLogger().handlers:
        name = getattr(handler, "baseFilename", None)
        if isinstance(name, str):
            return name
    return None


def collect(
    vfs: StoreCore,
    feed: ChangeFeed | None,
    errors: RecentErrors | None,
    *,
    mountpoint: str | None = None,
    store_name: str | None = None,
    journals: JournalsOfStore | None = None,
) -> dict[str, Any]:
    """The status document of one mount (JSON-ready), from the core's ``snapshot``."""
    core = vfs.snapshot(conflicts=STATUS_CONFLICTS)
    feed_doc: dict[str, Any] = {"source": None}
    if feed is not None:
        stats = feed.stats
        lag = feed.lag()
        feed_doc = feed_health(feed) | {
            "source": stats.source,
            "polls": stats.polls,
            "changes_applied": stats.changes,
            "resyncs": stats.resyncs,
            "errors": feed.error_count(),
            "lag_seconds": None if lag is None else round(lag, 3),
            "interval_seconds": feed.current_interval(),
            "in_use": feed.in_use(),
            "last_error": stats.last_error or None,
        }
    recent = core.recent_conflicts
    return {
        "type": "memfs_status",
        "mountpoint": mountpoint,
        "store_id": core.store_id,
        "store_name": store_name,
        "log_file": log_file(),
        "pid": os.getpid(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "read_only": core.read_only,
        "store_gone": None if core.gone_since is None else {"since": core.gone_since},
        "requests": core.requests,
        "cache": dataclasses.asdict(core.cache),
        "uploads": dataclasses.asdict(core.uploads)
        | (journals.status() if journals is not None else {}),
        "refused": core.refused,
        "local_budget": core.local_budget,
        "conflicts": {
            "count": core.conflict_count,
            "recent": [_conflict(c) | {"saved": c.saved} for c in recent],
            "not_listed": core.conflict_count - len(recent),
        },
        "clashes": [
            {"file": c.memory_path, "directory": c.memory_path + "/", "shown_as": c.shown_path}
            for c in core.clashes
        ],
        "search": search_health(core),
        "memory": core.memory,
        "open_for_writing": core.open_for_writing,
        "change_feed": feed_doc,
        "recent_errors": list(errors.records) if errors is not None else [],
    }


def search_health(core: CoreStatus) -> dict[str, Any]:
    """Who answers the mount's ``.search/``: the server, or a local index of the store (and its
    size); undecided until the first search asks the server."""
    by = {None: "undecided", True: "server", False: "local index"}[core.search_by_server]
    return {"by": by, "local_documents": core.search_local_documents}


def _conflict(conflict: ConflictInfo) -> dict[str, Any]:
    return {"path": conflict.path, "saved_as": conflict.saved_as, "at": conflict.at}


def unmount_report(
    vfs: StoreCore,
    *,
    orphaned: tuple[Path, list[str]] | None,
    errors: list[str],
    mountpoint: str | None = None,
    store_name: str | None = None,
) -> dict[str, Any]:
    """The unmount report of a mount whose final flush is over (JSON-ready; module docstring).
    ``orphaned``: where the changes of a deleted store were handed over, one line per change;
    ``errors``: what went wrong in the final flush, one line each."""
    core = vfs.final_report()
    return {
        "type": REPORT_TYPE,
        "mountpoint": mountpoint,
        "store_id": core.store_id,
        "store_name": store_name,
        "store_gone": None if core.gone_since is None else {"since": core.gone_since},
        "orphaned": None
        if orphaned is None
        else {"directory": str(orphaned[0]), "files": list(orphaned[1])},
        "pending": core.pending,
        "refused": core.refused,
        "conflicts": [_conflict(c) for c in core.conflicts],
        # conflicts older than the kept ones (``MAX_CONFLICTS_KEPT``): counted, not listed
        "conflicts_not_listed": core.conflict_count - len(core.conflicts),
        # files open for writing when it ended: where their content went
        "open_at_end": core.open_at_end,
        "errors": list(errors),
    }


def report_problems(report: dict[str, Any]) -> bool:
    """Whether the report says something was not uploaded as it was meant to (exit status 1);
    in a mount of several stores, in any of them."""
    if "stores" in report:
        return any(report_problems(store) for store in report["stores"])
    keys = ("pending", "refused", "conflicts", "store_gone")
    lost = ("journal", "not kept")  # a file open at the end whose content is not in the store
    at_end = report.get("open_at_end") or []
    return any(report.get(key) for key in keys) or any(f["saved"] in lost for f in at_end)


def report_saved_open(report: dict[str, Any]) -> bool:
    """Whether the report names files open for writing when the mount ended (``open_at_end``):
    ``memfs umount`` tells where their content went even when all of it is in the store."""
    if "stores" in report:
        return any(report_saved_open(store) for store in report["stores"])
    return bool(report.get("open_at_end"))


def report_sections(report: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    """The report in words: ``(kind, header, items)`` per part that has something to say;
    ``kind`` is ``open``, ``gone``, ``pending``, ``refused`` or ``conflicts``. In a mount of several
    stores, each store's sections, their headers naming the store's directory. Every line is
    ``paths.shown``: a file name an agent chose (a local-only name may hold any character but
    ``/``) reaches root's terminal escaped, one line each."""
    if "stores" in report:
        return [
            (kind, shown(f"{store.get('slug')}: ") + header, items)
            for store in report["stores"]
            for kind, header, items in report_sections(store)
        ]
    return [
        (kind, shown(header), [shown(item) for item in items])
        for kind, header, items in _sections_of_one_store(report)
    ]


def _sections_of_one_store(report: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    """``report_sections`` of one store's report, its paths as they are (``shown`` after)."""
    sections: list[tuple[str, str, list[str]]] = []
    at_end = report.get("open_at_end") or []
    if at_end:
        header = (
            f"{len(at_end)} file(s) were open for writing when the mount ended (the programs "
            "holding them were cut off); what they had written was saved:"
        )
        sections.append(("open", header, [_open_at_end(entry) for entry in at_end]))
    if report.get("store_gone"):
        header = f"the memory store {report['store_id']} no longer exists (deleted while mounted)"
        orphaned = report.get("orphaned")
        if orphaned and orphaned["files"]:
            files = orphaned["files"]
            header += (
                f"; {len(files)} change(s) could never be uploaded and are not replayed; their "
                f"content is handed over as plain files in {orphaned['directory']}:"
            )
            sections.append(("gone", header, list(files)))
        else:
            sections.append(("gone", header + "; nothing was waiting to be uploaded", []))
    pending = report.get("pending") or []
    if pending:
        where = pending[0]["kept_in"] or "the daemon's memory (lost)"
        sections.append(
            (
                "pending",
                f"{len(pending)} change(s) not uploaded; kept in {where} (replayed at next mount):",
                [f"{p['op']} {p['path']}: {p['why']}" for p in pending],
            )
        )
    refused = report.get("refused") or []
    if refused:
        sections.append(
            (
                "refused",
                f"{len(refused)} file(s) refused by the store; never uploaded:",
                [
                    f"refused {r['path']}: {r['why']}; never uploaded, "
                    + (f"a copy is in {r['copy']}" if r["copy"] else "it was empty")
                    for r in refused
                ],
            )
        )
    conflicts = report.get("conflicts") or []
    if conflicts:
        not_listed = report.get("conflicts_not_listed") or 0
        items = [
            f"{c['path']}: changed on the server by another writer; the server's version stays"
            + (f", the local content is saved as {c['saved_as']}" if c["saved_as"] else "")
            for c in conflicts
        ]
        if not_listed:
            items.append(more_conflicts(not_listed))
        sections.append(
            ("conflicts", f"{len(conflicts) + not_listed} conflict(s) while mounted:", items)
        )
    return sections


def _open_at_end(entry: dict[str, Any]) -> str:
    """Where the content of a file open for writing at the end went, in words."""
    path, where = entry["path"], entry.get("where")
    return {
        "version": f"{path}: saved as a version of the store",
        "conflict copy": f"{path}: changed on the server meanwhile; saved as {where}",
        "kept copy": f"{path}: refused by the store; its content is in the kept copy {where}",
        "journal": f"{path}: not uploaded; kept in {where} (uploaded by the next mount)",
    }.get(entry["saved"], f"{path}: not kept ({where})")


def more_conflicts(count: int) -> str:
    """What stands for the conflicts too old to be listed: nothing is silently dropped."""
    return f"… and {count} more; the conflict copies are in the mount"


def render_report(report: dict[str, Any]) -> str:
    """The unmount report as text for a person (empty: nothing to say)."""
    return "".join(
        header + "\n" + "".join(f"  {item}\n" for item in items)
        for _, header, items in report_sections(report)
    )


class StatusWriter:
    """Publishes ``document()`` to ``path`` every second until cancelled."""

    def __init__(self, path: Path, document: Callable[[], dict[str, Any]]) -> None:
        self.path = path
        self.document = document

    def write(self) -> None:
        document = self.document()
        replace_file(self.path, json.dumps(document, indent=1).encode("utf-8"), "status file")

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            while True:
                try:
                    self.write()
                except OSError as exc:
                    log.debug("status not written: %s", exc)
                await trio.sleep(STATUS_INTERVAL)
        finally:
            self.path.unlink(missing_ok=True)


def collect_mount(
    stores: list[dict[str, Any]],
    scratch: dict[str, int],
    errors: RecentErrors | None,
    *,
    mountpoint: str,
) -> dict[str, Any]:
    """The status document of a mount of several stores: one ``collect`` section per store
    (with its ``slug`` and ``health``), the local scratch, the daemon's recent errors."""
    return {
        "type": "memfs_status",
        "mountpoint": mountpoint,
        "log_file": log_file(),
        "pid": os.getpid(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "stores": [store | {"health": store_health(store)} for store in stores],
        "scratch": scratch,
        "recent_errors": list(errors.records) if errors is not None else [],
    }


def store_health(doc: dict[str, Any]) -> str:
    """One store's health in words, from its section of the status document."""
    if doc.get("unavailable"):
        return f"UNAVAILABLE: {doc['unavailable']} (its directory answers EIO)"
    if doc.get("failed"):
        return f"FAILED: {doc['failed']}"
    if doc.get("store_gone"):
        return "GONE: deleted on the server (changes fail with ENODEV)"
    feed = doc.get("change_feed") or {}
    if feed.get("state") == "reconnecting":
        return f"UNREACHABLE: {feed.get('health')}"
    uploads = doc.get("uploads") or {}
    if uploads.get("failed") or uploads.get("retrying"):
        return "uploads failing (see below)"
    return "ok"


def store_section(doc: dict[str, Any], slug: str) -> dict[str, Any] | None:
    """The section of the store ``slug`` in the status document of a mount of several."""
    for store in doc.get("stores") or []:
        if store.get("slug") == slug:
            return dict(store) | {
                "pid": doc.get("pid"),
                "time": doc.get("time"),
                "log_file": doc.get("log_file"),
                "recent_errors": doc.get("recent_errors", []),
            }
    return None


def open_for_writing(doc: dict[str, Any]) -> set[str]:
    """The files a status document says are open for writing, relative to its mount point
    (``notes/a.md``; in a mount of several stores ``<slug>/notes/a.md``)."""
    if "stores" in doc:
        return {
            f"{section.get('slug')}/{path.lstrip('/')}"
            for section in doc["stores"]
            for path in section.get("open_for_writing") or []
        }
    return {path.lstrip("/") for path in doc.get("open_for_writing") or []}


def mount_report(reports: list[dict[str, Any]], *, mountpoint: str) -> dict[str, Any]:
    """The unmount report of a mount of several stores: one ``unmount_report`` per store."""
    return {"type": REPORT_TYPE, "mountpoint": mountpoint, "stores": reports}


def _budget_line(memory: dict[str, dict[str, int]] | None) -> list[str]:
    """The cache budget's use, and what uses it (``--cache-size``: memfs.contract.cache_budget)."""
    if not memory or "cache budget" not in memory:
        return []
    budget = memory["cache budget"]
    parts = ", ".join(
        f"{name} {part['bytes']:,}"
        for name, part in memory.items()
        if name in _CHARGED and part.get("bytes")
    )
    return [
        f"cache budget     {budget['bytes']:,} of {budget['limit']:,} bytes"
        + (f" ({parts})" if parts else "")
    ]


_CHARGED = (
    "contents",
    "listings",
    "version contents",
    "version views",
    "version logs",
    "version index",
    "search index",
)


def render(doc: dict[str, Any]) -> str:
    """The status document as text for a person: a mount of several stores shows each store,
    then its scratch. Each line is ``paths.shown``: names and log messages hold paths an agent
    chose, and reach a terminal escaped."""
    if "stores" in doc:
        return render_mount(doc)
    return render_store(doc)


def render_mount(doc: dict[str, Any]) -> str:
    scratch = doc.get("scratch") or {}
    lines = [
        f"mountpoint       {doc.get('mountpoint') or '?'} ({len(doc['stores'])} stores)",
        f"daemon           pid {doc['pid']}, status of {doc['time']}",
        f"log file         {doc.get('log_file') or '(none: the daemon logs to its terminal)'}",
        f"local scratch    {scratch.get('used_bytes', 0):,} of {scratch.get('limit_bytes', 0):,} "
        f"bytes, {scratch.get('inodes', 0)} inodes, {scratch.get('enospc', 0)} ENOSPC answered "
        "(in memory, never uploaded)",
    ]
    for store in doc["stores"]:
        lines += ["", f"== {store.get('slug')}: {store.get('health')}"]
        if store.get("unavailable"):
            continue
        section = store_section(doc, store.get("slug")) or store
        lines += render_store(section | {"recent_errors": []}).splitlines()[:-1]
    errors = doc["recent_errors"]
    lines.append(f"recent errors    {len(errors)}")
    for item in errors[-5:]:
        lines.append(f"  {item['time']} {item['level']} {item['message']}")
    return "\n".join(shown(line) for line in lines)  # one line each, escaped


def _sync_lines(sync: dict[str, Any] | None) -> list[str]:
    """The section of a synced directory (``memfs sync``): what moved, what stays local."""
    if not sync:
        return []
    lines = [
        f"sync             {sync.get('uploads', 0)} uploaded, {sync.get('downloads', 0)} written "
        f"here, {sync.get('local_deletes', 0)}/{sync.get('remote_deletes', 0)} deletes "
        f"(from here/from the store), {sync.get('renames', 0)} renames, "
        f"{sync.get('conflicts', 0)} conflicts; watching by {sync.get('watcher')}"
    ]
    if sync.get("directory_gone"):
        lines.append("  PAUSED: the directory is gone or was replaced; nothing is deleted")
    for path, why in sorted((sync.get("not_synced") or {}).items()):
        lines.append(f"  stays local: {path}: {why}")
    for path, kept in sorted((sync.get("put_back") or {}).items()):
        lines.append(f"  read-only, put back: {path} (the local text kept in {kept})")
    return lines


def render_store(doc: dict[str, Any]) -> str:
    """One store's status document as text."""
    if doc.get("unavailable"):
        return (
            f"mountpoint       {doc.get('mountpoint') or '?'}\n"
            f"store            {doc.get('store_name')}: {store_health(doc)}"
        )
    requests = doc["requests"]
    cache = doc["cache"]
    uploads = doc["uploads"]
    feed = doc["change_feed"]
    name = f"{doc['store_name']} ({doc['store_id']})" if doc.get("store_name") else doc["store_id"]
    where = "synced dir " if doc.get("sync") else "mountpoint "  # memfs sync, memfs mount
    lines = [
        f"{where}      {doc.get('mountpoint') or '?'}",
        f"store            {name}{'  (read-only)' if doc['read_only'] else ''}",
        f"daemon           pid {doc['pid']}, status of {doc['time']}",
        f"log file         {doc.get('log_file') or '(none: the daemon logs to its terminal)'}",
    ]
    if doc.get("store_gone"):
        lines.append(
            f"STORE GONE       deleted on the server (noticed {doc['store_gone']['since']}): "
            "changes fail with ENODEV; pending changes are handed over as plain files at unmount"
        )
    search = doc.get("search") or {"by": "undecided"}
    searched_by = {
        "server": "the server's search",
        "local index": f"a local index ({search.get('local_documents', 0)} memories)",
    }.get(search["by"], "decided by the first search of .search/")
    lines += [
        f"search           {searched_by}",
        f"requests         {requests['total']} ({requests['retries']} retries)",
    ]
    for route, count in sorted(requests["by_route"].items(), key=lambda kv: -kv[1]):
        lines.append(f"  {count:>8}  {route}")
    hits, misses = cache["content_hits"], cache["content_misses"]
    lines += [
        f"content cache    {hits} hits, {misses} misses, {cache['content_items']} items, "
        f"{cache['content_bytes']:,} of {cache['content_limit_bytes']:,} bytes",
        f"listing cache    {cache['listing_hits']} hits, {cache['listing_misses']} misses, "
        f"{cache['listings']} directories, {cache['listing_patches']} changes patched in; "
        f"{cache['prefetches']} bulk fetches "
        f"({cache['walk_prefetches']} ahead of a walk, {cache['prefetch_pages']} pages)",
        *_budget_line(doc.get("memory")),
        f"uploads          {uploads['pending']} pending, {uploads['journal_records']} in the "
        f"journal ({uploads['journal_dir']}), {uploads['replayed']} replayed at start",
    ]
    if uploads.get("workspace"):
        workspace = uploads["workspace"]
        lines.append(f"  workspace: {workspace['base_url']} ({workspace['api']})")
    for journal in uploads.get("not_replayed", []):
        lines.append(
            f"  not replayed: {journal['records']} journal record(s) in {journal['directory']}: "
            f"{journal['why']}"
        )
    if uploads.get("untouched"):
        lines.append(
            f"  read-only: {uploads['untouched']} journal record(s) of an earlier mount left "
            "untouched for the next read-write mount"
        )
    for path in uploads.get("waiting", []):
        lines.append(f"  waiting: {path}")
    for name, why in uploads["failed"].items():
        lines.append(f"  failed: {name}: {why}")
    for name, why in uploads.get("retrying", {}).items():
        lines.append(f"  retrying: {name}: {why}")
    for path in uploads.get("waiting_for_room", []):
        lines.append(f"  waiting for room (the store is full): {path}")
    for path in doc.get("open_for_writing", []):  # memfs umount refuses while there are some
        lines.append(f"  open for writing: {path}")
    refused = doc.get("refused")
    if refused:
        why = refused["by_reason"]
        lines.append(
            f"refused          {refused['count']} (too large {why['too large']}"
            f", not UTF-8 {why['not UTF-8']}, a refused character {why.get('refused character', 0)}"
            f", descriptions {why.get('description', 0)}); never uploaded, copies kept"
        )
        for path in refused["files"]:
            lines.append(f"  refused: {path}")
        copies = refused.get("copies", {})
        if refused["files"]:
            lines.append(f"  copies of refused text in {refused.get('kept_dir')}")
        for path in refused["files"]:
            if path in copies and copies[path] is None:
                lines.append(f"  not kept (empty, or its copy failed; in memory only): {path}")
        if refused.get("earlier_copies_removed"):
            lines.append(
                f"  {refused['earlier_copies_removed']} copies of earlier mounts removed to "
                "make room (the oldest first)"
            )
    budget = doc.get("local_budget")
    if budget:
        since = f" since {budget['full_since']}" if budget.get("full_since") else ""
        state = (
            f"FULL{since}: creates and writes that grow a file get ENOSPC"
            if budget["full"]
            else "room left"
        )
        lines.append(
            f"local bytes      {budget['used_bytes']:,} of {budget['limit_bytes']:,} "
            "(--local-bytes: local-only files, refused content, kept copies, files waiting "
            f"for the store); {state}; "
            f"{budget['enospc']} ENOSPC answered"
        )
    conflicts = doc["conflicts"]
    lines.append(f"conflicts        {conflicts['count']}")
    for item in conflicts["recent"]:
        lines.append(f"  {item['at']}  {item['path']} -> {item['saved_as'] or '(not saved)'}")
    if conflicts.get("not_listed"):
        lines.append(f"  {more_conflicts(conflicts['not_listed'])}")
    for clash in doc.get("clashes", []):
        lines.append(
            f"name clash       {clash['file']} (file) and {clash['directory']} (directory): "
            f"the file is shown as {clash['shown_as']}"
        )
    lines += _sync_lines(doc.get("sync"))
    if feed.get("source"):
        lag = feed["lag_seconds"]
        lines.append(
            f"change feed      {feed['health']}; lag {'?' if lag is None else f'{lag:.1f} s'}, "
            f"{feed['changes_applied']} changes, {feed['resyncs']} resyncs, "
            f"{feed['errors']} errors"
        )
    errors = doc["recent_errors"]
    lines.append(f"recent errors    {len(errors)}")
    for item in errors[-5:]:
        lines.append(f"  {item['time']} {item['level']} {item['message']}")
    return "\n".join(shown(line) for line in lines)  # one line each, escaped
