"""``memfs export --git`` of a Memory Stores store: its versions into a git repository, one
commit per version (``export_history``), then the working tree made equal to the last commit.

The versions the server has not yet given to this repository go in oldest first, one commit
each (see ``docs/export-import.md`` for the commits). Where the last export ended is read from
the repository (the trailers of its commits), never from a file beside it, so a run stopped at
any point and run again ends with the commits of one uninterrupted run. With nothing new it
costs one listing request: the versions made at or after the last exported one's time.
Versions are listed newest first (the API's only order), so their contents go into git as blobs
as the pages come (memory holds their metadata only), and the commits follow once the listing is
complete. Nothing here prints.
"""

from __future__ import annotations

import logging
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

import trio

from memfs.api import StoreClient
from memfs.contract.models import MemoryStore, MemoryVersion, format_time, parse_time
from memfs.transfer import export_git as git
from memfs.transfer.export import ExportReport, Progress, no_progress
from memfs.transfer.export_ahead import TreeAhead
from memfs.transfer.export_listing import list_new_versions
from memfs.transfer.export_tree import SyncReport, Tree, blob_id, sync_tree
from memfs.transfer.layout import (
    API_MEMORY_STORES,
    META_DIR,
    STORE_FILE,
    StoreInfo,
    file_path,
    unsafe,
)

log = logging.getLogger(__name__)

# commits rendered and handed to fast-import per thread hop (progress is reported between two)
COMMIT_BATCH = 500
# commits between two fast-import checkpoints: each costs ~25 ms (a pack closed, a new one
# begun), about 1 s of fast-import's work at this interval; an export stopped meanwhile loses
# only the commits since the last one (the versions are listed again)
CHECKPOINT_EVERY = 20_000


def store_info(store: MemoryStore) -> StoreInfo:
    return StoreInfo(API_MEMORY_STORES, store.id, store.name, store.description)


async def export_history(
    client: StoreClient,
    store: MemoryStore,
    root: Path,
    *,
    repo: git.GitRepo | None = None,
    progress: Progress = no_progress,
    checkpoint_every: int = CHECKPOINT_EVERY,
    find_redacted: bool = False,
) -> ExportReport:
    """Append the versions of ``store`` not yet in ``root``'s repository as commits, and make
    the working tree the last commit's (module docstring).

    While the versions are listed, each memory's newest content is written ahead as its file
    (``export_ahead``). Once they are listed, the commits are rendered and handed to
    fast-import batch by batch, which gives the last commit's tree; the working tree is made
    equal to it (the newest content of each memory the listing brought, the rest from the
    branch; files written ahead are found equal, those it lacks removed) while fast-import
    digests the last commits, and is checked against the branch's tree once it is written (a
    difference: written again from the branch).

    Args:
        repo: ``root``'s repository (default: opened there).
        progress: told each phase's progress (``memfs.transfer.export.Progress``).
        checkpoint_every: commits between two fast-import checkpoints (``CHECKPOINT_EVERY``).
        find_redacted: also list every version, without contents, to report all those
            redacted since they were exported (not only those made since the last export).
    """
    repo = repo or git.GitRepo(root)
    report = ExportReport()
    with Tree(root):  # DIR exists from here on
        pass
    history = await trio.to_thread.run_sync(repo.open, store.id)
    before = await trio.to_thread.run_sync(repo.tree_files)
    info = store_info(store)
    ahead = TreeAhead(root)
    try:
        planned, unwritten = await _commit_history(
            client, info, repo, history, before, ahead, report, progress, checkpoint_every
        )
        await trio.to_thread.run_sync(_finish_tree, repo, planned, info, report, unwritten, ahead)
    except BaseException:
        ahead.abandon()  # local unlinks only: done even when cancelled
        raise
    finally:
        ahead.close()
    if find_redacted:
        await _find_redacted(client, store.id, history.exported, report)
    return report


async def _commit_history(
    client: StoreClient,
    info: StoreInfo,
    repo: git.GitRepo,
    history: git.History,
    before: dict[str, str],
    ahead: TreeAhead,
    report: ExportReport,
    progress: Progress,
    checkpoint_every: int,
) -> tuple[dict[str, str] | None, bool]:
    """List the new versions and commit them through one fast-import; the working tree
    planned from the commits (None: write it from the branch) and whether it is unwritten."""
    since = parse_time(history.last_time) if history.last_time else None
    with repo.fast_import() as stream:
        listing = await list_new_versions(
            client,
            info.store_id,
            since,
            history,
            stream,
            ahead,
            lambda listed: progress("listing versions", listed, None),
        )
        report.requests += listing.pages
        report.redacted_in_history += listing.redacted_in_history
        report.versions = len(listing.versions)
        newest = listing.newest
        commits = _Commits(info.store_id, history, stream, listing.marks, report, dict(before))
        oldest_first = listing.versions[::-1]
        batch = max(1, min(COMMIT_BATCH, checkpoint_every))
        pending = 0  # commits written since the last checkpoint
        for start in range(0, len(oldest_first), batch):
            chunk = oldest_first[start : start + batch]
            pending += len(chunk)
            checkpoint = pending >= checkpoint_every and start + batch < len(oldest_first)
            await trio.to_thread.run_sync(commits.write, chunk, checkpoint)
            pending = 0 if checkpoint else pending
            progress("committed", stream.commits, len(oldest_first))
        # every commit is rendered, and the last commit's tree known; fast-import may still be
        # digesting them (its input pipe holds up to 1 MiB): the working tree is written
        # meanwhile, once the files written ahead are
        planned = _planned_tree(commits.files, newest, info)
        with ThreadPoolExecutor(1) as pool:
            checkout = (
                pool.submit(_write_planned, repo, planned, newest, info, ahead)
                if planned is not None and oldest_first
                else None
            )
            try:
                await trio.to_thread.run_sync(stream.done)
                if checkout is not None:
                    report.tree = await trio.to_thread.run_sync(checkout.result)
            finally:
                if checkout is not None:  # never leave it writing behind us
                    wait([checkout])
    report.commits = stream.commits
    return planned, checkout is None


async def _find_redacted(
    client: StoreClient, store_id: str, exported: set[str], report: ExportReport
) -> None:
    """Every version the repository holds with its content that the server has redacted
    since (a listing of all versions without contents, 100 a page)."""
    known = set(report.redacted_in_history)
    cursor: str | None = None
    while True:
        page = await client.list_versions_page(store_id, limit=100, view="basic", page=cursor)
        report.requests += 1
        for version in page.data:
            if version.redacted and version.id in exported and version.id not in known:
                report.redacted_in_history.append(version.id)
                known.add(version.id)
        if page.next_page is None:
            return
        cursor = page.next_page


_VERSION = "version:"  # in ``_Commits.files``: the file holds this version's content


def _planned_tree(
    files: dict[str, str], newest: dict[str, bytes], info: StoreInfo
) -> dict[str, str] | None:
    """The working tree of the last commit (file -> blob id), from the commits rendered; None
    if a file holds a version whose content the listing did not keep (then the tree is
    written from the branch once fast-import is done)."""
    planned = {f"{META_DIR}/{STORE_FILE}": blob_id(info.to_bytes())}
    for path, source in files.items():
        if source.startswith(_VERSION):
            data = newest.get(source.removeprefix(_VERSION))
            if data is None:
                return None
            planned[path] = blob_id(data)
        else:
            planned[path] = source
    return planned


def _write_planned(
    repo: git.GitRepo,
    planned: dict[str, str],
    newest: dict[str, bytes],
    info: StoreInfo,
    ahead: TreeAhead,
) -> SyncReport:
    """Write the working tree ``planned``: contents from the listing, or the branch's blobs
    (once the files written ahead are: those are found equal, the others removed first)."""
    ahead.prune(planned)
    by_blob = {blob_id(data): data for data in newest.values()}
    meta = info.to_bytes()
    by_blob[blob_id(meta)] = meta

    def content(paths: list[str]) -> dict[str, bytes]:
        needed = [planned[p] for p in paths if planned[p] not in by_blob]
        found = {**repo.blobs(needed), **by_blob}
        return {p: found[planned[p]] for p in paths}

    with Tree(repo.root) as tree:
        return sync_tree(tree, planned, content)


def _finish_tree(
    repo: git.GitRepo,
    planned: dict[str, str] | None,
    info: StoreInfo,
    report: ExportReport,
    unwritten: bool,
    ahead: TreeAhead,
) -> None:
    """Check the working tree written against the branch's last commit (write it from the
    branch if it was not written, or differs), reset the index to that commit, and settle the
    files written ahead."""
    files = repo.tree_files()
    report.memories = len(files)
    meta = f"{META_DIR}/{STORE_FILE}"
    expected = {path: blob for path, blob in (planned or {}).items() if path != meta}
    if unwritten or planned is None or expected != files:
        if not unwritten and planned is not None:
            log.warning("the working tree planned differs from the last commit's: written again")
        ahead.prune(files)
        _check_out(repo, files, info, report)
    repo.reset_index()
    ahead.settle(report.tree)


class _Commits:
    """Turns versions, oldest first, into commits: the tree of each is the store's files right
    after that version (the memory's file written, moved or removed)."""

    def __init__(
        self,
        store_id: str,
        history: git.History,
        stream: git.FastImport,
        marks: dict[str, int],
        report: ExportReport,
        files: dict[str, str],
    ) -> None:
        self.store_id = store_id
        self.paths = dict(history.paths)  # memory id -> its path in the tree
        self.owners = {path: memory for memory, path in self.paths.items()}  # its inverse
        self.stream = stream
        self.marks = marks
        self.report = report
        self.first = history.head is None
        # memories met so far by a first run (whose creation the repository should show)
        self.met: set[str] | None = set() if self.first else None
        # the tree after the last commit rendered: file -> blob id (from the branch) or the id
        # of the version whose content it holds (``_VERSION`` + id)
        self.files = files
        self.dirs: Counter[str] = Counter(d for path in files for d in _parents(path))

    def write(self, versions: list[MemoryVersion], checkpoint: bool) -> None:
        """Render the commits of ``versions`` (the next ones, oldest first) and hand them to
        fast-import, then a checkpoint if asked."""
        self.stream.write_commits([self.render(version) for version in versions])
        if checkpoint:
            self.stream.checkpoint()

    def render(self, version: MemoryVersion) -> bytes:
        if self.met is not None and version.memory_id not in self.met:
            self.met.add(version.memory_id)
            if version.operation != "created":
                self.report.begun_before_history += 1
        old = self.paths.get(version.memory_id)
        changes: list[tuple[str, str, int | None]] = []
        notes: list[str] = []
        new: str | None = old
        if version.redacted:
            subject = f"{version.operation} {old or 'memory ' + version.memory_id} (redacted)"
            notes.append(
                "The content of this version was redacted on the server: it is not exported, "
                "and the file keeps what it held before."
            )
            if version.operation == "deleted":
                new = None
        elif version.operation == "deleted":
            subject = f"deleted {version.path or old}"
            new = None
        else:
            new = version.path
            subject = f"{version.operation} {new}"
            if old is not None and old != new:
                subject += f" (renamed from {old})"
        if new is not None and new != old:
            reason = unsafe(new) or self._clash(file_path(new), old)
            if reason is not None:
                notes.append(f"Not exported: {reason}.")
                self.report.skipped.append((new, reason))
                new = None
        if old is not None and old != new:
            changes.append(("D", file_path(old), None))
        if new is not None and not version.redacted and version.operation != "deleted":
            mark = self.marks.get(version.id)
            if mark is None:  # a version listed without content, though not redacted
                notes.append("The server gave no content for this version.")
            else:
                changes.append(("M", file_path(new), mark))
        if old is not None:
            del self.owners[old]
            del self.paths[version.memory_id]
        if new is not None:
            other = self.owners.get(new)
            if other is not None:  # a gap in the history: another memory's path, once
                del self.paths[other]
            self.paths[version.memory_id] = new
            self.owners[new] = version.memory_id
        if self.first:
            notes.append(
                "History starts here: versions the server no longer kept (it keeps them 30 "
                "days, each memory's newest longer) are not in this repository."
            )
            self.report.history_starts = format_time(version.created_at)
            self.first = False
        trailers = [
            f"{git.STORE}: {self.store_id}",
            f"{git.VERSION}: {version.id}",
            f"{git.MEMORY}: {version.memory_id}",
            f"{git.TIME}: {format_time(version.created_at)}",
        ]
        if new is not None:
            trailers.append(f"{git.PATH}: {new}")
        message = "\n\n".join([subject, *notes, "\n".join(trailers)]) + "\n"
        for op, path, _ in changes:
            if op == "D":
                if self.files.pop(path, None) is not None:
                    self.dirs.subtract(_parents(path))
            else:
                if path not in self.files:
                    self.dirs.update(_parents(path))
                self.files[path] = _VERSION + version.id
        return self.stream.render_commit(
            author=git.author(version.created_by),
            when=version.created_at,
            message=message,
            changes=changes,
        )

    def _clash(self, relative: str, old: str | None) -> str | None:
        """Why the file ``relative`` cannot be in the tree beside the others (the memory
        leaving ``old``): a file where it needs a directory, or a directory where it goes."""
        leaving = file_path(old) if old is not None else None
        for parent in _parents(relative):
            if parent in self.files and parent != leaving:
                return f"the memory /{parent} is a file where this path needs a directory"
        below = self.dirs[relative] - (leaving is not None and relative in _parents(leaving))
        if below > 0:
            return f"memories below /{relative}/ need a directory of this name"
        return None


def _parents(relative: str) -> list[str]:
    """The directories above a file: ``a/b/c`` -> ``a``, ``a/b``."""
    parts = relative.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def _check_out(
    repo: git.GitRepo, files: dict[str, str], info: StoreInfo, report: ExportReport
) -> None:
    """The working tree as the branch's last commit ``files`` (and ``.memfs/store.json``)."""
    meta = {f"{META_DIR}/{STORE_FILE}": info.to_bytes()}
    wanted = {**files, **{path: blob_id(data) for path, data in meta.items()}}

    def content(paths: list[str]) -> dict[str, bytes]:
        blobs = repo.blobs(files[p] for p in paths if p in files)
        return {p: meta[p] if p in meta else blobs[files[p]] for p in paths}

    with Tree(repo.root) as tree:
        report.tree = sync_tree(tree, wanted, content)
