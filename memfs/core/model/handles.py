"""Open files: one ``Handle`` per open, and which failures each open still has to hear.

Owns the table of open files of one mount (``OpenFiles``): a handle's flags, whether this open
changed the content, and the errors of background uploads it must report once, at its next
``fsync`` or ``close`` (docs/semantics.md). It must not hold content (that is ``Node.data``,
shared by every open of an inode) nor decide when a failure happens.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from memfs.contract.errors import InvalidArgumentError, PreconditionFailedError, RemoteConflictError
from memfs.core.model.inodes import Node


@dataclass
class Handle:
    fh: int
    node: Node
    flags: int
    snapshot: bytes | None = None  # content at open, for readers of a memory not loaded
    wrote: bool = False
    changed: bool = False  # this open changed the content: created, truncated or wrote it
    refused: bool = False  # a write of this open crossed the limit (memfs.core.ops.refusals)
    # a failed upload of content this open may have written, reported once by its next
    # fsync/close: opens made after the failure never hear it (their content is another)
    error: BaseException | None = None
    heard: BaseException | None = None  # the failure this open's fsync raised itself

    @property
    def writable(self) -> bool:
        return (self.flags & os.O_ACCMODE) != os.O_RDONLY


class OpenFiles:
    """The open files of one mount, by file handle number."""

    def __init__(self, first: int = 1) -> None:
        self.handles: dict[int, Handle] = {}
        self._next_fh = first  # in the range of the store's files (``memfs.contract.numbers``)

    def new(self, node: Node, flags: int) -> Handle:
        handle = Handle(fh=self._next_fh, node=node, flags=flags)
        self._next_fh += 1
        self.handles[handle.fh] = handle
        node.open_count += 1
        return handle

    def get(self, fh: int) -> Handle:
        handle = self.handles.get(fh)
        if handle is None:
            raise InvalidArgumentError(f"no open file {fh}")
        return handle

    def pop(self, fh: int) -> Handle | None:
        return self.handles.pop(fh, None)

    def of(self, node: Node) -> Iterator[Handle]:
        return (handle for handle in self.handles.values() if handle.node is node)

    def upload_failed(self, node: Node, error: BaseException) -> None:
        """A failed upload of ``node``: each open of it for writing hears it once."""
        for handle in self.of(node):
            told = handle.heard is not None and handle.heard in (error, error.__cause__)
            if handle.writable and not told:
                handle.error = error

    @staticmethod
    def report(handle: Handle) -> None:
        """Raise a failed upload this open has not heard yet (ESTALE for a conflict)."""
        error, handle.error = handle.error, None
        if error is None:
            return
        if isinstance(error, PreconditionFailedError | RemoteConflictError):
            raise RemoteConflictError(
                f"{handle.node.path} changed on the server; the local content was saved as a "
                "conflict copy"
            ) from error
        raise error
