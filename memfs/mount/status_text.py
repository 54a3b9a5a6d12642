"""``memfs status``'s text: the status document (``memfs.mount.status``) for a person.

Reads the document only, never the mount. Each line is ``paths.shown``: names and log messages
hold paths an agent chose, and reach a terminal escaped, one line each.
"""

from __future__ import annotations

from typing import Any

from memfs.contract.paths import shown
from memfs.mount.report import more_conflicts
from memfs.mount.status import store_health, store_section


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


def render_list(entries: list[tuple[str, dict[str, Any], str | None]]) -> str:
    """``memfs status`` with no argument: one line per mount, session or sync of this user
    (``kind``, its status document, a session's id), and one more per store of a session."""
    if not entries:
        return "no memfs mount, session or sync runs for this user"
    lines = []
    for kind, doc, session_id in entries:
        where = doc.get("mountpoint") or "?"
        if "stores" in doc:
            named = f"{kind} {session_id}" if session_id else kind
            lines.append(f"{named:<8} {where}  {len(doc['stores'])} stores  (pid {doc.get('pid')})")
            for store in doc["stores"]:
                lines.append(f"  {store.get('slug')}  {_one_line(store)}")
        else:
            lines.append(f"{kind:<8} {where}  {_one_line(doc)}  (pid {doc.get('pid')})")
    return "\n".join(shown(line) for line in lines)


def _one_line(doc: dict[str, Any]) -> str:
    """A store's name, health and what waits, was refused or conflicted, in one line."""
    name = doc.get("store_name") or doc.get("store_id") or "?"
    if doc.get("store_name") and doc.get("store_id"):
        name = f"{doc['store_name']} ({doc['store_id']})"
    waiting = len((doc.get("uploads") or {}).get("waiting") or [])
    refused = len((doc.get("refused") or {}).get("files") or [])
    conflicts = (doc.get("conflicts") or {}).get("count", 0)
    return (
        f"{name}: {store_health(doc)}; {waiting} waiting, {refused} refused, {conflicts} conflicts"
    )
