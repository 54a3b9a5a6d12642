"""POSIX semantics on a memory store: the filesystem core of a mount.

Owns the meaning of every file operation (lookup, readdir, open/read/write, create, rename,
unlink, mkdir/rmdir, setattr, fsync, statfs) in terms of the store: directories from memory
paths, local copies of files being written, the rename rules that keep a memory's identity
(``docs/editors.md`` §4), deferred deletes, local-only names, and the upload of each
inode (``sync``) that the write-back queue runs. It raises ``memfs.errors`` exceptions only.

It must not import pyfuse3 or decide errnos (``fuse_ops`` does both), and it must never keep
dirty data anywhere but on the inode (``Node.data``). Kernel cache invalidations are handed to
an ``invalidator`` callback, which the daemon runs from a worker thread.

Invariants (besides those of ``inodes``):
- a node is *settled* when it stands for a memory, has no local change and nothing queued; only
  settled nodes follow remote listings and the change feed;
- a memory id is held by at most one of: a node (``table.by_id``), a pending delete;
- a pending delete is adoptable (rule 3) until its grace window ends or its delete runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from datetime import datetime

import trio

from memfs import paths
from memfs.api.retry import is_transient
from memfs.core.cache import (
    DEFAULT_CONTENT_BYTES,
    ContentCache,
    Listing,
    ListingCache,
    listing_name,
)
from memfs.core.clashes import Clashes, base_name, derived_name
from memfs.core.durable import Durable
from memfs.core.inodes import InodeTable, Kind, Node
from memfs.core.localfiles import LocalNames
from memfs.core.orphans import StoreGone
from memfs.core.prefetch import DEFAULT_LOOKAHEAD, BulkFetcher
from memfs.core.refusals import NOT_UTF8, TOO_LARGE
from memfs.core.usage import StoreUsage
from memfs.errors import (
    DirectoryNotEmptyError,
    ExistsError,
    FileTooLargeError,
    InvalidArgumentError,
    InvalidNameError,
    IsDirectoryError,
    NameTooLongError,
    NoEntryError,
    NoSpaceError,
    NotDirectoryError,
    NotFoundError,
    NotPermittedError,
    NotUtf8Error,
    PathConflictError,
    PreconditionFailedError,
    ReadOnlyError,
    RemoteConflictError,
    RemoteUnavailableError,
    StoreArchivedError,
    StoreFullError,
)
from memfs.models import ListItem, Memory, MemoryPrefix, MemoryVersion, sha256_hex
from memfs.store_api import StoreAPI, list_directory
from memfs.versions.tree import VersionsConfig, VersionsTree
from memfs.writeback.queue import WriteBack

log = logging.getLogger(__name__)

# a store API without a count limit: statfs shows this many files (statfs needs a number)
UNLIMITED_MEMORIES = 1_000_000
RESERVED_ROOT_NAMES = frozenset({".versions"})
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
BLOCK_SIZE = 4096
# Past this many changes to one directory in one feed batch, its cached listing is dropped (one
# re-listing, N/100 requests) rather than patched (each patch copies the listing: O(N) each).
PATCH_LIMIT = 100


@dataclass(frozen=True)
class VfsConfig:
    read_only: bool = False
    grace: float = 2.0  # deferred delete / move window (rule 3)
    update_delay: float = 0.5  # upload of an existing memory after a save
    new_file_delay: float = 1.0  # a new file must be closed and left alone this long
    listing_ttl: float = 1.0  # without a change feed vouching for listings (memfs.core.cache)
    cache_bytes: int = DEFAULT_CONTENT_BYTES  # clean content cache bound
    walk_lookahead: int = DEFAULT_LOOKAHEAD  # directories fetched ahead of grep -r (prefetch)
    fsync_timeout: float = 30.0  # fsync retries transient upload failures this long, then EIO
    # the owner and modes of what the store has no mode for (memories, derived directories);
    # created files take the creator's, and chmod/chown change them, locally (docs/semantics.md)
    uid: int = field(default_factory=os.getuid)
    gid: int = field(default_factory=os.getgid)
    umask: int = 0o022
    local_names: LocalNames = field(default_factory=LocalNames)

    @property
    def file_mode(self) -> int:
        return 0o666 & ~self.umask

    @property
    def dir_mode(self) -> int:
        return 0o777 & ~self.umask


@dataclass(frozen=True)
class Attr:
    ino: int
    mode: int
    nlink: int
    size: int
    uid: int
    gid: int
    atime: float
    mtime: float
    ctime: float
    # client-set times exactly as given (utimens keeps nanoseconds: rsync compares them)
    atime_ns: int | None = None
    mtime_ns: int | None = None

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)

    @property
    def nlink_counted(self) -> bool:
        """False for a directory whose subdirectories are not known yet (nlink 1)."""
        return not self.is_dir or self.nlink != 1


@dataclass
class Handle:
    fh: int
    node: Node
    flags: int
    snapshot: bytes | None = None  # content at open, for readers of a memory not loaded
    wrote: bool = False
    changed: bool = False  # this open changed the content: created, truncated or wrote it
    refused: bool = False  # a write of this open crossed the limit (memfs.core.refusals)
    # a failed upload of content this open may have written, reported once by its next
    # fsync/close: opens made after the failure never hear it (their content is another)
    error: BaseException | None = None
    heard: BaseException | None = None  # the failure this open's fsync raised itself

    @property
    def writable(self) -> bool:
        return (self.flags & os.O_ACCMODE) != os.O_RDONLY


@dataclass
class PendingDelete:
    """A memory unlinked or renamed away (rule 3), deleted when its grace window ends."""

    memory_id: str
    expected_sha: str | None
    remote_path: str | None
    local_path: str  # the path it disappeared from; re-creating it in time adopts the memory
    at: float  # monotonic
    created_at: datetime | None = None


Invalidation = tuple[str, int, bytes]  # ("inode", ino, b"") or ("entry", parent_ino, name)
Invalidator = Callable[[list[Invalidation]], Awaitable[None]]


def decode_name(raw: bytes) -> str:
    """A name from the kernel as text; non-UTF-8 names are invalid."""
    if len(raw) > paths.MAX_NAME_BYTES:
        raise NameTooLongError(f"name longer than {paths.MAX_NAME_BYTES} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidNameError("name is not UTF-8") from None


def _exact_ns(seconds: float | None, ns: int | None) -> int | None:
    """``ns`` if it is still the time ``seconds`` stands for (a later write replaces it)."""
    if seconds is None or ns is None or seconds != ns / 1e9:
        return None
    return ns


def _utf8(data: bytes | bytearray) -> str | None:
    """``data`` as text, None if it is not UTF-8."""
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        return None


def _set_mode_and_owner(
    node: Node, mode: int | None, owner: tuple[int, int] | None, parent: Attr | None
) -> None:
    """A new node's permission bits and owner, kept locally (None: the mount's defaults).

    In a set-group-ID directory the node takes the directory's group, and a new directory
    keeps the bit (Linux, as on ext4).
    """
    if mode is not None:
        node.mode = stat.S_IMODE(mode)
    if owner is not None:
        node.uid, node.gid = owner
    if parent is not None and parent.mode & stat.S_ISGID:
        node.gid = parent.gid
        if node.is_dir and mode is not None:
            node.mode = stat.S_IMODE(mode) | stat.S_ISGID


def _take_remote_state(node: Node, memory: Memory) -> None:
    """``node`` is bound to ``memory`` as the server has it (path, content hash, size, times)."""
    node.remote_path = memory.path
    node.base_sha = memory.content_sha256
    node.remote_size = memory.content_size_bytes
    node.created_at = memory.created_at
    node.updated_at = memory.updated_at


def _delete_key(memory_id: str) -> tuple[str, str]:
    return ("delete", memory_id)


class Vfs:
    """The filesystem core of one mount of one store. See the module docstring."""

    def __init__(
        self,
        store: StoreAPI,
        config: VfsConfig | None = None,
        *,
        upload_store: StoreAPI | None = None,
    ) -> None:
        self.store = store  # short deadlines: a syscall waits on these calls
        self.upload_store = upload_store or store  # long deadlines: background uploads
        self.store_id = store.store_id
        # the store's limits: a write over them is refused here, with the errno (EFBIG...)
        self.max_content_bytes = store.capabilities.max_content_bytes
        self.max_memories = store.capabilities.max_memories or UNLIMITED_MEMORIES
        self.config = config or VfsConfig()
        self.table = InodeTable()
        self.contents = ContentCache(self.config.cache_bytes)
        self.listings = ListingCache(ttl=self.config.listing_ttl)
        self.bulk = BulkFetcher(
            self.store,
            self.contents,
            self.listings,
            lookahead=self.config.walk_lookahead,
            hidden_root_names=RESERVED_ROOT_NAMES,
        )
        self.last_activity = 0.0  # monotonic time of the last kernel request (change feed pace)
        self.on_activity: Callable[[], None] | None = None
        self.deferred_versions: dict[int, list[MemoryVersion]] = {}  # for nodes open with data
        self.writeback = WriteBack(
            self.sync, is_transient=is_transient, on_failure=self._upload_failed
        )
        # the journal of acknowledged changes, conflict copies, replay (memfs.core.durable)
        self.durable = Durable(self)
        self.writeback.on_queued = self.durable.queued
        self.writeback.on_done = self._upload_done
        self.pending_deletes: dict[str, PendingDelete] = {}
        # uploads that failed for good (not a conflict, not a full store): a directory fsync
        # reports them. A file's stays until a later upload of it succeeds or is superseded
        # (its content is not on the server till then); any other key's is reported once.
        self.failed_uploads: dict[Hashable, BaseException] = {}
        # keys whose create the full store refused (StoreFullError); their journal records are
        # kept, and they are queued again when room may have appeared (retry_waiting_for_room)
        self.waiting_for_room: set[Hashable] = set()
        self.tombstones: set[str] = set()  # memory ids deleted by this mount
        self.local_dirs: set[str] = set()  # directories kept until rmdir (mkdir, emptied here)
        self.removed_dirs: dict[str, float] = {}  # rmdir'ed; remote prefixes hidden a while
        # file memories shown under a derived name beside a same-named directory (core.clashes)
        self.clashes = Clashes()
        self.gone = StoreGone(self.store)  # the store deleted while mounted
        self.handles: dict[int, Handle] = {}
        self._next_fh = 1
        self.invalidator: Invalidator | None = None
        self.read_only = self.config.read_only
        self.started = time.time()
        # memories and bytes for statfs: counted once, then kept by the change feed
        self.usage = StoreUsage(self.store, lambda: time.monotonic() < self.listings.vouched_until)
        self._invalidations: list[Invalidation] = []
        # set when queued invalidations must not wait for the change feed's next batch (a
        # conflict re-based a file): ``ChangeFeed.run_due_invalidations`` runs them
        self.invalidations_due = trio.Event()
        # the read-only /.versions tree (its own inode range; fuse_ops dispatches to it)
        self.versions = VersionsTree(
            store,
            VersionsConfig(
                uid=self.config.uid, gid=self.config.gid, enabled=store.capabilities.versions
            ),
        )

    # =========================================================================================
    # helpers: state

    def _now(self) -> float:
        return time.monotonic()

    def _check_writable(self) -> None:
        if self.read_only:
            raise ReadOnlyError("read-only mount")
        if self.gone.gone:
            raise self.gone.error()

    def _node(self, ino: int) -> Node:
        node = self.table.get(ino)
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

    def settled(self, node: Node) -> bool:
        return (
            node.kind is Kind.FILE
            and node.memory_id is not None
            and not node.local_only
            and not node.dirty
            and node.path is not None
            and self.store_path(node) == node.remote_path
            and not self.writeback.pending(node.ino)
        )

    def store_path(self, node: Node) -> str | None:
        """The memory path ``node`` stands for: its path, except at a clash's derived name."""
        clash = self.clashes.get(node.memory_id)
        if clash is not None and node.path == clash.shown_path:
            return clash.memory_path
        return node.path

    def _is_local_path(self, path: str) -> bool:
        return self.config.local_names.is_local(path)

    def _check_new_name(self, parent_path: str, name: str) -> str:
        """The path of a new entry ``name`` in ``parent_path``, validated."""
        if len(name.encode("utf-8")) > paths.MAX_NAME_BYTES:
            raise NameTooLongError(f"name longer than {paths.MAX_NAME_BYTES} bytes")
        if parent_path == "/" and name in RESERVED_ROOT_NAMES:
            raise InvalidNameError(f"/{name} is reserved")
        path = paths.join(parent_path, name)
        if self._is_local_path(path):
            if name in (".", "..") or "/" in name or "\0" in name:
                raise InvalidNameError(f"invalid name {name!r}")
            return path
        try:
            paths.validate_path(path)
        except paths.PathTooLongError as exc:
            raise NameTooLongError(str(exc)) from None
        except paths.PathError as exc:
            raise InvalidNameError(str(exc)) from None
        return path

    def _drop_listing(self, *dirs: str | None) -> None:
        for directory in dirs:
            if directory is not None:
                self.listings.drop(directory)

    def _mark_parent_kept(self, path: str) -> None:
        """Keep the directory of ``path`` after its entry leaves (rm -r then rmdir works)."""
        directory = paths.parent(path)
        if directory != "/":
            self.local_dirs.add(directory)
        self.removed_dirs.pop(directory, None)

    def _touch_dir(self, directory: str) -> None:
        node = self.table.by_path.get(directory)
        if node is not None:
            node.mtime = time.time()
            node.ctime = node.mtime

    # =========================================================================================
    # directory views: remote listing merged with local state

    async def _listing(self, directory: str) -> Listing:
        cached = self.listings.get(directory)
        if cached is None:  # a bulk fetch of the directory (walk readahead) brings its listing
            cached = await self.bulk.listing(directory)
        if cached is not None:
            return cached
        started = self._now()
        prefix = None if directory == "/" else paths.as_prefix(directory)
        try:
            items = await list_directory(self.store, prefix)
        except Exception as exc:
            stale = self.listings.stale(directory)
            if await self.gone.confirm(exc):  # what was seen stays readable
                if stale is not None:
                    return stale
                raise self.gone.error() from exc
            if stale is None or not is_transient(exc):
                raise
            log.debug("server unreachable; serving the last listing of %s", directory)
            return stale
        listing = Listing(started=started, items=tuple(items))
        self.listings.put(directory, listing)
        return listing

    def _apply_memory(self, node: Node, memory: Memory, started: float) -> None:
        """Take the server's view of a settled node from a listing or answer."""
        if not self.settled(node) or node.synced_at > started:
            return
        if node.open_count > 0 and node.data is not None:
            return  # the open copy keeps its base (see apply_versions)
        if node.base_sha != memory.content_sha256:
            if node.base_sha is not None:
                self._queue_invalidations([("inode", node.ino, b"")])
            node.base_sha = memory.content_sha256
            if node.open_count == 0:
                node.data = None
        node.remote_size = memory.content_size_bytes
        node.created_at = memory.created_at
        node.updated_at = memory.updated_at

    def _memory_node(self, memory: Memory, shown: str) -> Node:
        node = self.table.new(Kind.FILE, shown)
        self.table.set_memory(node, memory.id)
        _take_remote_state(node, memory)
        node.ctime = memory.updated_at.timestamp()
        return node

    def _dir_kept(self, path: str) -> bool:
        if path in self.local_dirs:
            return True
        for node in self.table.below(path):
            if not node.is_dir and not self.settled(node):
                return True
            if node.is_dir and node.path in self.local_dirs:
                return True
        return False

    async def children(self, directory: str) -> dict[str, Node]:
        """The entries of ``directory``: name -> node (nodes are created as needed)."""
        listing = await self._listing(directory)
        now = self._now()
        result: dict[str, Node] = {}
        for item in listing.items:
            node = self._listed_entry(directory, item, listing, now)
            if node is not None and node.path is not None:
                result[paths.basename(node.path)] = node  # a clash's file: its derived name
        # local nodes of this directory
        for name, node in self.table.children_of(directory).items():
            if name not in result and self._local_entry(directory, name, node, listing):
                result[name] = node
        merged = self.table.by_path.get(directory)
        if merged is not None:
            merged.subdirs_known = True  # every subdirectory has its node now (nlink)
        return result

    async def child(self, directory: str, name: str) -> Node | None:
        """``children(directory).get(name)`` without merging the whole directory: a lookup or
        create in a directory of 2,000 memories must not cost 2,000 merges."""
        listing = await self._listing(directory)
        now = self._now()
        found = None
        path = paths.join(directory, name)
        clashing = base_name(name)  # ``x.file-clash`` is the memory ``x`` when x clashes
        items = listing.named(name) + (listing.named(clashing) if clashing is not None else [])
        for item in items:
            node = self._listed_entry(directory, item, listing, now)
            if node is not None and node.path == path:
                found = node
        if found is not None:
            return found
        node = self.table.child(directory, name)
        if node is None:
            return None
        listed_as = listing.name_of(node.memory_id) if node.memory_id is not None else None
        if listed_as not in (None, name):
            # listed under another name: merge that item first, as ``children`` would (it
            # rebinds the node if the memory was renamed on the server)
            for item in listing.named(listed_as):
                self._listed_entry(directory, item, listing, now)
            if self.table.child(directory, name) is not node:
                return None
        return node if self._local_entry(directory, name, node, listing) else None

    def _listed_entry(
        self, directory: str, item: ListItem, listing: Listing, now: float
    ) -> Node | None:
        """The node a listing item stands for, merged with local state (None: not shown)."""
        if isinstance(item, MemoryPrefix):
            path = item.path.rstrip("/")
            removed = self.removed_dirs.get(path)
            if removed is not None and now - removed < self.config.grace + 10:
                return None
            if directory == "/" and paths.basename(path) in RESERVED_ROOT_NAMES:
                return None
            node = self.table.by_path.get(path)
            if node is None:
                node = self.table.new(Kind.DIR, path)
            return node if node.is_dir else None
        memory = item
        if directory == "/" and paths.basename(memory.path) in RESERVED_ROOT_NAMES:
            return None
        if memory.id in self.tombstones or memory.id in self.pending_deletes:
            return None
        known_at = listing.known_at(memory.id)  # a patched-in item is as new as its patch
        shown = self._shown_path(directory, memory, listing)
        holder = self.table.by_id.get(memory.id)
        if holder is not None:
            if holder.path != shown:
                occupant = self.table.by_path.get(shown)
                if not self.settled_remote(holder, known_at) or (
                    occupant is not None and not self._yields(occupant, known_at)
                ):
                    return None
                # renamed on the server, or a name clash began or ended (memfs.core.clashes)
                self._drop_listing(paths.parent(holder.path or "/"))
                self._forget_entry(holder.path)
                self.table.bind(holder, shown)
                holder.remote_path = memory.path
            if shown == memory.path:
                self.clashes.resolved(memory.id)
            self._apply_memory(holder, memory, known_at)
            return holder
        occupant = self.table.by_path.get(shown)
        if occupant is not None and not self._yields(occupant, known_at):
            return None  # a local file or directory wins
        if occupant is not None:
            self.table.unbind(occupant)
        if shown == memory.path:
            self.clashes.resolved(memory.id)
        return self._memory_node(memory, shown)

    def _shown_path(self, directory: str, memory: Memory, listing: Listing) -> str:
        """Where the mount shows ``memory``: its path, or a derived name when a directory of
        the same name exists (memfs.core.clashes; noted and logged once)."""
        name = listing_name(memory)
        local = self.table.child(directory, name)
        clash = any(isinstance(i, MemoryPrefix) for i in listing.named(name)) or (
            local is not None and local.is_dir and self._dir_kept(memory.path)
        )
        if not clash:
            return memory.path

        def taken(candidate: str) -> bool:
            other = self.table.child(directory, candidate)
            mine = other is not None and other.memory_id == memory.id
            return bool(listing.named(candidate)) or (other is not None and not mine)

        shown = paths.join(directory, derived_name(name, taken))
        self.clashes.note(memory.id, memory.path, shown)
        return shown

    def _yields(self, occupant: Node, known_at: float) -> bool:
        """Whether a node bound where a listed memory goes gives way to it: a settled memory
        not heard of since, or a directory nothing keeps any more (a clash that ended)."""
        if occupant.is_dir:
            return occupant.path is not None and not self._dir_kept(occupant.path)
        return self.settled_remote(occupant, known_at)

    def _forget_entry(self, path: str | None) -> None:
        """The kernel must look ``path`` up again (its node moved to another name)."""
        parent_ino = self._parent_ino(path)
        if parent_ino is not None and path is not None:
            self._queue_invalidations([("entry", parent_ino, paths.basename(path).encode())])

    def _local_entry(self, directory: str, name: str, node: Node, listing: Listing) -> bool:
        """Whether a local node the listing does not show is an entry; forgets what is gone."""
        if node.is_dir:
            if self._dir_kept(paths.join(directory, name)):
                return True
            parent = self.table.by_path.get(directory)
            if parent is not None:  # the kernel may still hold its entry
                self._queue_invalidations([("entry", parent.ino, name.encode())])
            self.table.unbind(node)
            return False
        if self.settled_remote(node, listing.known_at(node.memory_id)):
            # a settled memory missing from a newer listing was deleted on the server
            self._forget_memory(node)
            return False
        return True

    def settled_remote(self, node: Node, started: float) -> bool:
        """Settled and last heard of before a listing that began at ``started``."""
        return self.settled(node) and node.synced_at <= started

    def _forget_memory(self, node: Node) -> None:
        parent_ino = self._parent_ino(node.path)
        name = paths.basename(node.path) if node.path else ""
        self.table.set_memory(node, None)
        self.table.unbind(node)
        if parent_ino is not None:
            self._queue_invalidations([("entry", parent_ino, name.encode())])

    def _parent_ino(self, path: str | None) -> int | None:
        if path is None:
            return None
        parent = self.table.by_path.get(paths.parent(path))
        return parent.ino if parent is not None else None

    async def _child(self, parent_ino: int, name: str) -> Node:
        directory = self._dir_path(parent_ino)
        node = await self.child(directory, name)
        if node is None:
            raise NoEntryError(f"{paths.join(directory, name)} does not exist")
        return node

    # =========================================================================================
    # attributes

    def attr(self, node: Node) -> Attr:
        # nlink: 0 once unlinked (an open file, a removed directory); a directory has one link
        # more per subdirectory the mount knows (made here, or listed)
        linked = node.path is not None
        if node.is_dir:
            mode = stat.S_IFDIR | (node.mode if node.mode is not None else self.config.dir_mode)
            nlink = 2 + self.table.subdirs[node.path] if node.path is not None else 0
            if node.path is not None and not node.subdirs_known:
                nlink = 1  # "not counted" (as btrfs says it), never too few: find trusts 2+n
        elif node.kind is Kind.SYMLINK:
            mode = stat.S_IFLNK | 0o777
            nlink = int(linked)
        else:
            mode = stat.S_IFREG | (node.mode if node.mode is not None else self.config.file_mode)
            nlink = int(linked)
        updated = node.updated_at.timestamp() if node.updated_at else node.ctime
        mtime = node.mtime if node.mtime is not None else updated
        if node.is_dir and node.mtime is None:
            mtime = self.started
        return Attr(
            ino=node.ino,
            mode=mode,
            nlink=nlink,
            size=node.size(),
            uid=node.uid if node.uid is not None else self.config.uid,
            gid=node.gid if node.gid is not None else self.config.gid,
            atime=node.atime if node.atime is not None else mtime,
            mtime=mtime,
            ctime=max(node.ctime, updated) if node.kind is Kind.FILE else node.ctime,
            atime_ns=_exact_ns(node.atime, node.atime_ns),
            mtime_ns=_exact_ns(node.mtime, node.mtime_ns),
        )

    def _attr_of(self, path: str) -> Attr | None:
        node = self.table.by_path.get(path)
        return self.attr(node) if node is not None else None

    def _active(self) -> None:
        now = self._now()
        idle = now - self.last_activity
        self.last_activity = now
        if idle > 1.0 and self.on_activity is not None:
            self.on_activity()  # the change feed speeds up (and polls now after an idle time)

    async def lookup(self, parent_ino: int, name: str) -> Attr:
        self._active()
        if name in (".", ".."):
            node = self._node(parent_ino)
            if name == ".." and node.path not in (None, "/"):
                node = self.table.by_path.get(paths.parent(node.path or "/"), node)
        else:
            node = await self._child(parent_ino, name)
        self.table.remember(node)
        return self.attr(node)

    async def getattr(self, ino: int) -> Attr:
        return self.attr(self._node(ino))

    def forget(self, ino: int, count: int) -> None:
        self.table.forget(ino, count)

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
            if size < 0:
                raise InvalidArgumentError("negative size")
            if size > self.max_content_bytes:
                raise FileTooLargeError(f"a memory holds at most {self.max_content_bytes} bytes")
            old = b"" if size == 0 and node.data is None else await self._ensure_data(node)
            new = bytearray(old[:size]) + b"\0" * max(0, size - len(old))
            if node.open_count == 0 and self._committed(node) and _utf8(new) is None:
                # nobody has it open: this is the commit of the new content, and it would be
                # refused; a failing call changes nothing
                raise NotUtf8Error(f"{node.path} truncated to {size} bytes is not UTF-8 text")
            node.data = new
            if node.refused == TOO_LARGE:
                self._end_refusal(node)  # truncated: an ordinary dirty file again
            self._changed(node)
            if node.open_count == 0:
                self._commit(node)
        if mode is not None or uid is not None or gid is not None:
            # kept locally like times, never uploaded (after the size: a failing call changes
            # nothing); the kernel checked who may (default_permissions)
            if mode is not None and node.kind is not Kind.SYMLINK:
                node.mode = stat.S_IMODE(mode)
            if uid is not None:
                node.uid = uid
            if gid is not None:
                node.gid = gid
            node.ctime = time.time()
        if atime is not None or mtime is not None:
            # times are kept locally, never uploaded
            if self.read_only:
                raise ReadOnlyError("read-only mount")
            if atime is not None:
                node.atime, node.atime_ns = atime, atime_ns
            if mtime is not None:
                node.mtime, node.mtime_ns = mtime, mtime_ns
        return self.attr(node)

    def _changed(self, node: Node) -> None:
        node.dirty = True
        node.gen += 1
        node.mtime = time.time()
        node.ctime = node.mtime

    # =========================================================================================
    # contents

    async def _fetch(self, node: Node) -> bytes:
        """The server's content of a memory node (clean cache first)."""
        cached = self.contents.get(node.base_sha)
        if cached is not None:
            return cached
        if node.memory_id is None:
            return b""
        if node.path is not None and self.store_path(node) == node.remote_path:
            bulk = await self.bulk.get(paths.parent(node.path), node.base_sha)
            if bulk is not None:
                return bulk
        memory_id = node.memory_id
        memory = await self.store.read(memory_id)
        content = (memory.content or "").encode("utf-8")
        self.contents.put(memory.content_sha256, content)
        if (
            node.memory_id == memory_id
            and node.data is None
            and not node.dirty
            and node.base_sha != memory.content_sha256
        ):
            node.base_sha = memory.content_sha256
            node.remote_size = memory.content_size_bytes
            node.updated_at = memory.updated_at
        return content

    async def _ensure_data(self, node: Node) -> bytearray:
        if node.data is None:
            content = await self._fetch(node)
            if node.data is None:
                node.data = bytearray(content)
        return node.data

    async def _content_for_read(self, node: Node) -> bytes:
        if node.data is not None:
            return bytes(node.data)
        return await self._fetch(node)

    # =========================================================================================
    # open files

    def _new_handle(self, node: Node, flags: int) -> Handle:
        handle = Handle(fh=self._next_fh, node=node, flags=flags)
        self._next_fh += 1
        self.handles[handle.fh] = handle
        node.open_count += 1
        return handle

    def _handle(self, fh: int) -> Handle:
        handle = self.handles.get(fh)
        if handle is None:
            raise InvalidArgumentError(f"no open file {fh}")
        return handle

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
            if node.data is None or len(node.data) > 0:
                node.data = bytearray()
                self._changed(node)
                truncated = True
            if node.refused == TOO_LARGE:
                self._end_refusal(node)
        elif writable:
            await self._ensure_data(node)
        elif node.kind is Kind.FILE:
            snapshot = await self._content_for_read(node)
        handle = self._new_handle(node, flags)
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
        existing = await self.child(directory, name)
        if existing is not None:
            if flags & os.O_EXCL:
                raise ExistsError(f"{paths.join(directory, name)} exists")
            if existing.is_dir:
                raise IsDirectoryError("is a directory")
            fh, _ = await self.open(existing.ino, flags)
            self.table.remember(existing)
            return fh, self.attr(existing)
        node = await self._new_file(directory, name, mode, owner)
        handle = self._new_handle(node, flags)
        handle.changed = True
        self.table.remember(node)
        return handle.fh, self.attr(node)

    async def mknod(
        self, parent_ino: int, name: str, *, mode: int | None, owner: tuple[int, int] | None
    ) -> Attr:
        """mknod(S_IFREG): an empty regular file, as open(O_CREAT) and close make one."""
        directory = self._dir_path(parent_ino)
        self._check_writable()
        if await self.child(directory, name) is not None:
            raise ExistsError(f"{paths.join(directory, name)} exists")
        node = await self._new_file(directory, name, mode, owner)
        self._commit(node)
        self.table.remember(node)
        return self.attr(node)

    async def _new_file(
        self, directory: str, name: str, mode: int | None, owner: tuple[int, int] | None
    ) -> Node:
        path = self._check_new_name(directory, name)
        node = self.table.new(Kind.FILE, path)
        node.data = bytearray()
        node.local_only = self._is_local_path(path)
        _set_mode_and_owner(node, mode, owner, self._attr_of(directory))
        self._changed(node)
        self.removed_dirs.pop(directory, None)
        if not node.local_only:
            await self._adopt(node, path)
        # the cached listing stays: a new local node is merged into it (``children``)
        self._touch_dir(directory)
        return node

    async def read(self, fh: int, offset: int, size: int) -> bytes:
        handle = self._handle(fh)
        node = handle.node
        if node.data is not None:
            return bytes(node.data[offset : offset + size])
        if handle.snapshot is None:
            handle.snapshot = await self._content_for_read(node)
        return handle.snapshot[offset : offset + size]

    async def write(self, fh: int, offset: int, buf: bytes) -> int:
        handle = self._handle(fh)
        self._check_writable()
        node = handle.node
        data = await self._ensure_data(node)
        if handle.flags & os.O_APPEND:
            offset = len(data)
        end = offset + len(buf)
        if end > self.max_content_bytes:
            if handle.changed and self._committed(node):
                # what this open left is a part of what the program meant: never uploaded
                handle.refused = True
                self._refuse(node, TOO_LARGE)
            else:
                log.info("a write to %s over the limit was refused; nothing changed", node.path)
            raise FileTooLargeError(f"a memory holds at most {self.max_content_bytes} bytes")
        if offset > len(data):
            data.extend(b"\0" * (offset - len(data)))
        data[offset:end] = buf
        handle.wrote = handle.changed = True
        self._changed(node)
        if handle.refused and node.refused == TOO_LARGE:
            node.refused_gen = node.gen  # still the refused writer's content
        return len(buf)

    def _committed(self, node: Node) -> bool:
        """Whether ``node``'s content is committed (validated, then uploaded)."""
        return (
            node.kind is Kind.FILE
            and not node.local_only
            and node.path is not None
            and not self.read_only
        )

    def _validate(self, node: Node) -> str:
        """The text of a new content being committed; refuse it (EILSEQ) if it is not UTF-8.
        Valid content ends any refusal: it is a new save (memfs.core.refusals)."""
        data = node.data if node.data is not None else bytearray()
        if len(data) > self.max_content_bytes:
            raise FileTooLargeError(f"a memory holds at most {self.max_content_bytes} bytes")
        text = _utf8(data)
        if text is None:
            self._refuse(node, NOT_UTF8)
            raise NotUtf8Error(f"{node.path} is not UTF-8 text")
        self._end_refusal(node)
        return text

    def _refuse(self, node: Node, reason: str) -> None:
        """The current content of ``node`` is refused: kept, never uploaded nor journaled.
        Work queued for an earlier commit of the file is superseded by it (a pending move of
        the memory still goes, without content: ``sync``)."""
        self.durable.refusals.refuse(node, reason)
        if self.writeback.pending(node.ino):
            self.writeback.cancel(node.ino)  # drops its journal record
            if node.memory_id is not None and self.store_path(node) != node.remote_path:
                self.writeback.schedule(node.ino, self.config.grace)

    def _end_refusal(self, node: Node) -> None:
        self.durable.refusals.clear(node)
        for handle in self.handles.values():
            if handle.node is node:
                handle.refused = False

    def _refusal(self, node: Node) -> FileTooLargeError | NotUtf8Error | None:
        """The error of a commit of ``node``'s current content if it is the refused one."""
        if node.refused is None or node.refused_gen != node.gen:
            return None
        if node.refused == TOO_LARGE and _utf8(node.data or b"") is not None:
            return FileTooLargeError(
                f"a write to {node.path} crossed {self.max_content_bytes} bytes: what it left is "
                "not uploaded"
            )
        return NotUtf8Error(f"{node.path} is not UTF-8 text")

    def _commit(self, node: Node) -> None:
        """Validate a changed file and queue its upload (rule: close/fsync/rename commit).
        The commit of a refused content raises the refusal's error (again: never sticky, the
        next commit of another content decides anew)."""
        if not self._committed(node):
            return
        refusal = self._refusal(node)
        if refusal is not None:
            self.durable.refusals.keep(node)
            raise refusal
        at_home = self.store_path(node) == node.remote_path
        if not node.dirty and node.memory_id is not None and at_home:
            return
        if node.dirty:
            self._validate(node)
        if node.memory_id is None:
            self.writeback.schedule(node.ino, self.config.new_file_delay, debounce=True)
        else:
            self.writeback.schedule(node.ino, self.config.update_delay)

    def _upload_error(self, node: Node, error: BaseException) -> None:
        """A failed upload of ``node``: each open of it for writing hears it once."""
        for handle in self.handles.values():
            told = handle.heard is not None and handle.heard in (error, error.__cause__)
            if handle.node is node and handle.writable and not told:
                handle.error = error

    def _report(self, handle: Handle) -> None:
        """Raise a failed upload this open has not heard yet (ESTALE for a conflict)."""
        error, handle.error = handle.error, None
        if error is None:
            return
        if isinstance(error, PreconditionFailedError | RemoteConflictError):
            raise RemoteConflictError(
                f"{handle.node.path} changed on the server; the local content was saved as a "
                "conflict copy"
            ) from error
        raise error

    async def flush(self, fh: int) -> None:
        handle = self._handle(fh)
        node = handle.node
        if handle.wrote or (node.dirty and handle.writable):
            try:
                self._commit(node)
            except (NotUtf8Error, FileTooLargeError):
                if handle.changed:  # a refusal is the writer's, not an open that wrote nothing
                    raise
        if handle.writable:  # an error is the writer's, never a read-only open's
            self._report(handle)
            if node.dirty and self.gone.gone:  # journaled, never uploaded (memfs.core.orphans)
                raise self.gone.error()

    async def fsync(self, fh: int) -> None:
        handle = self._handle(fh)
        node = handle.node
        if not handle.writable:  # waits for the upload; its errors are the writer's
            try:
                await self._settle(node.ino)
            except Exception as exc:
                log.debug("fsync of a read-only open of %s: %s (not reported)", node.path, exc)
            return
        if node.dirty or node.refused is not None:
            self._commit(node)  # a refused content: fsync says so (it is not on the server)
        self._report(handle)
        try:
            await self._settle(node.ino)
        except Exception as exc:
            handle.heard = exc  # a failure hook that runs after this has nothing new to say
            if handle.error is not None:
                self._report(handle)  # the same failure, in the words of _upload_failed
            raise
        self._report(handle)

    async def fsync_dir(self) -> None:
        """Upload everything pending, creates waiting for room included; ENOSPC while one
        still waits, ESTALE if an upload lost a race (its content is in a conflict copy)."""
        self.retry_waiting_for_room()
        conflicts = self.durable.conflict_count
        errors = await self.writeback.flush_all(patience=self.config.fsync_timeout)
        if errors:
            raise self._gave_up(errors[0])
        if self.waiting_for_room:
            raise NoSpaceError(f"the store is full: {len(self.waiting_for_room)} file(s) wait")
        if self.durable.conflict_count > conflicts:
            raise RemoteConflictError(
                "changed on the server meanwhile; the local content was saved as a conflict copy"
            )
        if self.failed_uploads:  # failed in the background, before this fsync
            key, error = next(iter(self.failed_uploads.items()))
            for told in [k for k in self.failed_uploads if not isinstance(k, int)]:
                del self.failed_uploads[told]  # nothing will retry it: reported once
            log.info("directory fsync: %s failed for good: %s", self.durable.describe(key), error)
            raise error

    async def _settle(self, key: Hashable) -> None:
        """fsync: upload ``key`` now, retrying transient failures for ``fsync_timeout``."""
        try:
            await self.writeback.flush(key, patience=self.config.fsync_timeout)
        except Exception as exc:
            raise self._gave_up(exc) from None

    def _gave_up(self, exc: BaseException) -> BaseException:
        """The error fsync reports; a transient one (EIO) says the change stays queued."""
        if isinstance(exc, trio.TooSlowError) or is_transient(exc):
            error = RemoteUnavailableError(
                f"not uploaded within {self.config.fsync_timeout:g} s ({exc}); kept in the "
                "journal and retried in the background"
            )
            error.__cause__ = exc
            return error
        return exc

    async def release(self, fh: int) -> None:
        handle = self.handles.pop(fh, None)
        if handle is None:
            return
        node = handle.node
        node.open_count -= 1
        if handle.wrote and node.dirty:
            # a refusal was reported by flush already; the content stays local
            with contextlib.suppress(NotUtf8Error, FileTooLargeError):
                self._commit(node)
        if (
            node.refused == TOO_LARGE
            and node.open_count == 0
            and node.memory_id is None
            and not node.data
            and node.path is not None
        ):
            # a new file whose every write was refused: it is not created at all
            self.durable.refusals.clear(node)
            self.writeback.cancel(node.ino)
            self._forget_memory(node)
        self._drop_clean_data(node)
        deferred = self.deferred_versions.pop(node.ino, None) if node.open_count == 0 else None
        if deferred and self.settled(node):
            self.apply_versions(deferred)
        self.table.maybe_drop(node)

    def _drop_clean_data(self, node: Node) -> None:
        if (
            node.open_count == 0
            and node.data is not None
            and not node.dirty
            and not node.local_only
            and node.memory_id is not None
            and node.base_sha is not None
            and not self.writeback.pending(node.ino)
        ):
            self.contents.put(node.base_sha, bytes(node.data))
            node.data = None

    # =========================================================================================
    # namespace changes

    def _adoptable(self, path: str) -> PendingDelete | Node | None:
        now = self._now()
        for pending in self.pending_deletes.values():
            key = _delete_key(pending.memory_id)
            if (
                pending.local_path == path
                and now - pending.at <= self.config.grace
                and not self.writeback.running(key)
            ):
                return pending
        for node in self.table.by_id.values():
            if (
                node.departed_from == path
                and node.path != path
                and now - node.departed_at <= self.config.grace
                and not self.writeback.running(node.ino)
            ):
                return node
        return None

    def _take_pending_delete(self, node: Node, pending: PendingDelete) -> None:
        """Rule 3: ``node`` takes the memory of a deferred delete, which is not done."""
        self.writeback.cancel(_delete_key(pending.memory_id))
        del self.pending_deletes[pending.memory_id]
        self.table.set_memory(node, pending.memory_id)
        node.remote_path = pending.remote_path
        node.base_sha = pending.expected_sha
        node.created_at = pending.created_at

    async def _adopt(self, node: Node, path: str) -> bool:
        """Rule 3: new content at a path whose memory just left makes it an update of it."""
        source = self._adoptable(path)
        if source is None:
            return False
        if isinstance(source, PendingDelete):
            self._take_pending_delete(node, source)
            log.info("%s re-created in time: update of %s", path, source.memory_id)
            return True
        old = source
        await self._ensure_data(old)
        if old.departed_from != path or old.memory_id is None:
            return False  # changed while fetching
        memory_id = old.memory_id
        self.writeback.cancel(old.ino)
        self.table.set_memory(node, memory_id)
        node.remote_path = old.remote_path
        node.base_sha = old.base_sha
        node.created_at = old.created_at
        old.remote_path = None
        old.base_sha = None
        old.departed_from = None
        old.dirty = True
        if not old.local_only and old.path is not None:
            self.writeback.schedule(old.ino, self.config.new_file_delay, debounce=True)
        log.info("%s re-created in time: update of %s (moved-away copy is new)", path, memory_id)
        return True

    def _detach_memory(self, node: Node, local_path: str) -> None:
        """Rule 3: the memory of ``node`` leaves; it is deleted when the grace window ends."""
        memory_id = node.memory_id
        if memory_id is None:
            return
        self.pending_deletes[memory_id] = PendingDelete(
            memory_id=memory_id,
            expected_sha=node.base_sha,
            remote_path=node.remote_path,
            local_path=local_path,
            at=self._now(),
            created_at=node.created_at,
        )
        self.table.set_memory(node, None)
        node.remote_path = None
        node.base_sha = None
        node.departed_from = None
        self.writeback.cancel(node.ino)
        self.writeback.schedule(_delete_key(memory_id), self.config.grace)

    async def unlink(self, parent_ino: int, name: str) -> None:
        directory = self._dir_path(parent_ino)
        node = await self._child(parent_ino, name)
        if node.is_dir:
            raise IsDirectoryError("is a directory")
        self._check_writable()
        path = paths.join(directory, name)
        if node.memory_id is not None:
            if node.open_count > 0:
                await self._ensure_data(node)
            self._detach_memory(node, path)
        self.writeback.cancel(node.ino)
        node.dirty = False
        self._end_refusal(node)  # its kept copy goes with it
        self.table.unbind(node)
        self._mark_parent_kept(path)
        # the cached listing stays: its item is skipped while the delete is pending, then
        # removed when the server has deleted it (``_run_delete``)
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
        if await self.child(directory, name) is not None:
            raise ExistsError(f"{paths.join(directory, name)} exists")
        path = self._check_new_name(directory, name)
        node = self.table.new(Kind.DIR, path)
        node.subdirs_known = True  # empty
        _set_mode_and_owner(node, mode, owner, self._attr_of(directory))
        node.mtime = time.time()
        self.local_dirs.add(path)
        self.removed_dirs.pop(path, None)
        self._drop_listing(directory)
        self._touch_dir(directory)
        self.table.remember(node)
        return self.attr(node)

    async def rmdir(self, parent_ino: int, name: str) -> None:
        directory = self._dir_path(parent_ino)
        node = await self._child(parent_ino, name)
        if not node.is_dir:
            raise NotDirectoryError("not a directory")
        self._check_writable()
        path = paths.join(directory, name)
        self.listings.drop(path)
        if await self.children(path):
            raise DirectoryNotEmptyError(f"{path} is not empty")
        self.local_dirs.discard(path)
        self.removed_dirs[path] = self._now()
        self.table.unbind(node)
        self._mark_parent_kept(path)
        self._drop_listing(directory)
        self._touch_dir(directory)

    async def symlink(self, parent_ino: int, name: str, target: bytes) -> Attr:
        directory = self._dir_path(parent_ino)
        self._check_writable()
        path = self._check_new_name(directory, name)
        if not self._is_local_path(path):
            raise NotPermittedError("symbolic links are only allowed for local-only names")
        if await self.child(directory, name) is not None:
            raise ExistsError(f"{path} exists")
        node = self.table.new(Kind.SYMLINK, path)
        node.local_only = True
        node.target = target
        self._drop_listing(directory)
        self.table.remember(node)
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
        old_dir = self._dir_path(old_parent)
        new_dir = self._dir_path(new_parent)
        src = await self._child(old_parent, old_name)
        dst = await self.child(new_dir, new_name)
        if flags & RENAME_NOREPLACE and dst is not None:
            raise ExistsError(f"{paths.join(new_dir, new_name)} exists")
        self._check_writable()
        old_path = paths.join(old_dir, old_name)
        new_path = self._check_new_name(new_dir, new_name)
        if src is dst:
            return
        if src.is_dir:
            if dst is not None and not dst.is_dir:
                raise NotDirectoryError(f"{new_path} is not a directory")
            if paths.is_below(new_path, old_path):
                raise InvalidArgumentError("cannot move a directory below itself")
            await self._rename_dir(src, old_path, new_path, dst)
        else:
            if dst is not None and dst.is_dir:
                raise IsDirectoryError(f"{new_path} is a directory")
            await self._rename_file(src, old_path, new_path, dst)
        self._mark_parent_kept(old_path)
        self.removed_dirs.pop(new_dir, None)
        # cached listings stay (a directory's rename clears them all): a moved file is
        # unsettled until its upload, whose answer patches them (``sync``)
        self._touch_dir(old_dir)
        self._touch_dir(new_dir)

    async def _rename_file(self, src: Node, old_path: str, new_path: str, dst: Node | None) -> None:
        new_local = self._is_local_path(new_path)
        if src.kind is Kind.SYMLINK and not new_local:
            raise NotPermittedError("symbolic links are only allowed for local-only names")
        if not new_local and src.kind is Kind.FILE and (src.dirty or src.memory_id is None):
            if src.data is None:
                await self._ensure_data(src)
            refusal = self._refusal(src)
            if isinstance(refusal, NotUtf8Error):
                raise refusal  # EILSEQ at rename onto a memory path
            if refusal is None:  # (over the limit: it moves, still refused, not uploaded)
                self._validate(src)
        if src.memory_id is not None and (
            dst is not None or new_local or self._adoptable(new_path) is not None
        ):
            await self._ensure_data(src)  # the content must travel without its identity
        if dst is not None and dst.open_count > 0:
            await self._ensure_data(dst)
        identity: PendingDelete | Node | None = None
        if not new_local:
            if dst is not None and dst.memory_id is not None:
                identity = dst
            elif dst is None:
                identity = self._adoptable(new_path)
                if isinstance(identity, Node):
                    await self._ensure_data(identity)
                    if identity.departed_from != new_path or identity.memory_id is None:
                        identity = None
        # the source's own memory leaves when it takes another identity or becomes local
        if (
            src.memory_id is not None
            and (identity is not None or new_local)
            and identity is not src
        ):
            await self._ensure_data(src)  # loaded above, unless the identity changed meanwhile
            self._detach_memory(src, old_path)
        # the target leaves
        if dst is not None:
            self.writeback.cancel(dst.ino)
            if dst.memory_id is not None and identity is not dst:
                self._detach_memory(dst, new_path)
            dst.dirty = False
            self._end_refusal(dst)
        committed = False
        if isinstance(identity, Node):
            memory_id = identity.memory_id
            assert memory_id is not None
            self.writeback.cancel(identity.ino)
            remote_path, base_sha, created = (
                identity.remote_path,
                identity.base_sha,
                identity.created_at,
            )
            self.table.set_memory(src, memory_id)
            src.remote_path, src.base_sha, src.created_at = remote_path, base_sha, created
            identity.remote_path = None
            identity.base_sha = None
            identity.departed_from = None
            if identity is not dst and identity.path is not None:
                identity.dirty = True
                if not identity.local_only:
                    self.writeback.schedule(identity.ino, self.config.new_file_delay, debounce=True)
            committed = True
        elif isinstance(identity, PendingDelete):
            self._take_pending_delete(src, identity)
            committed = True
        if dst is not None:
            self.table.unbind(dst)
        self.table.bind(src, new_path)
        src.local_only = new_local or src.kind is Kind.SYMLINK
        src.ctime = time.time()
        if new_local:
            self.writeback.cancel(src.ino)
            self._end_refusal(src)  # a local-only name is never uploaded anyway
            return
        if src.refused is not None:
            self.durable.refusals.keep(src)  # the copy is named after the new path
        if committed:
            src.dirty = True  # compared with the base at upload: unchanged content sends nothing
            self.writeback.schedule(src.ino, self.config.update_delay)
        elif src.memory_id is not None:
            if src.departed_from is None:
                src.departed_from = old_path
            src.departed_at = self._now()
            self.writeback.schedule(src.ino, self.config.grace, debounce=True)
        else:
            src.dirty = True
            self.writeback.schedule(src.ino, self.config.new_file_delay, debounce=True)

    async def _rename_dir(self, src: Node, old_path: str, new_path: str, dst: Node | None) -> None:
        """Rename every memory below ``old_path`` (one request each; not atomic)."""
        if dst is not None:
            self.listings.drop(new_path)
            if await self.children(new_path):
                raise DirectoryNotEmptyError(f"{new_path} is not empty")
            self.table.unbind(dst)
            self.local_dirs.discard(new_path)
        # settle what is queued below first, so the server's paths are the ones we know
        for node in self.table.below(old_path):
            if self.writeback.pending(node.ino):
                await self.writeback.flush(node.ino)
        for key in list(self.pending_deletes):
            pending = self.pending_deletes[key]
            if pending.remote_path and paths.is_below(pending.remote_path, old_path):
                await self.writeback.flush(_delete_key(key))

        def moved(path: str) -> str:
            return new_path + path[len(old_path) :]

        if not self._is_local_path(old_path) and not self._is_local_path(new_path):
            async for item in self.store.list_below(paths.as_prefix(old_path)):
                if item.id in self.tombstones:
                    continue
                target = moved(item.path)
                try:
                    paths.validate_path(target)
                except paths.PathError as exc:
                    raise NameTooLongError(f"{target}: {exc}") from None
                updated = await self.store.update(item.id, path=target)
                holder = self.table.by_id.get(item.id)
                if holder is not None:
                    holder.remote_path = updated.path
                    holder.synced_at = self._now()
        # rebind local state below (deepest last is fine: bind keys are distinct)
        for node in sorted(self.table.below(old_path), key=lambda n: n.path or ""):
            assert node.path is not None
            target = moved(node.path)
            self.table.bind(node, target)
            node.local_only = self._is_local_path(target) or node.kind is Kind.SYMLINK
            if node.memory_id is not None and node.remote_path != target and not node.local_only:
                self.writeback.schedule(node.ino, 0)
        self.table.bind(src, new_path)
        for directory in list(self.local_dirs):
            if directory == old_path or paths.is_below(directory, old_path):
                self.local_dirs.discard(directory)
                self.local_dirs.add(moved(directory))
        self.local_dirs.add(new_path)
        self.listings.clear()

    # =========================================================================================
    # directories and the filesystem

    async def readdir(self, ino: int) -> list[tuple[str, Node]]:
        self._active()
        directory = self._dir_path(ino)
        self.bulk.listed(directory)  # reads of its files may follow (grep -r): fetch in bulk
        entries = await self.children(directory)
        return sorted(entries.items())

    async def statfs(self) -> dict[str, int]:
        count, used = await self.usage.figures()
        blocks = self.max_memories * self.max_content_bytes // BLOCK_SIZE
        free = max(0, blocks - (used + BLOCK_SIZE - 1) // BLOCK_SIZE)
        if self.read_only:
            free = 0
        return {
            "f_bsize": BLOCK_SIZE,
            "f_frsize": BLOCK_SIZE,
            "f_blocks": blocks,
            "f_bfree": free,
            "f_bavail": free,
            "f_files": self.max_memories,
            "f_ffree": max(0, self.max_memories - count),
            "f_favail": max(0, self.max_memories - count),
            "f_namemax": paths.MAX_NAME_BYTES,
        }

    # =========================================================================================
    # uploads (run by the write-back queue)

    async def sync(self, key: Hashable) -> None:
        """Make the server match one inode (or run one pending delete); once the store is gone
        (a 404 for the store itself), nothing is tried any more (memfs.core.orphans)."""
        if self.gone.gone:
            raise self.gone.error()
        try:
            await self._sync(key)
        except NotFoundError as exc:
            if await self.gone.confirm(exc):
                raise self.gone.error() from exc
            raise

    async def _sync(self, key: Hashable) -> None:
        if isinstance(key, tuple):
            if key[0] != "delete":
                await self.durable.run(key)  # conflict copies, replays
                return
            await self._run_delete(str(key[1]))
            return
        assert isinstance(key, int)
        node = self.table.get(key)
        if node is None or node.kind is not Kind.FILE:
            return
        if self.read_only:  # archived while mounted: nothing more reaches the store
            raise StoreArchivedError(f"the store is archived: {node.path} cannot be uploaded")
        if node.path is None or node.local_only:
            return
        refused = node.refused is not None  # the committed content is refused: not uploaded
        if refused and node.memory_id is None:
            return  # not created (memfs.core.refusals)
        path = self.store_path(node)
        assert path is not None
        gen = node.gen
        text = None
        if node.data is not None and not refused:
            text = _utf8(node.data)
            if text is None:
                return  # written since its commit, not yet committed: the writer's commit decides
        if node.memory_id is None:
            try:
                memory = await self._create(path, text or "")
            except PathConflictError as exc:
                # another writer made this path first: its memory is the winner (if it is one)
                winner = await self._head(exc.conflicting_memory_id, path)
                if winner is None or winner.path != path or winner.id in self.table.by_id:
                    raise
                self._lost_race(node, winner)
                return
            self.contents.put(memory.content_sha256, (text or "").encode("utf-8"))
            self.table.set_memory(node, memory.id)
            self._took(node, memory, gen)
            if node.path is None or node.local_only:
                # unlinked or renamed to a local name while it was being created
                self._detach_memory(node, path)
                self.writeback.schedule(_delete_key(memory.id), 0)
            elif self.store_path(node) != node.remote_path or node.gen != gen:
                self.writeback.schedule(node.ino, self.config.update_delay)
            self.listings.record(memory)
            return
        memory_id = node.memory_id
        content = None
        if text is not None and sha256_hex(text) != node.base_sha:
            content = text
        new_path = path if path != node.remote_path else None
        old_remote = node.remote_path
        if content is None and new_path is None:
            if node.gen == gen and not refused:
                node.dirty = False
            node.departed_from = None
            self._drop_clean_data(node)
            return
        try:
            memory = await self._update(memory_id, content, new_path, node.base_sha)
        except PreconditionFailedError:
            # another writer's version is the head: it stays, and this file shows it from now on
            winner = await self._head(memory_id, path)
            if winner is None or self.table.by_id.get(memory_id) is not node:
                raise
            self._lost_race(node, winner)
            return
        if content is not None:
            self.contents.put(memory.content_sha256, content.encode("utf-8"))
        holder = self.table.by_id.get(memory_id)
        if holder is node:
            self._took(node, memory, gen)
            if self.store_path(node) != node.remote_path or node.gen != gen:
                self.writeback.schedule(node.ino, self.config.update_delay)
        elif holder is not None:
            holder.base_sha, holder.remote_path = memory.content_sha256, memory.path
        elif memory_id in self.pending_deletes:
            pending = self.pending_deletes[memory_id]
            pending.expected_sha, pending.remote_path = memory.content_sha256, memory.path
        self.listings.record(memory)  # patched, not dropped: a big directory costs 20 requests
        if old_remote is not None and paths.parent(old_remote) != paths.parent(memory.path):
            self.listings.vacated(paths.parent(old_remote))

    async def _update(
        self, memory_id: str, content: str | None, new_path: str | None, base_sha: str | None
    ) -> Memory:
        """Upload new content and/or a new path. New content always carries the precondition
        of the server content it was made from: no save replaces a version its writer did not
        see (a failed precondition is a conflict, ``_lost_race``)."""
        if content is not None and base_sha is None:
            raise RemoteConflictError(f"{memory_id}: no base content to check the upload against")
        expected = base_sha if content is not None else None
        try:
            return await self.upload_store.update(
                memory_id, content=content, path=new_path, expected_sha256=expected
            )
        except PathConflictError:
            if new_path is None or not await self._wait_for_path(new_path):
                raise
            return await self.upload_store.update(
                memory_id, content=content, path=new_path, expected_sha256=expected
            )

    async def _head(self, memory_id: str | None, path: str) -> Memory | None:
        """The server's memory ``memory_id`` (else the one at ``path``), content included;
        None if there is none. Transient errors propagate: the upload is retried."""
        try:
            if memory_id is None:
                found = await self.upload_store.find(path)
                if found is None:
                    return None
                memory_id = found.id
            return await self.upload_store.read(memory_id)
        except NotFoundError:
            return None

    def _lost_race(self, node: Node, winner: Memory) -> None:
        """Another writer's ``winner`` took the memory (or the path) of ``node`` first.

        As Dropbox and Syncthing do: the local content is saved as the conflict copy (queued and
        journaled before this upload's record is dropped), and the file is re-based on the
        winner: its local copy is dropped, so it shows the winner's content, and later saves
        apply to that content with its sha as precondition. The kernel's cached pages and
        attributes are invalidated at once, so an editor holding the old text sees the file
        changed on disk. The writer hears ESTALE at its next fsync/close (``_report``).
        """
        path = self.store_path(node)  # a clash's file: the memory's own path
        assert path is not None
        data = bytes(node.data) if node.data is not None else None
        self.durable.save_conflict(path, node.memory_id, data)
        content = (winner.content or "").encode("utf-8")
        self.contents.put(winner.content_sha256, content)
        moving = node.memory_id is not None and path != node.remote_path
        self.table.set_memory(node, winner.id)
        _take_remote_state(node, winner)
        node.synced_at = self._now()
        node.data = None
        node.dirty = False
        node.mtime = node.mtime_ns = None  # the winner's updated_at: the file changed on disk
        node.ctime = time.time()
        node.last_open_sha = None  # pages cached by earlier opens hold the local content
        self.deferred_versions.pop(node.ino, None)  # older than the winner
        self._upload_error(
            node,
            RemoteConflictError(
                f"{path} changed on the server; the local content was saved as a conflict copy"
            ),
        )
        self.listings.record(winner)
        self._queue_invalidations([("inode", node.ino, b"")])
        self.invalidations_due.set()
        if moving:  # a rename made here is still to be uploaded (it carries no content)
            self.writeback.schedule(node.ino, self.config.update_delay)
        elif winner.path != path and node.path == path:
            # renamed elsewhere meanwhile: follow it, as the change feed would
            if winner.path in self.table.by_path:
                self._forget_memory(node)
            else:
                parent_ino = self._parent_ino(path)
                if parent_ino is not None:
                    name = paths.basename(path).encode()
                    self._queue_invalidations([("entry", parent_ino, name)])
                self.table.bind(node, winner.path)

    def _took(self, node: Node, memory: Memory, gen: int) -> None:
        """The server acknowledged ``memory`` as the state of ``node`` at generation ``gen``."""
        _take_remote_state(node, memory)
        node.synced_at = self._now()
        if self.store_path(node) == memory.path:
            node.departed_from = None
        if node.gen == gen and node.refused is None:  # a refused content stays local
            node.dirty = False
            if node.open_count == 0:
                node.mtime = None if node.mtime is None else node.mtime
        self._drop_clean_data(node)

    async def _create(self, path: str, text: str) -> Memory:
        try:
            return await self.upload_store.create(path, text)
        except PathConflictError as exc:
            earlier = await self.durable.created_earlier(exc, path, text)
            if earlier is not None:  # our own create, answered after we had given up on it
                return earlier
            if not await self._wait_for_path(path):
                raise
            return await self.upload_store.create(path, text)

    async def _wait_for_path(self, path: str) -> bool:
        """Run queued work that frees ``path`` on the server; False if there is none."""
        for memory_id, pending in list(self.pending_deletes.items()):
            if pending.remote_path == path:
                await self.writeback.flush(_delete_key(memory_id))
                return True
        for node in list(self.table.by_id.values()):
            if node.remote_path == path and self.store_path(node) != path:
                await self.writeback.flush(node.ino)
                return True
        return False

    async def _run_delete(self, memory_id: str) -> None:
        pending = self.pending_deletes.get(memory_id)
        if pending is None:
            return
        try:
            await self.upload_store.delete(memory_id, expected_sha256=pending.expected_sha)
        except NotFoundError:
            pass
        except PreconditionFailedError:
            log.warning(
                "%s (%s) was changed on the server after it was removed here: not deleted",
                pending.remote_path,
                memory_id,
            )
            self.pending_deletes.pop(memory_id, None)
            self._drop_listing(paths.parent(pending.remote_path or "/"))
            return
        self.pending_deletes.pop(memory_id, None)
        self.tombstones.add(memory_id)
        self.retry_waiting_for_room()
        self.listings.remove(memory_id)
        self.listings.vacated(paths.parent(pending.remote_path or "/"))

    def retry_waiting_for_room(self) -> None:
        """Room may have appeared (deletes seen, directory fsync, unmount): queue the creates
        the full store refused again; those still refused come back to the set."""
        keys, self.waiting_for_room = self.waiting_for_room, set()
        for key in keys:
            self.writeback.schedule(key, 0)

    def _upload_done(self, key: Hashable, error: BaseException | None) -> None:
        """The queue let go of ``key``: uploaded, superseded, or failed for good."""
        if error is None:
            self.failed_uploads.pop(key, None)
        elif not isinstance(
            error, StoreFullError | PreconditionFailedError | PathConflictError
        ):  # a full store waits for room, a conflict is in its copy: both reported apart
            self.failed_uploads[key] = error
        self.durable.done(key, error)

    def _upload_failed(self, key: Hashable, exc: BaseException) -> None:
        if isinstance(exc, StoreFullError):
            self.waiting_for_room.add(key)
            log.warning(
                "the store is full: %s waits for room (uploaded once memories are deleted)",
                self.durable.path_of(key) or key,
            )
        if isinstance(exc, StoreArchivedError):
            log.error("the store is archived: the mount is read-only from now on")
            self.read_only = True
        if isinstance(key, tuple) and key[0] != "delete":
            log.error("%s failed: %s", key, exc)
            return
        if isinstance(key, tuple):
            pending = self.pending_deletes.pop(str(key[1]), None)
            log.error("delete of %s failed: %s", pending.remote_path if pending else key, exc)
            return
        assert isinstance(key, int)
        node = self.table.get(key)
        if node is None:
            return
        if isinstance(exc, PreconditionFailedError | PathConflictError):
            if node.path is not None:
                data = bytes(node.data) if node.data is not None else None
                self.durable.save_conflict(node.path, node.memory_id, data)
            conflict = RemoteConflictError(f"{node.path} changed on the server")
            conflict.__cause__ = exc
            self._upload_error(node, conflict)
        else:
            log.error("upload of %s failed; the local content is kept: %s", node.path, exc)
            self._upload_error(node, exc)

    async def flush_all(self) -> list[BaseException]:
        """Upload everything pending now (deferred deletes and moves included)."""
        return await self.writeback.flush_all()

    # =========================================================================================
    # remote changes

    def _queue_invalidations(self, items: list[Invalidation]) -> None:
        self._invalidations.extend(items)

    def take_invalidations(self) -> list[Invalidation]:
        for directory in self.listings.take_gone():  # asked again, it is kept or it is gone
            parent_path, name = paths.split(directory)
            parent = self.table.by_path.get(parent_path)
            if parent is not None:
                self._invalidations.append(("entry", parent.ino, name.encode()))
        items = list(self._invalidations)
        self._invalidations.clear()
        return items

    def apply_versions(self, versions: list[MemoryVersion]) -> int:
        """Apply versions reported by the change feed (any order); return how many mattered.

        Cached listings they touch are dropped; kernel invalidations are queued (the feed runs
        them from a worker thread). Nodes with local changes do not follow (conflicts).
        """
        self.usage.apply(versions)
        if self.waiting_for_room and any(v.operation == "deleted" for v in versions):
            self.retry_waiting_for_room()
        ordered = sorted(versions, key=lambda v: v.created_at)
        busy = Counter(paths.parent(v.path) for v in ordered if v.path)
        for directory, count in busy.items():
            if count > PATCH_LIMIT:
                self.listings.drop(directory)
        for version in ordered:
            self.listings.apply_version(version)  # patched, not dropped (memfs.core.cache)
            known = self.table.by_id.get(version.memory_id)
            if (
                known is not None
                and version.operation != "deleted"
                and known.base_sha == version.content_sha256
                and known.remote_path == version.path
            ):
                continue  # this mount's own upload (or already seen): nothing new
            if version.path:
                self._invalidate_new_name(version.path)
        applied = 0
        for version in ordered:
            holder = self.table.by_id.get(version.memory_id)
            if holder is None or not self.settled(holder):
                continue
            if holder.updated_at is not None and version.created_at < holder.updated_at:
                continue
            if holder.open_count > 0 and holder.data is not None:
                # open with a local copy based on the old head: a write must still meet the
                # precondition of that head (a conflict, never a silent overwrite); the change
                # is applied when the last handle closes
                self.deferred_versions.setdefault(holder.ino, []).append(version)
                continue
            if version.operation == "deleted":
                self.tombstones.add(version.memory_id)
                self.listings.vacated(paths.parent(holder.path or "/"))
                self._forget_memory(holder)
                applied += 1
                continue
            if version.path and version.path != holder.remote_path:
                self.listings.vacated(paths.parent(holder.path or "/"))
                parent_ino = self._parent_ino(holder.path)
                if parent_ino is not None and holder.path is not None:
                    name = paths.basename(holder.path).encode()
                    self._queue_invalidations([("entry", parent_ino, name)])
                if version.path in self.table.by_path:
                    self._forget_memory(holder)
                else:
                    self.table.bind(holder, version.path)
                    holder.remote_path = version.path
                applied += 1
            if version.content_sha256 and version.content_sha256 != holder.base_sha:
                holder.base_sha = version.content_sha256
                holder.remote_size = version.content_size_bytes or 0
                holder.updated_at = version.created_at
                if holder.open_count == 0:
                    holder.data = None
                self._queue_invalidations([("inode", holder.ino, b"")])
                applied += 1
        return applied

    def _invalidate_new_name(self, path: str) -> None:
        """``path`` may be new: drop the negative entry the kernel may hold for it, or for the
        first directory on the way to it that this mount does not know yet."""
        directory, name = paths.split(path)
        while True:
            parent = self.table.by_path.get(directory)
            if parent is not None and parent.is_dir:  # a file there: a clash begins, drop it too
                self._queue_invalidations([("entry", parent.ino, name.encode())])
                return
            if directory == "/":
                return
            directory, name = paths.split(directory)

    async def resync(self) -> int:
        """The change feed cannot be trusted (a gap): re-list every directory the kernel holds.

        Each listing is compared with the inodes (``children``), which queues invalidations for
        what changed. Returns the number of directories listed.
        """
        self.listings.withdraw()
        self.listings.clear()
        self.usage.forget()  # the gap may hide creates and deletes
        directories = [
            node.path
            for node in list(self.table.nodes.values())
            if node.is_dir and node.path is not None and (node.lookups > 0 or node.path == "/")
        ]
        for directory in directories:
            with contextlib.suppress(NoEntryError, NotFoundError):
                await self.children(directory)
        return len(directories)


async def run_invalidations(vfs: Vfs) -> None:
    """Hand queued kernel invalidations to the daemon's invalidator (from the feed task)."""
    items = vfs.take_invalidations()
    if items and vfs.invalidator is not None:
        await vfs.invalidator(items)
