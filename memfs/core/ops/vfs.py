"""POSIX semantics on a memory store: the file operations of a mount, one method each.

Owns the meaning of every file operation (lookup, getattr, setattr, open, create, mknod, read,
write, flush, fsync, fsync_dir, release, unlink, mkdir, rmdir, symlink, readlink, rename,
readdir, statfs) in terms of the store, and asks its collaborators (made by
``memfs.core.build``) for the rest: ``namespace`` (what a directory shows, names), ``identity``
(which memory a file is bound to: deferred deletes and adoption, ``docs/editors.md`` §4),
``rename``, ``truncate`` (a new size, judged at once), ``copies`` (local copies of files),
``commit`` (validation, refusals, queueing an upload), ``handles`` (open files), ``attrs``,
``uploader`` (what the write-back queue runs) and ``remote`` (the change feed's versions).
The state they share is ``memfs.core.model.state``'s. It raises ``memfs.contract.errors`` exceptions
only.

It must not import pyfuse3 or decide errnos (``fuse_ops`` does both), and it must never keep
dirty data anywhere but on the inode (``Node.data``). Kernel cache invalidations are handed to
an ``invalidator`` callback, which the daemon runs from a worker thread.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from memfs.contract import paths
from memfs.contract.errors import (
    DirectoryNotEmptyError,
    ExistsError,
    FileTooLargeError,
    InvalidArgumentError,
    IsDirectoryError,
    NameTooLongError,
    NoEntryError,
    NotDirectoryError,
    NotFoundError,
    NotPermittedError,
    NotUtf8Error,
    ReadOnlyError,
)
from memfs.core.fetch.usage import statfs_fields
from memfs.core.model.attrs import (
    Attr,
    FileFacts,
    facts,
    set_mode_and_owner,
    set_new_owner,
    set_times,
)
from memfs.core.model.budget import NODE_BYTES
from memfs.core.model.config import VfsConfig as VfsConfig  # the public import path of the options
from memfs.core.model.inodes import InodeTable, Kind, Node
from memfs.core.ops.feed_door import ChangeFeedDoor
from memfs.core.ops.lifecycle_door import LifecycleDoor
from memfs.core.ops.namespace import Invalidator, check_store_path
from memfs.core.ops.parts import CoreParts
from memfs.core.ops.refusals import TOO_LARGE
from memfs.core.ops.rename import NamesChanged

log = logging.getLogger(__name__)

RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
RENAME_TRIES = 3  # a file rename looks its names up again when they changed elsewhere meanwhile


@dataclass(eq=False, slots=True)
class ListedNode:
    """An entry of ``Vfs.listing``: it holds its node (the kernel reads the entry later, maybe
    after the node left the table) and hands out only what the node says."""

    name: bytes
    node: Node
    vfs: Vfs

    async def attr(self) -> Attr:
        return self.vfs.attr(self.node)  # as it is when the kernel reads the entry

    def remember(self) -> None:
        self.vfs.remember(self.node)

    def facts(self) -> FileFacts:
        return facts(self.node)


class Vfs(ChangeFeedDoor, LifecycleDoor):
    """The filesystem core of one store: the file operations, and the calls of the mount's
    door (``memfs.core.store_core.StoreCore``). See the module docstring; made by
    ``memfs.core.build.build_core``.

    Its public attributes are the door's. ``parts`` (the ``CoreParts`` it is made of) is the one
    way to a part, for the core's own tests and its reports; the door has no ``parts``, so a
    mount or a sync never reaches one. The file operations hold private references to them."""

    def __init__(self, parts: CoreParts, *, invalidator: Invalidator | None = None) -> None:
        self.parts = parts
        self._state = parts.state
        self._table: InodeTable = parts.state.table
        self.store = parts.store
        self.store_id = parts.store.store_id
        self._listings = parts.listings
        self._bulk = parts.bulk
        self._usage = parts.usage
        self._gone = parts.gone
        self.versions = parts.versions
        self.search = parts.search
        self._writeback = parts.writeback
        self._durable = parts.durable
        self._namespace = parts.namespace
        self._remote = parts.remote
        self._identities = parts.identities
        self._copies = parts.copies
        self._commits = parts.commits
        self._files = parts.files
        self._budget = parts.budget
        self._attrs = parts.attrs
        self._uploader = parts.uploader
        self._renames = parts.renames
        self._truncates = parts.truncates
        self.descriptions = parts.descriptions
        self.invalidator = invalidator  # runs kernel invalidations (the daemon: worker thread)
        self.last_activity = 0.0  # monotonic time of the last kernel request (change feed pace)
        self._on_activity: Callable[[], None] | None = None

    @property
    def read_only(self) -> bool:
        return self._state.read_only

    @property
    def root_ino(self) -> int:
        return self._table.root_ino

    @property
    def waiting_for_room(self) -> set[Hashable]:
        return self._state.waiting_for_room

    # =========================================================================================
    # helpers

    def _check_writable(self) -> None:
        if self._state.read_only:
            raise ReadOnlyError("read-only mount")
        if self._gone.gone:
            raise self._gone.error()

    def _node(self, ino: int) -> Node:
        node = self._table.get(ino)
        if node is None:
            raise NoEntryError(f"no inode {ino}")
        return node

    def _dir_path(self, ino: int) -> str:
        node = self._node(ino)
        if not node.is_dir:
            raise NotDirectoryError("not a directory")
        if node.path is None:
            raise NoEntryError("directory was removed")
        return node.path

    async def _child(self, parent_ino: int, name: str) -> Node:
        directory = self._dir_path(parent_ino)
        node = await self._namespace.child(directory, name)
        if node is None:
            if len(name.encode("utf-8")) > paths.MAX_NAME_BYTES:  # found only if it is an entry
                raise NameTooLongError(f"name longer than {paths.MAX_NAME_BYTES} bytes")
            raise NoEntryError(f"{paths.join(directory, name)} does not exist")
        return node

    def _touch_dir(self, directory: str) -> None:
        node = self._table.by_path.get(directory)
        if node is not None:
            node.mtime = time.time()
            node.ctime = node.mtime

    def _active(self) -> None:
        now = self._state.now()
        idle = now - self.last_activity
        self.last_activity = now
        if idle > 1.0 and self._on_activity is not None:
            self._on_activity()  # the change feed speeds up (and polls now after an idle time)

    def attr(self, node: Node) -> Attr:
        return self._attrs.of(node)

    # =========================================================================================
    # the file operations

    async def lookup(self, parent_ino: int, name: str) -> Attr:
        self._active()
        if name in (".", ".."):
            node = self.parent_of(parent_ino) if name == ".." else self._node(parent_ino)
        else:
            node = await self._child(parent_ino, name)
        self._table.remember(node)
        return self.attr(node)

    async def getattr(self, ino: int) -> Attr:
        return self.attr(self._node(ino))

    def refusal(self, ino: int) -> str | None:
        return self._commits.refusals.why(ino)

    def parent_of(self, ino: int) -> Node:
        """The directory holding ``ino`` (its ``..``); the root's is the root."""
        node = self._node(ino)
        if node.path in (None, "/"):
            return node
        return self._table.by_path.get(paths.parent(node.path or "/"), node)

    def parent_ino(self, ino: int) -> int:
        return self.parent_of(ino).ino

    def forget(self, ino: int, count: int) -> None:
        self._table.forget(ino, count)

    def remember(self, node: Node) -> None:
        """The kernel took a reference on ``node`` without a lookup (readdirplus)."""
        self._table.remember(node)

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
    ) -> Attr:
        node = self._node(ino)
        if atime_ns is not None:
            atime = atime_ns / 1e9
        if mtime_ns is not None:
            mtime = mtime_ns / 1e9
        if mode is not None or uid is not None or gid is not None:
            self._check_writable()
        if size is not None:
            if node.is_dir:
                raise IsDirectoryError("is a directory")
            self._check_writable()
            await self._truncates.set_size(node, size)
        # kept locally, never uploaded (after the size: a failing call changes nothing); the
        # kernel checked who may (default_permissions)
        set_mode_and_owner(node, mode, (uid, gid))
        if atime is not None or mtime is not None:
            if self._state.read_only:
                raise ReadOnlyError("read-only mount")
            set_times(node, atime, atime_ns, mtime, mtime_ns)
        return self.attr(node)

    async def open(self, ino: int, flags: int) -> tuple[int, bool]:
        """Open a file; returns (fh, keep_cache)."""
        self._active()
        node = self._node(ino)
        if node.is_dir:
            raise IsDirectoryError("is a directory")
        writable = (flags & os.O_ACCMODE) != os.O_RDONLY
        if writable or flags & os.O_TRUNC:
            self._check_writable()
        snapshot: bytes | None = None
        truncated = False
        if flags & os.O_TRUNC:
            truncated = self._truncates.at_open(node)
        elif writable:
            await self._copies.ensure_data(node)
        elif node.kind is Kind.FILE and node.data is None and node.kept_size is None:
            # (a local copy is read where it is: a copy per open would let a reader holding
            # many opens of one file grow the daemon)
            snapshot = await self._copies.content_for_read(node)
        handle = self._files.new(node, flags)
        handle.snapshot = snapshot
        handle.changed = truncated
        sha = node.base_sha if not node.dirty else None
        keep_cache = sha is not None and node.last_open_sha == sha
        node.last_open_sha = sha
        return handle.fh, keep_cache

    async def create(
        self,
        parent_ino: int,
        name: str,
        flags: int,
        *,
        mode: int | None = None,
        owner: tuple[int, int] | None = None,
    ) -> tuple[int, Attr]:
        """open(O_CREAT): a new empty file with ``mode`` (the kernel applied the umask) and
        ``owner`` (the creator's uid, gid), or the existing one opened."""
        directory = self._dir_path(parent_ino)
        self._check_writable()
        existing = await self._namespace.child(directory, name)
        if existing is not None:
            if flags & os.O_EXCL:
                raise ExistsError(f"{paths.join(directory, name)} exists")
            if existing.is_dir:
                raise IsDirectoryError("is a directory")
            try:
                fh, _ = await self.open(existing.ino, flags)
            except (NoEntryError, NotFoundError):
                if existing.path is not None:
                    raise
                # deleted elsewhere while its content loaded: O_CREAT makes it anew
                return await self.create(parent_ino, name, flags, mode=mode, owner=owner)
            self._table.remember(existing)
            return fh, self.attr(existing)
        node = await self._new_file(directory, name, mode, owner)
        handle = self._files.new(node, flags)
        handle.changed = True
        self._table.remember(node)
        return handle.fh, self.attr(node)

    async def mknod(
        self, parent_ino: int, name: str, *, mode: int | None, owner: tuple[int, int] | None
    ) -> Attr:
        """mknod(S_IFREG): an empty regular file, as open(O_CREAT) and close make one."""
        directory = self._dir_path(parent_ino)
        self._check_writable()
        if await self._namespace.child(directory, name) is not None:
            raise ExistsError(f"{paths.join(directory, name)} exists")
        node = await self._new_file(directory, name, mode, owner)
        self._commits.commit(node)
        self._table.remember(node)
        return self.attr(node)

    async def _new_file(
        self, directory: str, name: str, mode: int | None, owner: tuple[int, int] | None
    ) -> Node:
        entry_there = self._identities.adoptable(paths.join(directory, name)) is not None
        path, local_only = self._namespace.file_path(directory, name, entry_there=entry_there)
        # a name only this mount will have: local-only, or a new file that will wait for a
        # store known to be full or away (``Uploader.queued``)
        waits = self._state.store_full or self._state.store_away
        self._budget.check_create(NODE_BYTES if local_only or waits else 0)
        node = self._table.new(Kind.FILE, path)
        node.data = bytearray()
        node.local_only = local_only
        node.held_back = waits and not local_only  # charged from now on, name and content
        set_new_owner(node, mode, owner, self._attrs.of_path(directory))
        node.changed_here()
        self._budget.charge(node)
        self._state.removed_dirs.pop(directory, None)
        if not node.local_only:
            adopted = await self._identities.adopt(node, path)
            if entry_there and not adopted and not paths.is_valid_path(path):
                self._table.unbind(node)  # the entry changed meanwhile: a new path outside rules
                check_store_path(path)
        # the cached listing stays: a new local node is merged into it (``Namespace.children``)
        self._touch_dir(directory)
        return node

    async def read(self, fh: int, offset: int, size: int) -> bytes:
        handle = self._files.get(fh)
        node = handle.node
        if node.data is not None:
            return bytes(node.data[offset : offset + size])
        if node.kept_size is not None:  # refused content of a closed file: in its kept copy
            return self._commits.refusals.read(node, offset, size)
        if handle.snapshot is None:
            handle.snapshot = await self._copies.content_for_read(node)
        return handle.snapshot[offset : offset + size]

    async def write(self, fh: int, offset: int, buf: bytes) -> int:
        handle = self._files.get(fh)
        self._check_writable()
        node = handle.node
        data = await self._copies.ensure_data(node)
        if handle.flags & os.O_APPEND:
            offset = len(data)
        end = offset + len(buf)
        if end <= self._state.max_content_bytes:
            self._budget.check_growth(node, end - len(data))
        if end > self._state.max_content_bytes:
            if handle.changed and self._commits.committed(node):
                # what this open left is a part of what the program meant: never uploaded
                handle.refused = True
                self._commits.refuse(node, TOO_LARGE)
            else:
                log.info("a write to %s over the limit was refused; nothing changed", node.path)
            raise self._commits.too_large()
        if offset > len(data):
            data.extend(b"\0" * (offset - len(data)))
        data[offset:end] = buf
        handle.wrote = handle.changed = True
        node.changed_here()
        self._budget.charge(node)
        if handle.refused and node.refused == TOO_LARGE:
            node.refused_gen = node.gen  # still the refused writer's content
        return len(buf)

    async def flush(self, fh: int) -> None:
        handle = self._files.get(fh)
        node = handle.node
        if handle.wrote or (handle.writable and (node.dirty or node.refused is not None)):
            # a refused content: every open for writing hears it (close never returns 0 for
            # content not on the server); an open that saved valid content ended the refusal
            self._commits.commit(node)
        if handle.writable:  # an error is the writer's, never a read-only open's
            self._files.report(handle)
            # journaled, never uploaded (memfs.core.fetch.orphans)
            if node.dirty and self._gone.gone:
                raise self._gone.error()

    async def fsync(self, fh: int) -> None:
        handle = self._files.get(fh)
        node = handle.node
        if not handle.writable:  # waits for the upload; its errors are the writer's
            try:
                await self._uploader.settle(node.ino)
            except Exception as exc:
                log.debug("fsync of a read-only open of %s: %s (not reported)", node.path, exc)
            return
        if node.dirty or node.refused is not None:
            self._commits.commit(node)  # a refused content: fsync says so (it is not on the server)
        self._files.report(handle)
        try:
            await self._uploader.settle(node.ino)
        except Exception as exc:
            handle.heard = exc  # a failure hook that runs after this has nothing new to say
            if handle.error is not None:
                self._files.report(handle)  # the same failure, in the words of Uploader.failed
            raise
        self._files.report(handle)

    async def fsync_dir(self) -> None:
        """Upload all pending: ENOSPC while a create waits for room, ESTALE on a lost race."""
        await self._uploader.settle_all()

    async def release(self, fh: int) -> None:
        handle = self._files.pop(fh)
        if handle is None:
            return
        node = handle.node
        node.open_count -= 1
        if handle.wrote and node.dirty:
            # a refusal was reported by flush already; the content stays local
            with contextlib.suppress(NotUtf8Error, FileTooLargeError, InvalidArgumentError):
                self._commits.commit(node)
        if node.open_count == 0:
            self._commits.closed(node)
            self._commits.refusals.spill(node)  # refused content: its kept copy holds it now
            self._copies.drop_unreachable(node)
        # no longer open: what waits for its upload counts only if the store could not take it
        self._budget.charge(node)
        self._copies.drop_clean_data(node)
        deferred = None
        if node.open_count == 0:
            deferred = self._state.deferred_versions.pop(node.ino, None)
        if deferred and self._namespace.settled(node):
            self.apply_versions(deferred)
        self._table.maybe_drop(node)

    async def unlink(self, parent_ino: int, name: str) -> None:
        directory = self._dir_path(parent_ino)
        node = await self._child(parent_ino, name)
        if node.is_dir:
            raise IsDirectoryError("is a directory")
        self._check_writable()
        path = paths.join(directory, name)
        if node.memory_id is not None:
            if node.open_count > 0:
                await self._copies.ensure_data(node)  # its readers keep it
                if node.path != path:  # the change feed moved it meanwhile: not ours to delete
                    raise NoEntryError(f"{path} was renamed elsewhere meanwhile")
            self._identities.detach_memory(node, path)
        self._writeback.cancel(node.ino)
        node.dirty = False
        if node.open_count == 0:
            node.data, node.kept_size = None, None  # nobody can read it again
        self._commits.end_refusal(node)  # its kept copy goes with it
        self._table.unbind(node)
        self._budget.charge(node)
        self._namespace.keep_parent(path)
        # the cached listing stays: its item is skipped while the delete is pending, then
        # removed when the server has deleted it (``Uploader._run_delete``)
        self._touch_dir(directory)

    async def mkdir(
        self,
        parent_ino: int,
        name: str,
        *,
        mode: int | None = None,
        owner: tuple[int, int] | None = None,
    ) -> Attr:
        directory = self._dir_path(parent_ino)
        self._check_writable()
        if await self._namespace.child(directory, name) is not None:
            raise ExistsError(f"{paths.join(directory, name)} exists")
        path = self._namespace.new_path(directory, name)
        self._budget.check_create(NODE_BYTES)
        node = self._table.new(Kind.DIR, path)
        node.subdirs_known = True  # empty
        set_new_owner(node, mode, owner, self._attrs.of_path(directory))
        node.mtime = time.time()
        self._state.local_dirs.add(path)
        self._state.removed_dirs.pop(path, None)
        self._namespace.drop_listing(directory)
        self._touch_dir(directory)
        self._budget.made_dir(node)
        self._table.remember(node)
        return self.attr(node)

    async def rmdir(self, parent_ino: int, name: str) -> None:
        directory = self._dir_path(parent_ino)
        node = await self._child(parent_ino, name)
        if not node.is_dir:
            raise NotDirectoryError("not a directory")
        self._check_writable()
        path = paths.join(directory, name)
        self._listings.drop(path)
        if await self._namespace.children(path):
            raise DirectoryNotEmptyError(f"{path} is not empty")
        self._state.local_dirs.discard(path)
        self._state.removed_dirs[path] = self._state.now()
        self._table.unbind(node)
        self._budget.charge(node)
        self._namespace.keep_parent(path)
        self._namespace.drop_listing(directory)
        self._touch_dir(directory)

    async def symlink(self, parent_ino: int, name: str, target: bytes) -> Attr:
        directory = self._dir_path(parent_ino)
        self._check_writable()
        path = self._namespace.new_path(directory, name)
        if not self._state.is_local_path(path):
            raise NotPermittedError("symbolic links are only allowed for local-only names")
        if await self._namespace.child(directory, name) is not None:
            raise ExistsError(f"{path} exists")
        self._budget.check_create(NODE_BYTES + len(target))
        node = self._table.new(Kind.SYMLINK, path)
        node.local_only = True
        node.target = target
        self._budget.charge(node)
        self._namespace.drop_listing(directory)
        self._table.remember(node)
        return self.attr(node)

    def refuse_special(self, what: str) -> None:
        """Hard links and special files: EPERM (EROFS first on a read-only mount)."""
        self._check_writable()
        raise NotPermittedError(f"{what} are not supported")

    async def readlink(self, ino: int) -> bytes:
        node = self._node(ino)
        if node.kind is not Kind.SYMLINK:
            raise InvalidArgumentError("not a symbolic link")
        return node.target

    async def rename(
        self, old_parent: int, old_name: str, new_parent: int, new_name: str, flags: int = 0
    ) -> None:
        if flags & RENAME_EXCHANGE:
            raise InvalidArgumentError("RENAME_EXCHANGE is not supported")
        for attempt in range(1, RENAME_TRIES + 1):
            try:
                await self._rename(old_parent, old_name, new_parent, new_name, flags)
                return
            except NamesChanged as exc:
                if attempt == RENAME_TRIES:
                    raise NoEntryError(f"{exc}; nothing was renamed") from None

    async def _rename(
        self, old_parent: int, old_name: str, new_parent: int, new_name: str, flags: int
    ) -> None:
        old_dir = self._dir_path(old_parent)
        new_dir = self._dir_path(new_parent)
        src = await self._child(old_parent, old_name)
        dst = await self._namespace.child(new_dir, new_name)
        if flags & RENAME_NOREPLACE and dst is not None:
            raise ExistsError(f"{paths.join(new_dir, new_name)} exists")
        self._check_writable()
        old_path = paths.join(old_dir, old_name)
        if not await self._renames.rename(src, dst, old_path, new_dir, new_name):
            return  # the same file under both names: nothing to do
        # cached listings stay (a directory's rename clears them all): a moved file is
        # unsettled until its upload, whose answer patches them (``Uploader.sync``)
        self._touch_dir(old_dir)
        self._touch_dir(new_dir)

    async def readdir(self, ino: int) -> list[tuple[str, Node]]:
        self._active()
        directory = self._dir_path(ino)
        self._bulk.listed(directory)  # reads of its files may follow (grep -r): fetch in bulk
        entries = await self._namespace.children(directory)
        return sorted(entries.items())

    async def listing(self, ino: int) -> list[ListedNode]:
        """``readdir`` as entries that never hand their node out (the door's)."""
        return [
            ListedNode(name.encode("utf-8"), node, self) for name, node in await self.readdir(ino)
        ]

    async def statfs(self) -> dict[str, int]:
        count, used = await self._usage.figures()
        # no room while read-only or the local budget is full: df agrees with ENOSPC
        room = not (self._state.read_only or self._budget.full)
        return statfs_fields(
            count, used, self._state.max_memories, self._state.max_content_bytes, room=room
        )
