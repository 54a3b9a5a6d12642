"""The working tree of ``memfs export --git`` written ahead, while the versions are listed.

Versions are listed newest first, so the first version the listing brings of a memory is, in
most cases, what its file will hold once every commit is made: ``TreeAhead`` creates that file
at once, in a thread of its own, and the file-creation cost (tens of microseconds a file on a
quiet disk, up to a millisecond on a file system without a journal that has freed many inodes
recently) is paid while the server answers, not after the commits.

What it writes is only a head start, never the truth: before the working tree is made equal to
the last commit's (``sync_tree``, which finds these files equal and leaves them), ``prune``
removes every file written ahead that the last commit does not hold as written (a path the
commits refused, a clash resolved otherwise), and ``settle`` any left once it is. So that
nothing the user has is ever touched, a file is written ahead only where nothing is yet
(``Tree.create``: ``O_EXCL``, no link followed), and removed only while it still holds the
bytes written here.

Invariant: ``created`` names exactly the files this run created ahead and has not removed
(path -> blob id); after ``settle`` (or ``abandon``) it names none left as strays.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from memfs.transfer.export_tree import (
    AHEAD_LOG,
    SyncReport,
    Tree,
    ahead_log_lines,
    blob_id,
)


class TreeAhead:
    """Files created in ``root`` by one worker thread, in the order they are given."""

    def __init__(self, root: Path) -> None:
        self._tree = Tree(root)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="memfs-export-ahead")
        self._pending: list[Future[None]] = []
        self.created: dict[str, str] = {}  # path -> blob id (see the module's invariant)
        # an AHEAD_LOG of a killed run, for the next sync to read: never removed here
        self._log_was_there = self._tree.exists(AHEAD_LOG)

    def submit(self, files: list[tuple[str, bytes]]) -> None:
        """Create these files (path relative to root, bytes) where nothing is yet; returns at
        once."""
        if files:
            self._pending.append(self._pool.submit(self._create, files))

    def _create(self, files: list[tuple[str, bytes]]) -> None:
        # only where nothing is; named in AHEAD_LOG before any is created, so that the next
        # sync knows them as ours even if this process is killed now (no log: none created)
        new: dict[str, bytes] = {}
        for path, data in files:  # newest first: a path's first claim is its file's
            if path not in new and path not in self.created and not self._tree.exists(path):
                new[path] = data
        if not new:
            return
        blobs = {path: blob_id(data) for path, data in new.items()}
        try:
            self._tree.append(AHEAD_LOG, ahead_log_lines(blobs))
        except OSError:  # .memfs is not ours to write (a link planted there...): no head start
            return
        for path, data in new.items():
            if self._tree.create(path, data):
                self.created[path] = blobs[path]

    def finish(self) -> None:
        """Wait for every file submitted (blocking: call from a thread)."""
        for future in self._pending:
            with contextlib.suppress(OSError):
                future.result()
        self._pending.clear()

    def prune(self, wanted: Mapping[str, str]) -> None:
        """Before the working tree becomes ``wanted`` (path -> blob id), remove the files created
        ahead that it does not hold as written: none is in its way."""
        self.finish()
        self._remove_created(lambda path, blob: wanted.get(path) != blob)

    def settle(self, tree: SyncReport) -> None:
        """After the working tree was made the last commit's (``tree``: that sync's report,
        its ``files`` the manifest): count the files created ahead that it kept as written
        (the sync found them equal), and remove those it does not hold."""
        self.finish()
        for path, blob in list(self.created.items()):
            if tree.files.get(path) == blob:
                if tree.unchanged > 0:  # else someone rewrote it meanwhile: counted written
                    tree.written += 1
                    tree.unchanged -= 1
                del self.created[path]
        self._remove_created()

    def abandon(self) -> None:
        """The export failed: remove every file created ahead (those still as written), and
        the AHEAD_LOG this run began if none is left for it to name."""
        self.finish()
        if self._remove_created() == 0 and not self._log_was_there:
            with contextlib.suppress(OSError):
                self._tree.remove(AHEAD_LOG)

    def _remove_created(self, which: Callable[[str, str], bool] = lambda path, blob: True) -> int:
        """Remove the files created ahead that ``which`` picks, if still as written; how many
        of those were left (changed since)."""
        left = 0
        for path, blob in list(self.created.items()):
            if not which(path, blob):
                continue
            try:
                data = self._tree.read(path)
                if data is not None and blob_id(data) == blob:
                    self._tree.remove(path)
                elif data is not None:
                    left += 1
            except OSError:
                left += 1
            del self.created[path]
        return left

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._tree.close()
