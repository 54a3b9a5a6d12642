"""The ``user.description`` extended attribute: a memory's description, on APIs that keep one.

On a store whose memories carry a description (``Capabilities.descriptions``: Databricks
entries) each file of a memory has the attribute ``user.description``: ``getfattr`` reads it,
``listxattr`` lists it when it is not empty, ``setfattr`` changes it and ``setfattr -x``
empties it. A change is a write like any other: journaled before the call returns, uploaded by
the write-back queue after the update delay (``Uploader``), refused with the mount's errno rules
(EROFS, ENODEV, EILSEQ for a value that is not UTF-8, E2BIG past the store's limit, EINVAL for
a character the store refuses: NUL on Databricks, counted and logged by ``refusals``, so that no
description the store would refuse is ever journaled or blocks the file's later saves).

Other names are answered as a filesystem without them answers: ENODATA to read, ENOTSUP to
set. Directories, symbolic links and local-only files have no description. An API without
descriptions never reaches this module: ``fuse_ops`` answers ENOSYS there, so that the kernel
stops asking (``docs/editors.md`` §3).
"""

from __future__ import annotations

import time

from memfs.contract.errors import (
    AttributeNotSupportedError,
    AttributeTooLargeError,
    ExistsError,
    InvalidArgumentError,
    NoAttributeError,
    NoEntryError,
    NotUtf8Error,
    ReadOnlyError,
)
from memfs.contract.store_api import StoreAPI
from memfs.core.fetch.orphans import StoreGone
from memfs.core.model.inodes import InodeTable, Kind, Node
from memfs.core.model.state import CoreState
from memfs.core.ops.refusals import Refusals
from memfs.writeback.queue import WriteBack

DESCRIPTION = "user.description"
XATTR_CREATE = 1  # setxattr flags (linux/xattr.h)
XATTR_REPLACE = 2


class Descriptions:
    """The ``user.description`` attribute of one mount's files; see the module docstring."""

    def __init__(
        self,
        state: CoreState,
        store: StoreAPI,
        writeback: WriteBack,
        gone: StoreGone,
        refusals: Refusals,
    ) -> None:
        self.state = state
        self.table: InodeTable = state.table
        self.store = store  # short deadlines: a syscall waits on a read
        self.writeback = writeback
        self.gone = gone
        self.refusals = refusals
        self.enabled = store.capabilities.descriptions
        self.max_bytes = store.capabilities.max_description_bytes

    def _file(self, ino: int) -> Node | None:
        """The node of ``ino`` if it is a file of a memory (else None: no description)."""
        node = self.table.get(ino)
        if node is None:
            raise NoEntryError(f"no inode {ino}")
        if node.kind is not Kind.FILE or node.local_only or node.path is None:
            return None
        return node

    async def _current(self, node: Node) -> str:
        """The description as this mount shows it: a pending one, else the store's."""
        if node.new_description is not None:
            return node.new_description
        if node.description is None and node.memory_id is not None:
            memory = await self.store.read(node.memory_id, with_content=False)
            if self.table.get(node.ino) is node and node.description is None:
                node.description = memory.description or ""
        return node.description or ""

    async def get(self, ino: int, name: str) -> bytes:
        node = self._file(ino)
        if name != DESCRIPTION or node is None:
            raise NoAttributeError(f"no attribute {name}")
        value = await self._current(node)
        if not value:
            raise NoAttributeError(f"{node.path} has no description")
        return value.encode("utf-8")

    async def names(self, ino: int) -> list[str]:
        node = self._file(ino)
        if node is None or not await self._current(node):
            return []
        return [DESCRIPTION]

    async def set(self, ino: int, name: str, value: bytes, flags: int = 0) -> None:
        node = self._file(ino)
        if self.state.read_only:
            raise ReadOnlyError("read-only mount")
        if self.gone.gone:
            raise self.gone.error()
        if name != DESCRIPTION or node is None:
            raise AttributeNotSupportedError(f"{name}: only files have {DESCRIPTION}")
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError:
            raise NotUtf8Error(f"the description of {node.path} is not UTF-8 text") from None
        if len(value) > self.max_bytes:
            raise AttributeTooLargeError(f"a description holds at most {self.max_bytes} bytes")
        character = self.state.refused_character(text)
        if character is not None:
            self.refusals.refuse_description(node, character)
            raise InvalidArgumentError(
                f"the description of {node.path} holds U+{ord(character):04X}, which the store "
                "refuses"
            )
        exists = bool(await self._current(node))
        if flags & XATTR_CREATE and exists:
            raise ExistsError(f"{node.path} has a description")
        if flags & XATTR_REPLACE and not exists:
            raise NoAttributeError(f"{node.path} has no description")
        self._change(node, text)

    async def remove(self, ino: int, name: str) -> None:
        """``setfattr -x``: the description becomes empty (the API keeps no absent one)."""
        node = self._file(ino)
        if self.state.read_only:
            raise ReadOnlyError("read-only mount")
        if self.gone.gone:
            raise self.gone.error()
        if name != DESCRIPTION or node is None or not await self._current(node):
            raise NoAttributeError(f"no attribute {name}")
        self._change(node, "")

    def _change(self, node: Node, text: str) -> None:
        """Queue the upload of a new description; the queue journals it before this returns."""
        if text == (node.description or "") and node.new_description is None:
            return  # what the store has: nothing to write
        node.new_description = text
        node.ctime = time.time()
        if node.memory_id is None:  # a new file: its create carries it
            self.writeback.schedule(node.ino, self.state.config.new_file_delay, debounce=True)
        else:
            self.writeback.schedule(node.ino, self.state.config.update_delay)
