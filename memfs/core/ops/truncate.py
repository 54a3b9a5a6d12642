"""Truncates: what a new size does to a file's content (``truncate``, ``ftruncate``, ``O_TRUNC``).

A truncate states the whole new content, so it is judged whole and at once, by path or by
descriptor, the file open or not: a size past the store's limit is EFBIG, growth past the local
budget ENOSPC, and a result the store would refuse (not UTF-8; a character the store refuses,
such as the NULs that extend a file where NUL is refused) fails, changing nothing. Writes, by
contrast, are judged at the save (``commit``): a write may be the first half of a character that
the next one completes. A truncate of a file nobody has open is its save.

It must not check access (``vfs`` does: read-only mount, directories).
"""

from __future__ import annotations

from memfs.contract.errors import InvalidArgumentError, NotUtf8Error
from memfs.core.model.budget import LocalBudget
from memfs.core.model.inodes import Node
from memfs.core.model.state import CoreState
from memfs.core.ops.commit import Commits, utf8
from memfs.core.ops.copies import LocalCopies
from memfs.core.ops.refusals import TOO_LARGE


class Truncates:
    """The truncates of one mount; see the module docstring."""

    def __init__(
        self, state: CoreState, *, copies: LocalCopies, commits: Commits, budget: LocalBudget
    ) -> None:
        self.state = state
        self.copies = copies
        self.commits = commits
        self.budget = budget

    async def set_size(self, node: Node, size: int) -> None:
        """``truncate(2)``/``ftruncate(2)`` of the file ``node`` to ``size`` bytes."""
        if size < 0:
            raise InvalidArgumentError("negative size")
        if size > self.state.max_content_bytes:
            raise self.commits.too_large()
        self.budget.check_growth(node, size - node.size())
        try:
            await self._truncate(node, size)
        finally:  # refused content loaded to be truncated: back to its kept copy
            self.commits.refusals.spill(node)

    def at_open(self, node: Node) -> bool:
        """``open(O_TRUNC)``: the content becomes empty (always valid); True if it changed."""
        changed = node.data is None or len(node.data) > 0
        if changed:
            node.data = bytearray()
            node.changed_here()
        if node.refused == TOO_LARGE:
            self.commits.end_refusal(node)
        self.budget.charge(node)
        return changed

    async def _truncate(self, node: Node, size: int) -> None:
        """The content of ``node`` becomes its first ``size`` bytes (zeros past its end)."""
        old = b"" if size == 0 and node.data is None else await self.copies.ensure_data(node)
        new = bytearray(old[:size]) + b"\0" * max(0, size - len(old))
        if self.commits.committed(node):  # a result the store would refuse: nothing changes
            text = utf8(new)
            if text is None:
                raise NotUtf8Error(f"{node.path} truncated to {size} bytes is not UTF-8 text")
            character = self.state.refused_character(text)
            if character is not None:  # a file extended with NULs (NUL refused)
                raise self.commits.holds_refused(node, character)
        node.data = new
        if node.refused == TOO_LARGE:
            self.commits.end_refusal(node)  # truncated: an ordinary dirty file again
        node.changed_here()
        self.budget.charge(node)
        if node.open_count == 0:
            self.commits.commit(node)
