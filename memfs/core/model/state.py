"""The state the objects of one core share: the inode table and what the core knows besides it.

One ``CoreState`` per mount, made by ``memfs.core.build`` and handed to each collaborator
(``vfs``, ``namespace``, ``identity``, ``uploader``, ``durable``...), which read and change it
on the trio thread only (the concurrency rule: ``memfs.core``). It must not hold behaviour
beyond plain questions about that state, nor dirty data: that lives on the inode
(``Node.data``) only.

Invariants (besides those of ``inodes``):
- a node is *settled* when it stands for a memory, has no local change and nothing queued; only
  settled nodes follow remote listings and the change feed (``Namespace.settled``);
- a memory id is held by at most one of: a node (``table.by_id``), a pending delete
  (``pending_deletes``);
- a pending delete is adoptable (rule 3, ``identity``) until its grace window ends or its
  delete runs; a memory id in ``tombstones`` was deleted by this mount and is never shown again.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from dataclasses import dataclass
from datetime import datetime

from memfs.contract.models import MemoryVersion
from memfs.core.model.clashes import Clashes
from memfs.core.model.config import VfsConfig
from memfs.core.model.inodes import ROOT_INODE, InodeTable, Node


@dataclass
class PendingDelete:
    """A memory unlinked or renamed away (rule 3), deleted when its grace window ends."""

    memory_id: str
    expected_sha: str | None
    remote_path: str | None
    local_path: str  # the path it disappeared from; re-creating it in time adopts the memory
    at: float  # monotonic
    created_at: datetime | None = None
    # the memory's description, and one set here not yet uploaded: a re-creation takes them
    description: str | None = None
    new_description: str | None = None


def delete_key(memory_id: str) -> tuple[str, str]:
    """The write-back queue's key of the deferred delete of ``memory_id``."""
    return ("delete", memory_id)


class CoreState:
    """See the module docstring."""

    def __init__(
        self,
        config: VfsConfig,
        *,
        max_content_bytes: int,
        max_memories: int,
        refused_characters: str = "",
        first_ino: int = ROOT_INODE,
    ) -> None:
        self.config = config
        # the store's limits: a write over them is refused here, with the errno (EFBIG...)
        self.max_content_bytes = max_content_bytes
        self.max_memories = max_memories
        self.refused_characters = refused_characters  # in content and descriptions (EINVAL)
        self.table = InodeTable(first_ino)  # the store's root, and its files above it
        self.read_only = config.read_only  # also once the store is archived while mounted
        self.pending_deletes: dict[str, PendingDelete] = {}  # by memory id
        self.tombstones: set[str] = set()  # memory ids deleted by this mount
        self.local_dirs: set[str] = set()  # directories kept until rmdir (mkdir, emptied here)
        self.removed_dirs: dict[str, float] = {}  # rmdir'ed; remote prefixes hidden a while
        # memory nodes renamed away (``Node.departed_from``), by inode: a create at a path
        # they left asks only them (``Identities.adoptable``), not every memory of the store.
        # A superset: entries whose window ended or that were adopted are pruned when asked
        self.departed: dict[int, Node] = {}
        # file memories shown under a derived name beside a same-named directory (core.clashes)
        self.clashes = Clashes()
        # changes of the change feed to nodes open with data, applied at their last release
        self.deferred_versions: dict[int, list[MemoryVersion]] = {}
        # uploads that failed for good (not a conflict, not a full store): a directory fsync
        # reports them. A file's stays until a later upload of it succeeds or is superseded
        # (its content is not on the server till then); any other key's is reported once.
        self.failed_uploads: dict[Hashable, BaseException] = {}
        # keys whose create the full store refused (StoreFullError); their journal records are
        # kept, and they are queued again when room may have appeared (retry_waiting_for_room)
        self.waiting_for_room: set[Hashable] = set()
        # the last create the store answered was refused as full (``store_full``), or the last
        # request failed transiently and none succeeded since (``store_away``): a file queued
        # meanwhile (a new one only, for a full store) is held back, charged to the local
        # budget from its close, not from its own failure a second later, so a burst of saves
        # is no way around the budget (``Uploader.queued``)
        self.store_full = False
        self.store_away = False

    def now(self) -> float:
        return time.monotonic()

    def store_path(self, node: Node) -> str | None:
        """The memory path ``node`` stands for: its path, except at a clash's derived name."""
        clash = self.clashes.get(node.memory_id)
        if clash is not None and node.path == clash.shown_path:
            return clash.memory_path
        return node.path

    def refused_character(self, text: str) -> str | None:
        """A character of ``text`` the store refuses (NUL: Databricks, or where said), or None."""
        for character in self.refused_characters:
            if character in text:
                return character
        return None

    def is_local_path(self, path: str) -> bool:
        """A local-only name (editor scratch files): never uploaded (``localfiles``)."""
        return self.config.local_names.is_local(path)
