"""A store's core seen by paths, as a program sees a mount of it.

The sync engine has no kernel in front of the core: this module plays its part. Each method
makes the calls the kernel makes for the same system calls on a mount (a lookup per path
segment from the root, ``open``/``create``, ``write``, ``flush`` at close, ``release``), so a
synced file goes through exactly the code a mounted one does: the commit's checks and
refusals, the journal record before ``flush`` returns, the write-back queue, the upload's
precondition and the conflict rule, safe-save adoption, the rename that keeps a memory's id.

Lookup counts are given back at once (``forget``): the engine holds no inode between calls.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from memfs.contract import paths
from memfs.contract.errors import NoEntryError, NotDirectoryError, NotFoundError
from memfs.core import StoreCore

WRITE_CHUNK = READ_CHUNK = 1 << 20


@dataclass(frozen=True)
class CoreFile:
    """A file of the core: its inode number and the SHA-256 of its content when that is known
    without reading it (None: read it)."""

    ino: int
    sha: str | None
    description: str | None = None  # as the core shows it (a pending one first); None: unknown


class CoreFiles:
    """The core by store paths (module docstring)."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core

    async def _ino(self, path: str) -> int | None:
        """The inode of ``path`` (None: not there), looked up segment by segment."""
        ino = self.core.root_ino
        for name in path.strip("/").split("/"):
            if not name:
                continue
            try:
                attr = await self.core.lookup(ino, name)
            except (NoEntryError, NotFoundError, NotDirectoryError):
                return None
            self.core.forget(attr.ino, 1)
            ino = attr.ino
        return ino

    async def walk(self) -> tuple[dict[str, CoreFile], dict[str, int]]:
        """Every file of the core by path, and every directory's inode (listings, as
        ``ls -R``)."""
        files: dict[str, CoreFile] = {}
        directories: dict[str, int] = {}
        pending = [(self.core.root_ino, "")]
        while pending:
            ino, prefix = pending.pop()
            try:
                entries = await self.core.listing(ino)
            except (NoEntryError, NotFoundError, NotDirectoryError):
                continue
            for entry in entries:
                path = f"{prefix}/{entry.name.decode('utf-8')}"
                attr = await entry.attr()
                facts = entry.facts()
                if attr.is_dir:
                    directories[path] = attr.ino
                    pending.append((attr.ino, path))
                elif stat.S_ISREG(attr.mode) and not facts.local_only:
                    files[path] = CoreFile(attr.ino, facts.sha, facts.description)
        return files, directories

    async def find(self, path: str) -> CoreFile | None:
        """The file at ``path``; None if there is none (or it is a directory)."""
        parent = await self._ino(paths.parent(path))
        if parent is None:
            return None
        try:
            attr = await self.core.lookup(parent, paths.basename(path))
        except (NoEntryError, NotFoundError, NotDirectoryError):
            return None
        self.core.forget(attr.ino, 1)
        if attr.is_dir:
            return None
        return CoreFile(attr.ino, None)

    async def content(self, ino: int) -> bytes:
        """The content of the file ``ino`` as a reader of the mount sees it."""
        fh, _ = await self.core.open(ino, os.O_RDONLY)
        try:
            chunks = []
            offset = 0
            while True:
                chunk = await self.core.read(fh, offset, READ_CHUNK)
                if not chunk:
                    break
                chunks.append(chunk)
                offset += len(chunk)
            return b"".join(chunks)
        finally:
            await self.core.release(fh)

    async def put(self, path: str, data: bytes) -> None:
        """Write ``data`` as the whole content of ``path`` and close it, as ``cp`` to a mount
        would: made with its directories if new, truncated if not; the close's error (a
        refusal) is raised."""
        parent = await self._make_dirs(paths.parent(path))
        name = paths.basename(path)
        fh, attr = await self.core.create(
            parent, name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode=None, owner=None
        )
        self.core.forget(attr.ino, 1)
        try:
            offset = 0
            while offset < len(data):
                offset += await self.core.write(fh, offset, data[offset : offset + WRITE_CHUNK])
            await self.core.flush(fh)
        finally:
            await self.core.release(fh)

    async def remove(self, path: str) -> None:
        """Unlink ``path`` (gone already: nothing to do)."""
        parent = await self._ino(paths.parent(path))
        if parent is None:
            return
        try:
            await self.core.unlink(parent, paths.basename(path))
        except (NoEntryError, NotFoundError):
            return

    async def rename(self, old: str, new: str) -> None:
        """Rename ``old`` to ``new`` (its memory keeps its id), making ``new``'s directories."""
        old_parent = await self._ino(paths.parent(old))
        if old_parent is None:
            raise NoEntryError(f"{paths.parent(old)} does not exist")
        new_parent = await self._make_dirs(paths.parent(new))
        await self.core.rename(old_parent, paths.basename(old), new_parent, paths.basename(new))

    async def _make_dirs(self, directory: str) -> int:
        ino = self.core.root_ino
        for name in directory.strip("/").split("/"):
            if not name:
                continue
            try:
                attr = await self.core.lookup(ino, name)
            except (NoEntryError, NotFoundError):
                attr = await self.core.mkdir(ino, name)
            self.core.forget(attr.ino, 1)
            if not attr.is_dir:
                raise NotDirectoryError(f"{directory}: a file is on its path")
            ino = attr.ino
        return ino
