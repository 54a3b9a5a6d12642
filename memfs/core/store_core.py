"""The one door of the filesystem core: what a mount (or a sync) may ask of the core of one store.

``StoreCore`` is everything ``memfs.mount`` and ``memfs.sync`` use, in three roles:
``StoreFiles``, the file operations (one method each, in the store's inode and handle numbers;
answers are attributes and listed entries, never the core's mutable nodes), the store's
read-only trees (``versions``, ``search``) and its extended attributes (``descriptions``);
``FeedPort``, what the change feed calls (``apply_changes`` and its companions); and
``Lifecycle``, the calls a daemon makes around them: ``start`` (the background tasks, in a
nursery), ``load_journal`` (before mounting), ``snapshot`` (``memfs status``),
``save_open_files``, ``flush_all``, ``hand_over`` and ``final_report`` (unmount).
``memfs.core.build.build_core`` makes a core (a ``memfs.core.ops.vfs.Vfs``, which has this
shape); the parts it is made of (the write-back queue, the caches, the journal...) stay the
core's own: the mount never reaches into them, and mypy holds it to that, since the mount only
knows this protocol.

``CoreStatus`` and ``CoreReport`` (``memfs.core.ops.reports``) are what a core says about itself,
taken whole at one moment (no ``await`` while they are collected: see the concurrency rule in
``memfs.core``). The types and helpers of the behaviour floor that a mount names
(``Descriptions``, ``ConflictInfo``, ``Invalidation``, ``decode_name``) are reached through this
module too: the mount imports nothing else of ``memfs.core.ops`` (an import-linter contract).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import trio

from memfs.contract.models import MemoryVersion
from memfs.contract.node_attr import NodeAttr
from memfs.contract.store_api import StoreAPI
from memfs.core.model.attrs import Attr
from memfs.core.model.attrs import FileFacts as FileFacts
from memfs.core.ops.descriptions import Descriptions as Descriptions
from memfs.core.ops.durable import ConflictInfo as ConflictInfo
from memfs.core.ops.namespace import Invalidation as Invalidation
from memfs.core.ops.namespace import Invalidator
from memfs.core.ops.namespace import decode_name as decode_name
from memfs.core.ops.reports import CoreReport as CoreReport
from memfs.core.ops.reports import CoreStatus as CoreStatus
from memfs.search.tree import SearchTree
from memfs.versions.tree import VersionsTree


class Listed(Protocol):
    """One entry of a listing taken at ``opendir``, replied when the kernel reads it."""

    name: bytes

    async def attr(self) -> NodeAttr | None:
        """Its attributes now; None when it is gone since and is left out."""
        ...

    def remember(self) -> None:
        """The kernel took it (every entry of a readdirplus counts as a lookup)."""
        ...


class ListedFile(Listed, Protocol):
    """An entry of a store's directory (never gone: it holds its node), and what a sync needs
    besides ``stat`` (``FileFacts``)."""

    async def attr(self) -> Attr: ...

    def facts(self) -> FileFacts: ...


class StoreFiles(Protocol):
    """The file operations of one store's core, in its numbers (module docstring)."""

    store_id: str
    versions: VersionsTree  # the read-only ``.versions/`` tree
    search: SearchTree  # the read-only ``.search/`` tree
    descriptions: Descriptions  # ``user.description``, where the store keeps descriptions

    @property
    def read_only(self) -> bool: ...

    @property
    def root_ino(self) -> int: ...

    async def lookup(self, parent_ino: int, name: str) -> Attr: ...

    async def getattr(self, ino: int) -> Attr: ...

    def refusal(self, ino: int) -> str | None:
        """Why the file's content is not uploaded (not UTF-8, too large...), or None."""
        ...

    def parent_ino(self, ino: int) -> int:
        """The directory holding ``ino`` (its ``..``); the root's is the root."""
        ...

    def forget(self, ino: int, count: int) -> None: ...

    async def setattr(
        self,
        ino: int,
        *,
        size: int | None = None,
        atime: float | None = None,
        mtime: float | None = None,
        fh: int | None = None,
        mode: int | None = None,
        uid: int | None = None,
        gid: int | None = None,
        atime_ns: int | None = None,
        mtime_ns: int | None = None,
    ) -> Attr: ...

    async def open(self, ino: int, flags: int) -> tuple[int, bool]: ...

    async def create(
        self,
        parent_ino: int,
        name: str,
        flags: int,
        *,
        mode: int | None = None,
        owner: tuple[int, int] | None = None,
    ) -> tuple[int, Attr]: ...

    async def mknod(
        self, parent_ino: int, name: str, *, mode: int | None, owner: tuple[int, int] | None
    ) -> Attr: ...

    async def read(self, fh: int, offset: int, size: int) -> bytes: ...

    async def write(self, fh: int, offset: int, buf: bytes) -> int: ...

    async def flush(self, fh: int) -> None: ...

    async def fsync(self, fh: int) -> None: ...

    async def fsync_dir(self) -> None: ...

    async def release(self, fh: int) -> None: ...

    async def unlink(self, parent_ino: int, name: str) -> None: ...

    async def mkdir(
        self,
        parent_ino: int,
        name: str,
        *,
        mode: int | None = None,
        owner: tuple[int, int] | None = None,
    ) -> Attr: ...

    async def rmdir(self, parent_ino: int, name: str) -> None: ...

    async def symlink(self, parent_ino: int, name: str, target: bytes) -> Attr: ...

    def refuse_special(self, what: str) -> None: ...

    async def readlink(self, ino: int) -> bytes: ...

    async def rename(
        self, old_parent: int, old_name: str, new_parent: int, new_name: str, flags: int = 0
    ) -> None: ...

    async def listing(self, ino: int) -> Sequence[ListedFile]:
        """The entries of a directory, sorted by name (no lookup counted)."""
        ...

    async def statfs(self) -> dict[str, int]: ...


class FeedPort(Protocol):
    """What the change feed of one store calls (``memfs.mount.changefeed``)."""

    store: StoreAPI  # the change feed reads the store's changes through it (short deadlines)
    store_id: str
    invalidator: Invalidator | None  # runs the kernel invalidations the core queues
    last_activity: float  # monotonic time of the last kernel request (the feed's pace)

    def set_activity_hook(self, hook: Callable[[], None]) -> None: ...

    def feed_starts(self) -> None: ...

    def vouch_listings(self, until: float) -> None: ...

    def withdraw_listings(self) -> None: ...

    async def apply_changes(self, versions: list[MemoryVersion], *, complete: bool) -> int: ...

    async def feed_failed(self, error: Exception) -> bool: ...

    @property
    def gone_since(self) -> str | None: ...

    async def invalidations_due(self) -> None: ...

    async def run_invalidations(self) -> None: ...


class Lifecycle(Protocol):
    """The calls a daemon (or a sync) makes around the file operations: start, journal,
    status, the end."""

    async def start(self, nursery: trio.Nursery) -> None: ...

    def load_journal(self) -> int: ...

    @property
    def pending_uploads(self) -> int: ...

    @property
    def upload_requests(self) -> int: ...

    @property
    def local_bytes(self) -> int: ...

    def retry_waiting_for_room(self) -> None: ...

    def save_open_files(self) -> int: ...

    async def fetch_everything(self, *, in_flight: int = 8) -> None: ...

    def save_conflict(self, path: str, data: bytes) -> None: ...

    async def flush_all(self, *, patience: float = 0.0) -> list[BaseException]: ...

    def hand_over(self) -> tuple[Path, list[str]] | None: ...

    def snapshot(self, *, conflicts: int) -> CoreStatus: ...

    def final_report(self) -> CoreReport: ...


class StoreCore(StoreFiles, FeedPort, Lifecycle, Protocol):
    """The core of one store, as a mount sees it: its three roles (module docstring)."""
