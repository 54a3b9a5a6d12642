"""Uploads: what the write-back queue runs for each key (``sync``), and what its outcome means.

Owns the requests that make the server match a file (create, update with the precondition of
the content it was based on, move), deferred deletes, and the answers: the inode is bound to
the memory's new state (``_took``); a failed precondition or a path taken by another writer is a
conflict (``_lost_race``: the local content saved as a conflict copy, the file re-based on the
winner); a full store parks a create until room appears (``waiting_for_room``; content that
lives in no file, a conflict copy or a replayed create, first becomes a new file of the mount:
``waits_as_file``); a failure for good reaches the opens that wrote
(``OpenFiles.upload_failed``) and a directory fsync. Also the fsync side of the queue:
``settle`` (one key, with patience) and the moves of a directory rename (``move_tree``, after
``check_move`` found every new path valid).

It must not decide POSIX semantics (``vfs``) nor journal anything itself (the queue's hooks
call ``durable``). Every ``await`` here may see other operations run meanwhile: state read
before one is checked again after it (the generation check, ``memfs.core``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Hashable

import trio

from memfs.contract import paths
from memfs.contract.errors import (
    NoSpaceError,
    NotFoundError,
    PathConflictError,
    PreconditionFailedError,
    RemoteConflictError,
    RemoteUnavailableError,
    StoreArchivedError,
    StoreFullError,
)
from memfs.contract.models import Memory, sha256_hex
from memfs.contract.retry import is_transient
from memfs.contract.store_api import StoreAPI
from memfs.core.fetch.cache import ContentCache, ListingCache
from memfs.core.fetch.orphans import StoreGone
from memfs.core.model.budget import LocalBudget
from memfs.core.model.handles import OpenFiles
from memfs.core.model.inodes import Kind, Node
from memfs.core.model.state import CoreState, PendingDelete, delete_key
from memfs.core.ops.commit import utf8
from memfs.core.ops.copies import LocalCopies
from memfs.core.ops.durable import Access, Durable
from memfs.core.ops.identity import Identities
from memfs.core.ops.namespace import Namespace, check_store_path, take_remote_state
from memfs.writeback.queue import WriteBack

log = logging.getLogger(__name__)


class Uploader:
    """The upload function of one mount's write-back queue; see the module docstring."""

    def __init__(
        self,
        state: CoreState,
        *,
        store: StoreAPI,
        upload_store: StoreAPI,
        writeback: WriteBack,
        durable: Durable,
        contents: ContentCache,
        listings: ListingCache,
        gone: StoreGone,
        namespace: Namespace,
        identities: Identities,
        files: OpenFiles,
        copies: LocalCopies,
        budget: LocalBudget,
    ) -> None:
        self.state = state
        self.config = state.config
        self.table = state.table
        self.store = store  # short deadlines: a directory rename waits on its moves
        self.upload_store = upload_store  # long deadlines: background uploads
        self.writeback = writeback
        self.durable = durable
        self.contents = contents
        self.listings = listings
        self.gone = gone
        self.namespace = namespace
        self.identities = identities
        self.files = files
        self.copies = copies
        self.budget = budget  # content the store could not take is charged (``_held_back``)

    async def sync(self, key: Hashable) -> None:
        """Make the server match one inode (or run one pending delete); once the store is gone
        (a 404 for the store itself), nothing is tried any more (memfs.core.fetch.orphans)."""
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
        if self.state.read_only:  # archived while mounted: nothing more reaches the store
            raise StoreArchivedError(f"the store is archived: {node.path} cannot be uploaded")
        if node.path is None or node.local_only:
            return
        refused = node.refused is not None  # the committed content is refused: not uploaded
        if refused and node.memory_id is None:
            return  # not created (memfs.core.ops.refusals)
        path = self.state.store_path(node)
        assert path is not None
        gen = node.gen
        text = None
        if node.data is not None and not refused:
            text = utf8(node.data)
            if text is None:
                return  # written since its commit, not yet committed: the writer's commit decides
        description = node.new_description
        if node.memory_id is None:
            try:
                memory = await self._create(path, text or "", description)
            except PathConflictError as exc:
                # another writer made this path first: its memory is the winner (if it is one)
                winner = await self._head(exc.conflicting_memory_id, path)
                if winner is None or winner.path != path or winner.id in self.table.by_id:
                    raise
                if node.memory_id is not None or self.state.store_path(node) != path:
                    return  # renamed (or over a memory) meanwhile: its next run decides
                self._lost_race(node, winner)
                return
            self.state.store_full = False  # it took a new memory
            self.contents.put(memory.content_sha256, (text or "").encode("utf-8"))
            if node.memory_id is not None:
                # renamed over a memory file while this create ran: that memory is the file's
                # (rule 3), and the one just made is nobody's
                self._disown(memory, path)
                return
            self.table.set_memory(node, memory.id)
            self._took(node, memory, gen, description)
            if node.path is None or node.local_only:
                # unlinked or renamed to a local name while it was being created
                self.identities.detach_memory(node, path)
                self.writeback.schedule(delete_key(memory.id), 0)
            elif self.state.store_path(node) != node.remote_path or node.gen != gen:
                self.writeback.schedule(node.ino, self.config.update_delay)
            self.listings.record(memory)
            return
        memory_id = node.memory_id
        content = None
        if text is not None and sha256_hex(text) != node.base_sha:
            content = text
        new_path = path if path != node.remote_path else None
        old_remote = node.remote_path
        if content is None and new_path is None and description is None:
            if node.gen == gen and not refused:
                node.dirty = False
            node.departed_from = None
            self.copies.drop_clean_data(node)
            return
        try:
            memory = await self._update(memory_id, content, new_path, node.base_sha, description)
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
            if memory.id != memory_id:  # a move the API made as create + delete: a new memory
                self.table.set_memory(node, memory.id)
                self.listings.remove(memory_id)  # the old one is deleted
            self._took(node, memory, gen, description)
            if self.state.store_path(node) != node.remote_path or node.gen != gen:
                self.writeback.schedule(node.ino, self.config.update_delay)
        elif holder is not None:
            holder.base_sha, holder.remote_path = memory.content_sha256, memory.path
        elif memory_id in self.state.pending_deletes:
            pending = self.state.pending_deletes[memory_id]
            pending.expected_sha, pending.remote_path = memory.content_sha256, memory.path
        self.listings.record(memory)  # patched, not dropped: a big directory costs 20 requests
        if old_remote is not None and paths.parent(old_remote) != paths.parent(memory.path):
            self.listings.vacated(paths.parent(old_remote))

    def _disown(self, memory: Memory, path: str) -> None:
        """Delete ``memory``, made for a file that no longer stands for it (a deferred delete:
        re-created at ``path`` in time, it is adopted)."""
        self.state.pending_deletes[memory.id] = PendingDelete(
            memory_id=memory.id,
            expected_sha=memory.content_sha256,
            remote_path=memory.path,
            local_path=path,
            at=self.state.now(),
            created_at=memory.created_at,
        )
        self.writeback.schedule(delete_key(memory.id), 0)

    async def _update(
        self,
        memory_id: str,
        content: str | None,
        new_path: str | None,
        base_sha: str | None,
        description: str | None = None,
    ) -> Memory:
        """Upload new content and/or a new path. New content always carries the precondition
        of the server content it was made from: no save replaces a version its writer did not
        see (a failed precondition is a conflict, ``_lost_race``)."""
        if content is not None and base_sha is None:
            raise RemoteConflictError(f"{memory_id}: no base content to check the upload against")
        expected = base_sha if content is not None else None
        # a description only to an API that keeps them (``memfs.core.ops.descriptions``)
        extra = {} if description is None else {"description": description}
        try:
            return await self.upload_store.update(
                memory_id, content=content, path=new_path, expected_sha256=expected, **extra
            )
        except PathConflictError:
            if new_path is None or not await self._wait_for_path(new_path):
                raise
            return await self.upload_store.update(
                memory_id, content=content, path=new_path, expected_sha256=expected, **extra
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
        changed on disk. The writer hears ESTALE at its next fsync/close (``OpenFiles.report``).
        """
        path = self.state.store_path(node)  # a clash's file: the memory's own path
        assert path is not None
        data = bytes(node.data) if node.data is not None else None
        self.durable.save_conflict(path, node.memory_id, data)
        content = (winner.content or "").encode("utf-8")
        self.contents.put(winner.content_sha256, content)
        moving = node.memory_id is not None and path != node.remote_path
        self.table.set_memory(node, winner.id)
        take_remote_state(node, winner)
        node.synced_at = self.state.now()
        node.data = None
        node.dirty = False
        node.mtime = node.mtime_ns = None  # the winner's updated_at: the file changed on disk
        node.ctime = time.time()
        node.last_open_sha = None  # pages cached by earlier opens hold the local content
        self.state.deferred_versions.pop(node.ino, None)  # older than the winner
        self.files.upload_failed(
            node,
            RemoteConflictError(
                f"{path} changed on the server; the local content was saved as a conflict copy"
            ),
        )
        self.listings.record(winner)
        self.namespace.invalidate_now([("inode", node.ino, b"")])
        if moving or node.new_description is not None:
            # a rename or a description set here is still to be uploaded (without content)
            self.writeback.schedule(node.ino, self.config.update_delay)
        elif winner.path != path and node.path == path:
            # renamed elsewhere meanwhile: follow it, as the change feed would
            if winner.path in self.table.by_path:
                self.namespace.forget_memory(node)
            else:
                parent_ino = self.namespace.parent_ino(path)
                if parent_ino is not None:
                    name = paths.basename(path).encode()
                    self.namespace.queue_invalidations([("entry", parent_ino, name)])
                self.table.bind(node, winner.path)

    def _took(self, node: Node, memory: Memory, gen: int, description: str | None = None) -> None:
        """The server acknowledged ``memory`` as the state of ``node`` at generation ``gen``
        (and ``description``, the pending one it carried)."""
        self.state.store_away = False
        take_remote_state(node, memory)
        if description is not None and node.new_description == description:
            node.new_description = None  # uploaded, and not changed again meanwhile
        node.synced_at = self.state.now()
        if self.state.store_path(node) == memory.path:
            node.departed_from = None
        if node.gen == gen and node.refused is None:  # a refused content stays local
            node.dirty = False
            if node.open_count == 0:
                node.mtime = None if node.mtime is None else node.mtime
        self.copies.drop_clean_data(node)

    async def _create(self, path: str, text: str, description: str | None = None) -> Memory:
        extra = {} if description is None else {"description": description}
        try:
            return await self.upload_store.create(path, text, **extra)
        except PathConflictError as exc:
            earlier = await self.durable.created_earlier(exc, path, text)
            if earlier is not None:  # our own create, answered after we had given up on it
                return earlier
            if not await self._wait_for_path(path):
                raise
            return await self.upload_store.create(path, text, **extra)

    async def _wait_for_path(self, path: str) -> bool:
        """Run queued work that frees ``path`` on the server; False if there is none."""
        for memory_id, pending in list(self.state.pending_deletes.items()):
            if pending.remote_path == path:
                await self.writeback.flush(delete_key(memory_id))
                return True
        for node in list(self.table.by_id.values()):
            if node.remote_path == path and self.state.store_path(node) != path:
                await self.writeback.flush(node.ino)
                return True
        return False

    async def _run_delete(self, memory_id: str) -> None:
        pending = self.state.pending_deletes.get(memory_id)
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
            self.state.pending_deletes.pop(memory_id, None)
            self.namespace.drop_listing(paths.parent(pending.remote_path or "/"))
            return
        self.state.pending_deletes.pop(memory_id, None)
        self.state.tombstones.add(memory_id)
        self.retry_waiting_for_room()
        self.listings.remove(memory_id)
        self.listings.vacated(paths.parent(pending.remote_path or "/"))

    def waits_as_file(self, path: str, data: bytes, description: str | None) -> Node:
        """A new file of the mount at ``path`` (free here) holding ``data``: content the full
        store refused that lives in no file (a conflict copy, a replayed create). Visible and
        readable while it waits for room, queued (so journaled before the record it came from
        is dropped) and uploaded as any new file; the mount's owner and mode."""
        node = self.table.new(Kind.FILE, path)
        node.data = bytearray(data)
        node.new_description = description
        node.dirty = True
        node.gen += 1
        node.mtime = node.ctime = time.time()
        self.state.store_full = True
        self._held_back(node, True)  # accepted already: charged even past the budget
        parent_ino = self.namespace.parent_ino(path)
        if parent_ino is not None:  # a negative entry the kernel may keep for the name
            name = paths.basename(path).encode()
            self.namespace.queue_invalidations([("entry", parent_ino, name)])
        self.writeback.schedule(node.ino, 0)
        log.warning("%s waits for room as a file of the mount (the store is full)", path)
        return node

    def copy_created(self, memory: Memory, access: Access) -> None:
        """A conflict copy just created: shown with the mode and owner of the file it comes
        from (the store keeps none), so a private file's text stays private; a file without
        its own keeps the mount's, as listed."""
        if access == (None, None, None):
            return
        node = self.table.by_id.get(memory.id)  # a listing may have shown it meanwhile
        if node is None:
            if memory.path in self.table.by_path:
                return  # another file of the mount has the name: the listing decides
            node = self.table.new(Kind.FILE, memory.path)
            self.table.set_memory(node, memory.id)
            take_remote_state(node, memory)
            node.synced_at = self.state.now()
            node.ctime = memory.updated_at.timestamp()
        if (node.mode, node.uid, node.gid) == (None, None, None):
            node.mode, node.uid, node.gid = access

    def retry_waiting_for_room(self) -> None:
        """Room may have appeared (deletes seen, directory fsync, unmount): queue the creates
        the full store refused again; those still refused come back to the set."""
        keys, self.state.waiting_for_room = self.state.waiting_for_room, set()
        for key in keys:
            self.writeback.schedule(key, 0)

    # -- hooks of the write-back queue --------------------------------------------------------

    def _held_back(self, node: Node, held: bool) -> None:
        """``node``'s content is one the store could not take (``held``), or no longer: its
        charge on the local budget follows."""
        node.held_back = held
        self.budget.charge(node)

    def queued(self, key: Hashable) -> None:
        """The queue recorded work for ``key`` (its ``on_queued``): content that will wait
        (a new file while the store is full, any file while the server is away) is held back
        at once; then journaled."""
        node = self.table.get(key) if isinstance(key, int) else None
        full = self.state.store_full and node is not None and node.memory_id is None
        if node is not None and node.dirty and (full or self.state.store_away):
            self._held_back(node, True)
        self.durable.queued(key)

    def retried(self, key: Hashable, error: BaseException) -> None:
        """A transient failure of ``key`` (the queue's ``on_retry``): its content waits here
        for the server, charged to the local budget meanwhile."""
        self.state.store_away = True
        node = self.table.get(key) if isinstance(key, int) else None
        if node is not None:
            self._held_back(node, True)
        self.durable.retry(key, error)

    def done(self, key: Hashable, error: BaseException | None) -> None:
        """The queue let go of ``key``: uploaded, superseded, or failed for good."""
        node = self.table.get(key) if isinstance(key, int) else None
        if node is not None and error is None:
            self._held_back(node, False)  # uploaded, or removed (``cancel``)
        if error is None:
            self.state.failed_uploads.pop(key, None)
        elif not isinstance(
            error, StoreFullError | PreconditionFailedError | PathConflictError
        ):  # a full store waits for room, a conflict is in its copy: both reported apart
            self.state.failed_uploads[key] = error
        self.durable.done(key, error)

    def failed(self, key: Hashable, exc: BaseException) -> None:
        """The upload of ``key`` failed for good (the queue's ``on_failure``)."""
        if isinstance(exc, StoreFullError):
            self.state.waiting_for_room.add(key)
            self.state.store_full = True
            log.warning(
                "the store is full: %s waits for room (uploaded once memories are deleted)",
                self.durable.path_of(key) or key,
            )
        if isinstance(exc, StoreArchivedError):
            log.error("the store is archived: the mount is read-only from now on")
            self.state.read_only = True
        if isinstance(key, tuple) and key[0] != "delete":
            log.error("%s failed: %s", key, exc)
            return
        if isinstance(key, tuple):
            pending = self.state.pending_deletes.pop(str(key[1]), None)
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
            self.files.upload_failed(node, conflict)
        else:  # a full store included: it waits for room
            log.error("upload of %s failed; the local content is kept: %s", node.path, exc)
            self._held_back(node, True)
            self.files.upload_failed(node, exc)

    # -- what fsync and a directory rename wait for --------------------------------------------

    async def flush_all(self, *, patience: float = 0.0) -> list[BaseException]:
        """Upload everything pending now (deferred deletes and moves included)."""
        return await self.writeback.flush_all(patience=patience)

    async def settle(self, key: Hashable) -> None:
        """fsync: upload ``key`` now, retrying transient failures for ``fsync_timeout``."""
        try:
            await self.writeback.flush(key, patience=self.config.fsync_timeout)
        except Exception as exc:
            raise self._gave_up(exc) from None

    def _gave_up(self, exc: BaseException) -> BaseException:
        """The error fsync reports; a transient one (EIO) says the change stays queued."""
        if _still_retried(exc):
            error = RemoteUnavailableError(
                f"not uploaded within {self.config.fsync_timeout:g} s ({exc}); kept in the "
                "journal and retried in the background"
            )
            error.__cause__ = exc
            return error
        return exc

    async def settle_all(self) -> None:
        """fsync of a directory: upload everything pending, creates waiting for room included;
        ENOSPC while one still waits, ESTALE if an upload lost a race (its content is in a
        conflict copy), else the first upload that failed for good since the last one."""
        self.retry_waiting_for_room()
        conflicts = self.durable.conflict_count
        errors = await self.writeback.flush_all(patience=self.config.fsync_timeout)
        # permanent failures of this pass are reported below in their own words (waiting for
        # room, a conflict copy, failed_uploads); what is still retried comes first
        unavailable = [e for e in errors if _still_retried(e)]
        if unavailable:
            raise self._gave_up(unavailable[0])
        if self.state.waiting_for_room:
            waiting = len(self.state.waiting_for_room)
            raise NoSpaceError(f"the store is full: {waiting} file(s) wait")
        if self.durable.conflict_count > conflicts:
            raise RemoteConflictError(
                "changed on the server meanwhile; the local content was saved as a conflict copy"
            )
        if self.state.failed_uploads:  # failed in the background, before this fsync
            key, error = next(iter(self.state.failed_uploads.items()))
            for told in [k for k in self.state.failed_uploads if not isinstance(k, int)]:
                del self.state.failed_uploads[told]  # nothing will retry it: reported once
            log.info("directory fsync: %s failed for good: %s", self.durable.describe(key), error)
            raise error
        if errors:
            raise errors[0]  # failed for good, and none of the above says how

    async def check_move(self, old_path: str, new_path: str) -> None:
        """Before a directory rename moves anything: every path below ``old_path`` (memories
        of the store, files and directories of this mount) must be a valid path below
        ``new_path`` (EINVAL past 20 segments, ENAMETOOLONG past 1,024 bytes), so that a refused
        rename changes nothing here or on the server. The store is listed only when the new
        paths are longer (in segments or bytes) than the old ones."""
        below = [node.path for node in self.table.below(old_path) if node.path is not None]
        below += [d for d in self.state.local_dirs if paths.is_below(d, old_path)]
        longer = _segments(new_path) > _segments(old_path) or len(new_path.encode()) > len(
            old_path.encode()
        )
        if longer and not self.state.is_local_path(new_path):
            async for item in self.store.list_below(paths.as_prefix(old_path)):
                if item.id not in self.state.tombstones:
                    below.append(item.path)
        for path in below:
            target = new_path + path[len(old_path) :]
            if not self.state.is_local_path(target):
                check_store_path(target)

    async def move_tree(self, old_path: str, new_path: str) -> None:
        """A directory rename on the server: every memory below ``old_path`` moves (one request
        each; not atomic), after what is queued below it has run (so the server's paths are the
        ones the mount knows)."""
        for node in self.table.below(old_path):
            if self.writeback.pending(node.ino):
                await self.writeback.flush(node.ino)
        for key in list(self.state.pending_deletes):
            pending = self.state.pending_deletes.get(key)  # done or adopted while we waited
            if pending and pending.remote_path and paths.is_below(pending.remote_path, old_path):
                await self.writeback.flush(delete_key(key))
        if self.state.is_local_path(old_path) or self.state.is_local_path(new_path):
            return
        async for item in self.store.list_below(paths.as_prefix(old_path)):
            if item.id in self.state.tombstones:
                continue
            target = new_path + item.path[len(old_path) :]
            check_store_path(target)  # made elsewhere since ``check_move``: the rest stays
            updated = await self.store.update(item.id, path=target)
            holder = self.table.by_id.get(item.id)
            if updated.id != item.id:  # moved as create + delete: a new memory
                self.listings.remove(item.id)
                if holder is not None:
                    self.table.set_memory(holder, updated.id)
            if holder is not None:
                holder.remote_path = updated.path
                holder.synced_at = self.state.now()


def _segments(path: str) -> int:
    return path.strip("/").count("/") + 1


def _still_retried(exc: BaseException) -> bool:
    """A failure the queue keeps retrying: the server was away, or the wait ran out."""
    return isinstance(exc, trio.TooSlowError) or is_transient(exc)
