"""``ReadOnlyTree``: the changes a read-only tree of a mount (``.versions/``, ``.search/``)
refuses, all of them with ``ReadOnlyError`` (EROFS), in the shape of ``memfs.core.tree.Tree``.

A leaf of the trees below the core: it must not import anything of memfs but the contract.
"""

from __future__ import annotations

from memfs.contract.errors import ReadOnlyError
from memfs.contract.node_attr import NodeAttr


class ReadOnlyTree:
    """Every change refused; ``tree_name``: the directory the message names."""

    tree_name = ""

    def refuse(self, what: str) -> ReadOnlyError:
        """The error for any change below the tree."""
        return ReadOnlyError(f"{what}: {self.tree_name} is read-only")

    async def setattr(self, ino: int, change: object, fh: int | None) -> NodeAttr:
        raise self.refuse("setattr")

    async def create(
        self, parent: int, name: str, flags: int, mode: int, owner: tuple[int, int] | None
    ) -> tuple[int, bool, NodeAttr]:
        raise self.refuse("create")

    async def write(self, fh: int, offset: int, buf: bytes) -> int:
        raise self.refuse("write")

    async def flush(self, fh: int) -> None:
        return  # nothing was written

    async def fsync(self, fh: int) -> None:
        return

    async def mkdir(
        self, parent: int, name: str, mode: int, owner: tuple[int, int] | None
    ) -> NodeAttr:
        raise self.refuse("mkdir")

    async def mknod(
        self, parent: int, name: str, mode: int, owner: tuple[int, int] | None
    ) -> NodeAttr:
        raise self.refuse("mknod")

    async def symlink(
        self, parent: int, name: str, target: bytes, owner: tuple[int, int] | None
    ) -> NodeAttr:
        raise self.refuse("symlink")

    async def link(self, ino: int, new_parent: int, new_name: str) -> NodeAttr:
        raise self.refuse("link")

    async def unlink(self, parent: int, name: str) -> None:
        raise self.refuse("unlink")

    async def rmdir(self, parent: int, name: str) -> None:
        raise self.refuse("rmdir")

    async def rename(
        self, old_parent: int, old_name: str, new_parent: int, new_name: str, flags: int
    ) -> None:
        raise self.refuse("rename")
