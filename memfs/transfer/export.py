"""``memfs export``: a store's memories into a directory tree (``export_memories``); the
versions of a Memory Stores store into git are ``memfs.transfer.export_history``'s.

The tree is ``memfs.transfer.layout``'s; files are written by ``export_tree`` (no link below DIR
followed; only files of the last export removed), git driven by ``export_git``.

``export_memories``: the memories as the store lists them now (Memory Stores: every memory;
Databricks: the entries a mount of the same actor and session shows: with a session, that
session's; without, the actor's session-less entries), plus ``.memfs/store.json`` and, for
Databricks, ``.memfs/descriptions.json``; with ``snapshot`` (``--git`` on Databricks, which has
no versions), the tree is then committed, one commit per run that changed it.

Nothing here prints: the command (``memfs.commands.export``) shows progress and the summary.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import trio

from memfs.contract.models import format_time
from memfs.contract.store_api import StoreAPI
from memfs.transfer import export_git as git
from memfs.transfer.export_listing import LIST_PAGE
from memfs.transfer.export_tree import (
    AHEAD_LOG_NAME,
    MANIFEST_NAME,
    SyncReport,
    Tree,
    blob_id,
    sync_tree,
)
from memfs.transfer.layout import (
    API_DATABRICKS,
    DESCRIPTIONS_FILE,
    META_DIR,
    STORE_FILE,
    StoreInfo,
    UnsafePathError,
    dump_descriptions,
    exported_file,
)

log = logging.getLogger(__name__)

Progress = Callable[[str, int, int | None], None]  # (phase, done, total or None)


@dataclass
class ExportReport:
    """What an export did; the command prints it."""

    memories: int = 0  # memories (files) in the tree now
    versions: int = 0  # versions listed that were new to the repository
    commits: int = 0
    requests: int = 0  # listing requests (pages)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path or id, reason)
    tree: SyncReport = field(default_factory=SyncReport)
    redacted_in_history: list[str] = field(default_factory=list)  # exported, redacted since
    history_starts: str | None = None  # the first commit's time, when this run made it
    # memories whose first version this run saw was not their creation: the server had
    # dropped their earlier versions (retention) before the repository's first commit
    begun_before_history: int = 0
    snapshot: bool = False  # --git on a store without versions: one commit per run


def no_progress(phase: str, done: int, total: int | None) -> None:
    pass


async def export_memories(
    store: StoreAPI,
    info: StoreInfo,
    root: Path,
    *,
    progress: Progress = no_progress,
    snapshot: bool = False,
) -> ExportReport:
    """Write the memories of ``store`` under ``root`` as the module docstring says.
    ``snapshot`` (a Databricks store: no versions to replay): DIR is a git repository and the
    tree written is committed as one commit when it differs from the last one."""
    report = ExportReport(snapshot=snapshot)
    repo = git.GitRepo(root) if snapshot else None
    if repo is not None:  # refused before anything is listed or written
        await trio.to_thread.run_sync(
            partial(repo.open, snapshot_key(info), untracked=SNAPSHOT_UNTRACKED)
        )
    wanted: dict[str, bytes] = {}
    descriptions: dict[str, str] = {}
    cursor: str | None = None
    while True:
        page = await store.list_subtree_page(None, cursor=cursor, limit=LIST_PAGE)
        report.requests += 1
        for memory in page.data:
            try:
                relative = exported_file(memory.path)
            except UnsafePathError as exc:
                report.skipped.append((memory.path, str(exc)))
                continue
            wanted[relative] = (memory.content or "").encode("utf-8")
            if memory.description:
                descriptions[memory.path] = memory.description
        progress("listing memories", len(wanted), None)
        if page.next_page is None:
            break
        cursor = page.next_page
    report.memories = len(wanted)
    wanted[f"{META_DIR}/{STORE_FILE}"] = info.to_bytes()
    if info.api == API_DATABRICKS:
        wanted[f"{META_DIR}/{DESCRIPTIONS_FILE}"] = dump_descriptions(descriptions)
    report.tree = await trio.to_thread.run_sync(_write_tree, root, wanted, progress)
    if repo is not None:
        del wanted[f"{META_DIR}/{STORE_FILE}"]
        report.commits = await trio.to_thread.run_sync(_commit_snapshot, repo, wanted, info)
    return report


# memfs's own files that are not part of a snapshot's history (descriptions.json is)
SNAPSHOT_UNTRACKED = (
    f"/{META_DIR}/{STORE_FILE}",
    f"/{META_DIR}/{MANIFEST_NAME}",
    f"/{META_DIR}/{AHEAD_LOG_NAME}",
)


def snapshot_key(info: StoreInfo) -> str:
    """A snapshot repository's ``Memfs-Store``: store, actor and session, on one line."""
    return f"{info.api} " + json.dumps([info.store_id, info.actor_id, info.session_id])


def _commit_snapshot(repo: git.GitRepo, files: dict[str, bytes], info: StoreInfo) -> int:
    """One commit of ``files`` if they differ from the branch's last tree; the commits made."""
    before = repo.tree_files()
    now = {path: blob_id(data) for path, data in files.items()}
    if now != before:
        added = len(now.keys() - before.keys())
        removed = len(before.keys() - now.keys())
        changed = sum(1 for path in now.keys() & before.keys() if now[path] != before[path])
        moment = datetime.now(UTC)
        message = (
            f"export: {added} added, {changed} changed, {removed} removed\n\n"
            f"{git.STORE}: {snapshot_key(info)}\n{git.TIME}: {format_time(moment)}\n"
        )
        with repo.fast_import() as stream:
            changes: list[tuple[str, str, int | None]] = [("deleteall", "", None)]
            changes += [("M", path, stream.blob(data)) for path, data in sorted(files.items())]
            actor = info.actor_id or "unknown"
            commit = stream.render_commit(
                author=(actor, git.address(actor, "databricks-actor")),
                when=moment,
                message=message,
                changes=changes,
            )
            stream.write_commits([commit])
            stream.done()
    repo.reset_index()
    return int(now != before)


def _write_tree(root: Path, files: Mapping[str, bytes], progress: Progress) -> SyncReport:
    wanted = {path: blob_id(data) for path, data in files.items()}
    written = 0

    def on_file() -> None:
        nonlocal written
        written += 1
        progress("writing files", written, None)

    with Tree(root) as tree:
        return sync_tree(tree, wanted, lambda paths: {p: files[p] for p in paths}, on_file=on_file)
