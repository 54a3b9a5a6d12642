"""Renames: what moving a file or a directory does to its content, its memory and the server.

A file renamed onto a memory path commits its content (validated: EILSEQ or EINVAL at the rename,
a file over the limit moves still refused); it keeps its memory (moved on the server after the grace
window, rule 3) unless it takes another: the target's, or one that just left the new path
(``identity``). A directory rename moves every memory below it on the server at once (one
request each, not atomic: ``Uploader.move_tree``) and re-binds the nodes below.

``Renames.rename`` is the operation once ``vfs.Vfs.rename`` has found its names and checked
what needs no new path (the source exists, the flags allow the target, the mount is writable):
the new name's rules, the kinds of source and target, the move, and the local budget's charges.
It must not upload content.
"""

from __future__ import annotations

import time

from memfs.contract import paths
from memfs.contract.errors import (
    DirectoryNotEmptyError,
    InvalidArgumentError,
    IsDirectoryError,
    NotDirectoryError,
    NotPermittedError,
    NotUtf8Error,
)
from memfs.core.fetch.cache import ListingCache
from memfs.core.model.budget import LocalBudget
from memfs.core.model.inodes import Kind, Node
from memfs.core.model.state import CoreState, PendingDelete
from memfs.core.ops.commit import Commits
from memfs.core.ops.copies import LocalCopies
from memfs.core.ops.identity import Identities, Identity
from memfs.core.ops.namespace import Namespace
from memfs.core.ops.uploader import Uploader
from memfs.writeback.queue import WriteBack


class NamesChanged(Exception):
    """A file rename found a name changed elsewhere after its ``await``s (the change feed moved
    or deleted a file meanwhile): it changed nothing; ``vfs`` looks the names up again."""


class Renames:
    """The renames of one mount; see the module docstring."""

    def __init__(
        self,
        state: CoreState,
        *,
        writeback: WriteBack,
        listings: ListingCache,
        namespace: Namespace,
        identities: Identities,
        copies: LocalCopies,
        commits: Commits,
        uploader: Uploader,
        budget: LocalBudget,
    ) -> None:
        self.state = state
        self.config = state.config
        self.table = state.table
        self.writeback = writeback
        self.listings = listings
        self.namespace = namespace
        self.identities = identities
        self.copies = copies
        self.commits = commits
        self.uploader = uploader
        self.budget = budget

    async def rename(
        self, src: Node, dst: Node | None, old_path: str, new_dir: str, new_name: str
    ) -> bool:
        """``src`` at ``old_path`` moves to ``new_name`` in ``new_dir``, over ``dst`` if there
        is one; False if they are the same file (nothing to do)."""
        if src.is_dir:
            new_path, new_local = self.namespace.new_path(new_dir, new_name), False
        else:  # onto an entry whose path is outside the rules (an older server's): it is saved
            target = paths.join(new_dir, new_name)
            entry_there = (
                dst is not None and dst.memory_id is not None and dst.remote_path == target
            ) or self.identities.adoptable(target) is not None
            new_path, new_local = self.namespace.file_path(
                new_dir, new_name, entry_there=entry_there
            )
        if src is dst:
            return False
        if src.is_dir:
            if dst is not None and not dst.is_dir:
                raise NotDirectoryError(f"{new_path} is not a directory")
            if paths.is_below(new_path, old_path):
                raise InvalidArgumentError("cannot move a directory below itself")
            await self.directory(src, old_path, new_path, dst)
            if dst is not None:
                self.budget.charge(dst)  # replaced: no longer charged
            for node in self.table.below(new_path):  # some may be local-only no more, or now
                self.budget.charge(node)
        else:
            if dst is not None and dst.is_dir:
                raise IsDirectoryError(f"{new_path} is a directory")
            try:
                await self.file(src, old_path, new_path, dst, new_local=new_local)
            finally:
                self.commits.refusals.spill(src)  # loaded to be checked: back to its copy
                self.budget.charge(src)
            if dst is not None:
                self.copies.drop_unreachable(dst)
                self.budget.charge(dst)
        self.namespace.keep_parent(old_path)
        self.state.removed_dirs.pop(new_dir, None)
        return True

    async def file(
        self, src: Node, old_path: str, new_path: str, dst: Node | None, *, new_local: bool
    ) -> None:
        """``src`` (a file or symlink) moves to ``new_path``, over ``dst`` if there is one;
        ``new_local``: the new path is local-only (``Namespace.file_path``)."""
        if src.kind is Kind.SYMLINK and not new_local:
            raise NotPermittedError("symbolic links are only allowed for local-only names")
        if not new_local and src.kind is Kind.FILE and (src.dirty or src.memory_id is None):
            if src.data is None:
                await self.copies.ensure_data(src)
            refusal = self.commits.refusal(src)
            if isinstance(refusal, NotUtf8Error | InvalidArgumentError):
                raise refusal  # EILSEQ (EINVAL) at rename onto a memory path
            if refusal is None:  # (over the limit: it moves, still refused, not uploaded)
                self.commits.validate(src)
        if src.memory_id is not None and (
            dst is not None or new_local or self.identities.adoptable(new_path) is not None
        ):
            await self.copies.ensure_data(src)  # the content must travel without its identity
        if dst is not None and dst.open_count > 0:
            await self.copies.ensure_data(dst)
        identity = await self.identities.for_rename(new_path, dst, new_local)
        # the source's own memory leaves when it takes another identity or becomes local
        leaves = (
            src.memory_id is not None
            and (identity is not None or new_local)
            and identity is not src
        )
        if leaves:
            await self.copies.ensure_data(src)  # loaded above, unless the identity changed since
        # no await from here on: what was looked up must still hold (the change feed may have
        # moved or deleted a file meanwhile), else nothing is changed and the caller tries again
        if not self._still(src, old_path, dst, new_path, identity):
            raise NamesChanged(f"{old_path} or {new_path} changed elsewhere meanwhile")
        if leaves:
            self.identities.detach_memory(src, old_path)
        # the target leaves
        if dst is not None:
            self.writeback.cancel(dst.ino)
            if dst.memory_id is not None and identity is not dst:
                self.identities.detach_memory(dst, new_path)
            dst.dirty = False
            self.commits.end_refusal(dst)
        committed = self.identities.take(src, identity, dst)
        if dst is not None:
            self.table.unbind(dst)
        self.table.bind(src, new_path)
        src.local_only = new_local or src.kind is Kind.SYMLINK
        src.ctime = time.time()
        if new_local:
            self.writeback.cancel(src.ino)
            self.commits.end_refusal(src)  # a local-only name is never uploaded anyway
            return
        if src.refused is not None:
            self.commits.refusals.keep(src)  # the copy is named after the new path
        if committed:
            src.dirty = True  # compared with the base at upload: unchanged content sends nothing
            self.writeback.schedule(src.ino, self.config.update_delay)
        elif src.memory_id is not None:
            if src.departed_from is None:
                src.departed_from = old_path
            src.departed_at = self.state.now()
            self.state.departed[src.ino] = src
            self.writeback.schedule(src.ino, self.config.grace, debounce=True)
        else:
            src.dirty = True
            self.writeback.schedule(src.ino, self.config.new_file_delay, debounce=True)

    def _still(
        self, src: Node, old_path: str, dst: Node | None, new_path: str, identity: Identity | None
    ) -> bool:
        """The names, and the memory ``src`` is to take, are still what ``file`` found."""
        if src.path != old_path or (dst is not None and dst.path != new_path):
            return False
        if isinstance(identity, PendingDelete):
            return self.state.pending_deletes.get(identity.memory_id) is identity
        if identity is not None and identity is not dst:  # a memory that left new_path
            return identity.departed_from == new_path and identity.memory_id is not None
        return True

    async def directory(self, src: Node, old_path: str, new_path: str, dst: Node | None) -> None:
        """Rename every memory below ``old_path`` (one request each; not atomic)."""
        if dst is not None:
            self.listings.drop(new_path)
            if await self.namespace.children(new_path):
                raise DirectoryNotEmptyError(f"{new_path} is not empty")
        await self.uploader.check_move(old_path, new_path)  # a refused rename changes nothing
        if dst is not None:
            self.table.unbind(dst)
            self.state.local_dirs.discard(new_path)
        await self.uploader.move_tree(old_path, new_path)

        def moved(path: str) -> str:
            return new_path + path[len(old_path) :]

        # rebind local state below (deepest last is fine: bind keys are distinct)
        for node in sorted(self.table.below(old_path), key=lambda n: n.path or ""):
            assert node.path is not None
            target = moved(node.path)
            self.table.bind(node, target)
            node.local_only = self.state.is_local_path(target) or node.kind is Kind.SYMLINK
            if node.memory_id is not None and node.remote_path != target and not node.local_only:
                self.writeback.schedule(node.ino, 0)
        self.table.bind(src, new_path)
        for directory in list(self.state.local_dirs):
            if directory == old_path or paths.is_below(directory, old_path):
                self.state.local_dirs.discard(directory)
                self.state.local_dirs.add(moved(directory))
        self.state.local_dirs.add(new_path)
        self.listings.clear()
