"""The local copy of a file (``Node.data``): loaded from the clean caches or the store (or, for
refused content moved out of memory, from its kept copy: ``memfs.core.ops.refusals``), and handed
back to the clean content cache once nothing depends on it any more.

It must not change what a file's content is (writes are ``vfs``'s), and it never puts dirty
data in a cache: only a copy equal to the server's content (``base_sha``) goes there.
"""

from __future__ import annotations

from memfs.contract import paths
from memfs.contract.errors import NoEntryError
from memfs.contract.store_api import StoreAPI
from memfs.core.fetch.cache import ContentCache
from memfs.core.fetch.prefetch import BulkFetcher
from memfs.core.model.inodes import Node
from memfs.core.model.state import CoreState
from memfs.core.ops.refusals import Refusals
from memfs.writeback.queue import WriteBack


class LocalCopies:
    """Loads and drops the local copies of the files of one mount."""

    def __init__(
        self,
        state: CoreState,
        store: StoreAPI,
        contents: ContentCache,
        bulk: BulkFetcher,
        writeback: WriteBack,
        refusals: Refusals,
    ) -> None:
        self.state = state
        self.refusals = refusals
        self.store = store  # short deadlines: a syscall waits on these calls
        self.contents = contents
        self.bulk = bulk
        self.writeback = writeback

    async def fetch(self, node: Node) -> bytes:
        """The server's content of a memory node (clean cache first)."""
        cached = self.contents.get(node.base_sha)
        if cached is not None:
            return cached
        if node.memory_id is None:
            return b""
        path = node.path
        if path is not None and self.state.store_path(node) == node.remote_path:
            bulk = await self.bulk.get(paths.parent(path), node.base_sha)
            if bulk is not None:
                return bulk
            if node.memory_id is None:  # the change feed saw it deleted while the prefetch ran
                raise NoEntryError(f"{path} was deleted on the server meanwhile")
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

    async def ensure_data(self, node: Node) -> bytearray:
        """The local copy of ``node``, loaded first if it has none."""
        self.refusals.restore(node)
        if node.data is None:
            content = await self.fetch(node)
            if node.data is None:
                node.data = bytearray(content)
        return node.data

    async def content_for_read(self, node: Node) -> bytes:
        if node.data is not None:
            return bytes(node.data)
        if node.kept_size is not None:
            return self.refusals.load(node)
        return await self.fetch(node)

    def drop_unreachable(self, node: Node) -> None:
        """A file removed (or replaced) and closed: nobody can read its content again."""
        if node.path is None and node.open_count == 0 and node.memory_id is None:
            node.data, node.kept_size = None, None

    def drop_clean_data(self, node: Node) -> None:
        """Nobody has ``node`` open and its copy is the server's: it goes to the clean cache."""
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
