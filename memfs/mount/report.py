"""The unmount report: what a mount whose end is over leaves for ``memfs umount [--json]`` and
the session runner, and its words.

``unmount_report`` is the JSON document the daemon leaves when it exits, as
``<runtime dir>/memfs/<hash of the mount point>.report.json`` (0600, written atomically): what
was not uploaded (``pending``: journal records, with the error ``memfs status`` shows for them),
refused files, the files open for writing when the mount ended and where their content went
(``open_at_end``), conflicts, the store's deletion and where its changes were handed over, and the
errors of the final flush. It is built from the state ``memfs.mount.status.collect`` reads, so
the two agree; ``report_sections`` words it (``memfs umount`` prints it, the session runner's stop
report quotes it). It runs once the mount is over: it forgets the refusals of files removed
since, as the refusals module says.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from memfs.contract.paths import shown
from memfs.mount.status import conflict_doc

if TYPE_CHECKING:
    from memfs.core import StoreCore

REPORT_TYPE = "memfs_unmount_report"


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
        "conflicts": [conflict_doc(c) for c in core.conflicts],
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


def mount_report(reports: list[dict[str, Any]], *, mountpoint: str) -> dict[str, Any]:
    """The unmount report of a mount of several stores: one ``unmount_report`` per store."""
    return {"type": REPORT_TYPE, "mountpoint": mountpoint, "stores": reports}
