"""Which memory a file is bound to: deferred deletes and renames (rule 3, docs/editors.md §4).

An unlinked or renamed-away memory is not deleted at once: it becomes a ``PendingDelete``
(``memfs.core.model.state``), deleted by the write-back queue when the grace window ends; a moved
file keeps its memory and remembers where it left (``Node.departed_from``). New content at a
path whose memory just left, in time, *adopts* that memory: the editor's save-by-rename or
delete-and-recreate becomes an update of the same memory, with its history.

It must not decide POSIX semantics (``vfs`` asks) nor upload anything (it queues work).
"""

from __future__ import annotations

import logging

from memfs.core.model.inodes import Node
from memfs.core.model.state import CoreState, PendingDelete, delete_key
from memfs.core.ops.copies import LocalCopies
from memfs.writeback.queue import WriteBack

log = logging.getLogger(__name__)

Identity = PendingDelete | Node  # where a file's memory can come from


class Identities:
    """Hands memories from file to file; see the module docstring."""

    def __init__(self, state: CoreState, writeback: WriteBack, copies: LocalCopies) -> None:
        self.state = state
        self.config = state.config
        self.table = state.table
        self.writeback = writeback
        self.copies = copies

    def adoptable(self, path: str) -> Identity | None:
        """The memory that left ``path`` within the grace window, if one did."""
        now = self.state.now()
        for pending in self.state.pending_deletes.values():
            key = delete_key(pending.memory_id)
            if (
                pending.local_path == path
                and now - pending.at <= self.config.grace
                and not self.writeback.running(key)
            ):
                return pending
        for node in list(self.state.departed.values()):
            if (
                node.departed_from is None
                or node.memory_id is None
                or self.table.by_id.get(node.memory_id) is not node
                or now - node.departed_at > self.config.grace
            ):
                del self.state.departed[node.ino]  # adopted, settled or too late: for good
                continue
            if (
                node.departed_from == path
                and node.path != path
                and not self.writeback.running(node.ino)
            ):
                return node
        return None

    def take_pending_delete(self, node: Node, pending: PendingDelete) -> None:
        """Rule 3: ``node`` takes the memory of a deferred delete, which is not done."""
        self.writeback.cancel(delete_key(pending.memory_id))
        del self.state.pending_deletes[pending.memory_id]
        self.table.set_memory(node, pending.memory_id)
        node.remote_path = pending.remote_path
        node.base_sha = pending.expected_sha
        node.created_at = pending.created_at
        take_description(node, pending.description, pending.new_description)

    def _move_memory(self, node: Node, old: Node) -> str:
        """``node`` takes the memory of ``old``, which keeps its content and no identity."""
        memory_id = old.memory_id
        assert memory_id is not None
        self.writeback.cancel(old.ino)
        self.table.set_memory(node, memory_id)
        node.remote_path = old.remote_path
        node.base_sha = old.base_sha
        node.created_at = old.created_at
        take_description(node, old.description, old.new_description)
        old.remote_path = None
        old.base_sha = None
        old.departed_from = None
        old.description = old.new_description = None
        return memory_id

    async def adopt(self, node: Node, path: str) -> bool:
        """Rule 3: new content at a path whose memory just left makes it an update of it."""
        source = self.adoptable(path)
        if source is None:
            return False
        if isinstance(source, PendingDelete):
            self.take_pending_delete(node, source)
            log.info("%s re-created in time: update of %s", path, source.memory_id)
            return True
        old = source
        await self.copies.ensure_data(old)
        if old.departed_from != path or old.memory_id is None:
            return False  # changed while fetching
        memory_id = self._move_memory(node, old)
        old.dirty = True
        if not old.local_only and old.path is not None:
            self.writeback.schedule(old.ino, self.config.new_file_delay, debounce=True)
        log.info("%s re-created in time: update of %s (moved-away copy is new)", path, memory_id)
        return True

    async def for_rename(self, new_path: str, dst: Node | None, new_local: bool) -> Identity | None:
        """The memory a file renamed to ``new_path`` (over ``dst``) takes instead of its own:
        the target's, else one that just left ``new_path``; None: it keeps its own."""
        if new_local:
            return None
        if dst is not None:
            return dst if dst.memory_id is not None else None
        identity = self.adoptable(new_path)
        if isinstance(identity, Node):
            await self.copies.ensure_data(identity)
            if identity.departed_from != new_path or identity.memory_id is None:
                return None
        return identity

    def take(self, src: Node, identity: Identity | None, dst: Node | None) -> bool:
        """``src`` (renamed over ``dst``) takes the memory of ``identity``; False: none."""
        if isinstance(identity, PendingDelete):
            self.take_pending_delete(src, identity)
            return True
        if identity is None:
            return False
        self._move_memory(src, identity)
        if identity is not dst and identity.path is not None:
            identity.dirty = True  # the moved-away copy is a new file
            if not identity.local_only:
                self.writeback.schedule(identity.ino, self.config.new_file_delay, debounce=True)
        return True

    def detach_memory(self, node: Node, local_path: str) -> None:
        """Rule 3: the memory of ``node`` leaves; it is deleted when the grace window ends."""
        memory_id = node.memory_id
        if memory_id is None:
            return
        self.state.pending_deletes[memory_id] = PendingDelete(
            memory_id=memory_id,
            expected_sha=node.base_sha,
            remote_path=node.remote_path,
            local_path=local_path,
            at=self.state.now(),
            created_at=node.created_at,
            description=node.description,
            new_description=node.new_description,
        )
        self.table.set_memory(node, None)
        node.remote_path = None
        node.base_sha = None
        node.departed_from = None
        node.description = node.new_description = None
        self.writeback.cancel(node.ino)
        self.writeback.schedule(delete_key(memory_id), self.config.grace)


def take_description(node: Node, description: str | None, new_description: str | None) -> None:
    """``node`` takes a memory's description (``memfs.core.ops.descriptions``): the one the store
    has, and one set under its old name and not yet uploaded (unless ``node`` has its own)."""
    node.description = description
    if node.new_description is None:
        node.new_description = new_description
