"""What a mount reports about itself while it runs: the status document ``memfs status
MOUNTPOINT [--json]`` reads, collected and published.

Owns the status document (the mount point, the store's name and id, the daemon's log file,
requests by endpoint, cache hits and misses, bytes cached, pending uploads and journal records,
the workspace the journal belongs to and the store's journals the mount leaves alone (another
workspace's, or one of an earlier memfs that recorded none: ``JournalsOfStore``), the paths
waiting, refused or in conflict, the files open for writing, the change feed's health in words
and its lag, recent errors), the ``RecentErrors`` log handler that remembers the last warnings
and errors, and the ``StatusWriter`` task that the daemon runs to publish the document every
second as ``<runtime dir>/memfs/<hash of the mount point>.status`` (written atomically; reading
it costs the daemon nothing and works even while the mount is busy), and on request, as of that
moment, on the socket beside it (``memfs.mount.statedir.fresh_status`` asks it). Its text is
``memfs.mount.status_text``'s; the report a mount leaves at its end ``memfs.mount.report``'s.

``collect`` must not change any state of the mount.
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

from memfs.host.private import replace_file
from memfs.mount.statedir import socket_path

if TYPE_CHECKING:
    from memfs.core import ConflictInfo, CoreStatus, StoreCore
    from memfs.mount.changefeed import ChangeFeed
    from memfs.writeback.journal import WaitingJournal
    from memfs.writeback.workspace import WorkspaceId

log = logging.getLogger(__name__)

STATUS_INTERVAL = 1.0
STATUS_CONFLICTS = 10  # the newest conflicts ``memfs status`` lists (the rest are counted)


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
            "recent": [conflict_doc(c) | {"saved": c.saved} for c in recent],
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


def conflict_doc(conflict: ConflictInfo) -> dict[str, Any]:
    """A conflict as the status document and the unmount report both show it."""
    return {"path": conflict.path, "saved_as": conflict.saved_as, "at": conflict.at}


class StatusWriter:
    """Publishes ``document()`` to ``path`` every second until cancelled, and answers at once
    on the socket beside it (``<path>.sock``, in the same private directory): a client that
    connects reads the document of that moment, then EOF (``statedir.fresh_status``), so
    ``memfs status`` prints figures that are current, not up to a second old."""

    def __init__(self, path: Path, document: Callable[[], dict[str, Any]]) -> None:
        self.path = path
        self.document = document

    def write(self) -> None:
        document = self.document()
        replace_file(self.path, json.dumps(document, indent=1).encode("utf-8"), "status file")

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._answer)
                task_status.started()
                while True:
                    try:
                        self.write()
                    except OSError as exc:
                        log.debug("status not written: %s", exc)
                    await trio.sleep(STATUS_INTERVAL)
        finally:
            self.path.unlink(missing_ok=True)

    async def _answer(self) -> None:
        """Serve the document on ``socket_path(self.path)`` until cancelled (none where the
        platform has no Unix sockets: readers fall back on the file)."""
        if not hasattr(trio.socket, "AF_UNIX"):
            return
        where = socket_path(self.path)
        listener = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        try:
            where.unlink(missing_ok=True)  # a killed daemon's: this mount point is ours now
            await listener.bind(str(where))
            listener.listen(STATUS_CLIENTS)
        except OSError as exc:
            listener.close()
            log.debug("status socket %s not served: %s", where, exc)
            return
        try:
            async with trio.open_nursery() as nursery:
                while True:
                    conn, _ = await listener.accept()
                    nursery.start_soon(self._send, conn)
        finally:
            listener.close()
            where.unlink(missing_ok=True)

    async def _send(self, conn: trio.socket.SocketType) -> None:
        """One answer; a client that does not read it within a second is dropped."""
        with conn, trio.move_on_after(STATUS_INTERVAL):
            data = json.dumps(self.document(), indent=1).encode("utf-8")
            while data:
                try:
                    sent = await conn.send(data)
                except OSError:
                    return
                data = data[sent:]


STATUS_CLIENTS = 8  # connections the status socket queues


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
