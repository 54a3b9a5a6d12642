"""Directory views: the store's listings merged with the local state, and the kernel
invalidations that keep the kernel's copies of them true.

Owns what a directory shows (``children``, ``child``): a memory of a listing appears as a file
node (a clash's file at a derived name, ``memfs.core.model.clashes``), a prefix as a directory;
local nodes (new files, files with changes, directories made here) win over the listing; a settled
node missing from a newer listing was deleted on the server and is forgotten. Also the names
an entry may have (``decode_name``, ``new_path``, ``file_path``: paths outside the rules where
an entry already has them) and the directories kept after their last entry left
(``keep_parent``: ``rm -r`` then ``rmdir`` works). It queues the kernel invalidations of the
core (``queue_invalidations``); the mount runs them from a worker thread
(``Vfs.run_invalidations``). Applying the change feed's versions is ``memfs.core.ops.remote``'s.

It must not change a file's content or memory on its own (a settled node only follows the
server) nor upload anything.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import trio

from memfs.contract import paths
from memfs.contract.errors import InvalidNameError, NameTooLongError
from memfs.contract.models import ListItem, Memory, MemoryPrefix
from memfs.contract.retry import is_transient
from memfs.contract.store_api import StoreAPI, list_directory
from memfs.core.fetch.cache import Listing, ListingCache, listing_name
from memfs.core.fetch.orphans import StoreGone
from memfs.core.fetch.prefetch import BulkFetcher
from memfs.core.model.clashes import base_name, derived_name
from memfs.core.model.config import RESERVED_ROOT_NAMES
from memfs.core.model.inodes import Kind, Node
from memfs.core.model.state import CoreState
from memfs.writeback.queue import WriteBack

log = logging.getLogger(__name__)

Invalidation = tuple[str, int, bytes]  # ("inode", ino, b"") or ("entry", parent_ino, name)
Invalidator = Callable[[list[Invalidation]], Awaitable[None]]


def decode_name(raw: bytes, *, max_bytes: int | None = None) -> str:
    """A name from the kernel as text; non-UTF-8 names are invalid, and names over
    ``max_bytes``. In the store's tree a name over 255 bytes may be an entry's (stored by an
    older server or another implementation): it is found; a new one is refused where it would
    be made (``Namespace.new_path``), an absent one is ENAMETOOLONG (``Vfs._child``)."""
    if max_bytes is not None and len(raw) > max_bytes:
        raise NameTooLongError(f"name longer than {max_bytes} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidNameError("name is not UTF-8") from None


def check_store_path(path: str) -> None:
    """Raise the errno of a path the store refuses: ENAMETOOLONG over 1,024 bytes, EINVAL for
    any other rule (more than 20 segments, a bad character; docs/semantics.md "Errors")."""
    try:
        paths.validate_path(path)
    except paths.PathTooLongError as exc:
        raise NameTooLongError(f"{path}: {exc}") from None
    except paths.PathError as exc:
        raise InvalidNameError(f"{path}: {exc}") from None


def _valid_name(name: str) -> bool:
    """Whether ``name`` can be one segment of a path the store takes."""
    try:
        paths.check_segment(name)
    except paths.PathError:
        return False
    return True


def take_remote_state(node: Node, memory: Memory) -> None:
    """``node`` is bound to ``memory`` as the server has it (path, content hash, size, times)."""
    node.remote_path = memory.path
    node.base_sha = memory.content_sha256
    node.remote_size = memory.content_size_bytes
    node.created_at = memory.created_at
    node.updated_at = memory.updated_at
    if memory.description is not None:
        node.description = memory.description


class Namespace:
    """The directories of one mount as the kernel sees them; see the module docstring."""

    def __init__(
        self,
        state: CoreState,
        store: StoreAPI,
        listings: ListingCache,
        bulk: BulkFetcher,
        gone: StoreGone,
        writeback: WriteBack,
    ) -> None:
        self.state = state
        self.config = state.config
        self.table = state.table
        self.store = store  # short deadlines: a syscall waits on these calls
        self.listings = listings
        self.bulk = bulk
        self.gone = gone
        self.writeback = writeback  # asked only whether a node has work queued (``settled``)
        self._invalidations: list[Invalidation] = []
        # set when queued invalidations must not wait for the change feed's next batch (a
        # conflict re-based a file): ``ChangeFeed.run_due_invalidations`` runs them
        self._due = trio.Event()

    # -- which nodes follow the server --------------------------------------------------------

    def settled(self, node: Node) -> bool:
        return (
            node.kind is Kind.FILE
            and node.memory_id is not None
            and not node.local_only
            and not node.dirty
            and node.path is not None
            and self.state.store_path(node) == node.remote_path
            and not self.writeback.pending(node.ino)
        )

    def settled_remote(self, node: Node, started: float) -> bool:
        """Settled and last heard of before a listing that began at ``started``."""
        return self.settled(node) and node.synced_at <= started

    # -- listings -----------------------------------------------------------------------------

    async def _listing(self, directory: str) -> Listing:
        cached = self.listings.get(directory)
        if cached is None:  # a bulk fetch of the directory (walk readahead) brings its listing
            cached = await self.bulk.listing(directory)
        if cached is not None:
            return cached
        started = self.state.now()
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

    def drop_listing(self, *dirs: str | None) -> None:
        for directory in dirs:
            if directory is not None:
                self.listings.drop(directory)

    def _apply_memory(self, node: Node, memory: Memory, started: float) -> None:
        """Take the server's view of a settled node from a listing or answer."""
        if not self.settled(node) or node.synced_at > started:
            return
        if node.open_count > 0 and node.data is not None:
            return  # the open copy keeps its base (see RemoteChanges.apply_versions)
        if node.base_sha != memory.content_sha256:
            if node.base_sha is not None:
                self.queue_invalidations([("inode", node.ino, b"")])
            node.base_sha = memory.content_sha256
            if node.open_count == 0:
                node.data = None
        node.remote_size = memory.content_size_bytes
        node.created_at = memory.created_at
        node.updated_at = memory.updated_at

    def _memory_node(self, memory: Memory, shown: str) -> Node:
        node = self.table.new(Kind.FILE, shown)
        self.table.set_memory(node, memory.id)
        take_remote_state(node, memory)
        node.ctime = memory.updated_at.timestamp()
        return node

    def _dir_kept(self, path: str) -> bool:
        if path in self.state.local_dirs:
            return True
        for node in self.table.below(path):
            if not node.is_dir and not self.settled(node):
                return True
            if node.is_dir and node.path in self.state.local_dirs:
                return True
        return False

    # -- entries ------------------------------------------------------------------------------

    async def children(self, directory: str) -> dict[str, Node]:
        """The entries of ``directory``: name -> node (nodes are created as needed)."""
        listing = await self._listing(directory)
        now = self.state.now()
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
        now = self.state.now()
        self._count_subdirs(directory, listing, now)
        found = None
        path = paths.join(directory, name)
        clashing = base_name(name)  # ``x.file-clash`` is the memory ``x`` when x clashes
        items = listing.named(name) + (listing.named(clashing) if clashing is not None else ())
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

    def _count_subdirs(self, directory: str, listing: Listing, now: float) -> None:
        """Give every subdirectory of a listed ``directory`` its node, as ``children`` does, so
        that its nlink is counted (once per directory): an uncounted one is asked for again at
        every path walk through it (``memfs.mount.fuse_ops.entry``), a request more per file
        written below a directory nobody listed."""
        merged = self.table.by_path.get(directory)
        if merged is None or merged.subdirs_known:
            return
        for item in listing.items:
            if isinstance(item, MemoryPrefix):
                self._listed_entry(directory, item, listing, now)
        merged.subdirs_known = True

    def _listed_entry(
        self, directory: str, item: ListItem, listing: Listing, now: float
    ) -> Node | None:
        """The node a listing item stands for, merged with local state (None: not shown)."""
        if isinstance(item, MemoryPrefix):
            path = item.path.rstrip("/")
            removed = self.state.removed_dirs.get(path)
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
        if memory.id in self.state.tombstones or memory.id in self.state.pending_deletes:
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
                # renamed on the server, or a name clash began or ended (memfs.core.model.clashes)
                self.drop_listing(paths.parent(holder.path or "/"))
                self._forget_entry(holder.path)
                self.table.bind(holder, shown)
                holder.remote_path = memory.path
            if shown == memory.path:
                self.state.clashes.resolved(memory.id)
            self._apply_memory(holder, memory, known_at)
            return holder
        occupant = self.table.by_path.get(shown)
        if occupant is not None and not self._yields(occupant, known_at):
            return None  # a local file or directory wins
        if occupant is not None:
            self.table.unbind(occupant)
        if shown == memory.path:
            self.state.clashes.resolved(memory.id)
        return self._memory_node(memory, shown)

    def _shown_path(self, directory: str, memory: Memory, listing: Listing) -> str:
        """Where the mount shows ``memory``: its path, or a derived name when a directory of
        the same name exists (memfs.core.model.clashes; noted and logged once)."""
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
        self.state.clashes.note(memory.id, memory.path, shown)
        return shown

    def _yields(self, occupant: Node, known_at: float) -> bool:
        """Whether a node bound where a listed memory goes gives way to it: a settled memory
        not heard of since, or a directory nothing keeps any more (a clash that ended)."""
        if occupant.is_dir:
            return occupant.path is not None and not self._dir_kept(occupant.path)
        return self.settled_remote(occupant, known_at)

    def _local_entry(self, directory: str, name: str, node: Node, listing: Listing) -> bool:
        """Whether a local node the listing does not show is an entry; forgets what is gone."""
        if node.is_dir:
            if self._dir_kept(paths.join(directory, name)):
                return True
            parent = self.table.by_path.get(directory)
            if parent is not None:  # the kernel may still hold its entry
                self.queue_invalidations([("entry", parent.ino, name.encode())])
            self.table.unbind(node)
            return False
        if self.settled_remote(node, listing.known_at(node.memory_id)):
            # a settled memory missing from a newer listing was deleted on the server
            self.forget_memory(node)
            return False
        return True

    # -- names --------------------------------------------------------------------------------

    def new_path(self, parent_path: str, name: str) -> str:
        """The path of a new entry ``name`` in ``parent_path``, validated."""
        if len(name.encode("utf-8")) > paths.MAX_NAME_BYTES:
            raise NameTooLongError(f"name longer than {paths.MAX_NAME_BYTES} bytes")
        if parent_path == "/" and name in RESERVED_ROOT_NAMES:
            raise InvalidNameError(f"/{name} is reserved")
        path = paths.join(parent_path, name)
        if self.state.is_local_path(path):
            if name in (".", "..") or "/" in name or "\0" in name:
                raise InvalidNameError(f"invalid name {name!r}")
            return path
        check_store_path(path)
        return path

    def file_path(self, parent_path: str, name: str, *, entry_there: bool) -> tuple[str, bool]:
        """The path of a file ``name`` in ``parent_path`` (created, or renamed there) and
        whether it stays local-only. Entries stored by an older server or another implementation
        may have paths outside the store's rules (docs/semantics.md "Databricks stores"); a
        path outside them is accepted in two cases only:
        - ``entry_there``: a save at the path updates an entry of the store that has it (the
          rename target's, or one that just left it): nothing is created there;
        - the name is valid and only its directory breaks a rule, a directory of the store's
          (only such entries make one: a directory made here 20 levels deep still holds no
          file): the new file stays local-only, so a tool's temporary file works (``sed -i``),
          and its rename onto an entry saves that entry; it is never uploaded."""
        path = paths.join(parent_path, name)
        if entry_there:
            return path, False
        try:
            return self.new_path(parent_path, name), self.state.is_local_path(path)
        except NameTooLongError:
            raise
        except InvalidNameError:
            made_here = parent_path in self.state.local_dirs and paths.is_valid_path(parent_path)
            if parent_path == "/" or made_here or not _valid_name(name):
                raise
        log.info("%s: the store refuses its directory's path: a new file there stays local", path)
        return path, True

    def keep_parent(self, path: str) -> None:
        """Keep the directory of ``path`` after its entry leaves (rm -r then rmdir works)."""
        directory = paths.parent(path)
        if directory != "/":
            self.state.local_dirs.add(directory)
        self.state.removed_dirs.pop(directory, None)

    # -- nodes leaving ------------------------------------------------------------------------

    def forget_memory(self, node: Node) -> None:
        """``node`` no longer stands for a memory nor has a name (deleted, or its name taken)."""
        parent_ino = self.parent_ino(node.path)
        name = paths.basename(node.path) if node.path else ""
        self.table.set_memory(node, None)
        self.table.unbind(node)
        if parent_ino is not None:
            self.queue_invalidations([("entry", parent_ino, name.encode())])

    def parent_ino(self, path: str | None) -> int | None:
        if path is None:
            return None
        parent = self.table.by_path.get(paths.parent(path))
        return parent.ino if parent is not None else None

    # -- kernel invalidations -----------------------------------------------------------------

    def queue_invalidations(self, items: list[Invalidation]) -> None:
        self._invalidations.extend(items)

    def _forget_entry(self, path: str | None) -> None:
        """The kernel must look ``path`` up again (its node moved to another name)."""
        parent_ino = self.parent_ino(path)
        if parent_ino is not None and path is not None:
            self.queue_invalidations([("entry", parent_ino, paths.basename(path).encode())])

    def invalidate_now(self, items: list[Invalidation]) -> None:
        """Queue ``items`` and have them run without waiting for the change feed's next batch."""
        self.queue_invalidations(items)
        self._due.set()

    async def invalidations_due(self) -> None:
        """Return when ``invalidate_now`` was called (since the last return)."""
        await self._due.wait()
        self._due = trio.Event()

    def take_invalidations(self) -> list[Invalidation]:
        for directory in self.listings.take_gone():  # asked again, it is kept or it is gone
            parent_path, name = paths.split(directory)
            parent = self.table.by_path.get(parent_path)
            if parent is not None:
                self._invalidations.append(("entry", parent.ino, name.encode()))
        items = list(self._invalidations)
        self._invalidations.clear()
        return items
