"""Commits: what ``close``, ``fsync``, ``rename`` and a truncate of a closed file do to a file's
new content: validate it (size, UTF-8, characters the store refuses), refuse it
(``memfs.core.ops.refusals``), or queue its upload.

Owns the rule "a commit of a refused content raises the refusal's error again; a commit of
other valid content ends the refusal" (never sticky), and the last commit of a mount: what files
still open for writing hold when the mount ends is committed as their close would (``save_open``),
and each such file is remembered (``saved_open``) for the unmount report. It must not upload
anything (the queue runs ``uploader``) nor decide which open hears an error (``vfs`` does).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from memfs.contract.errors import FileTooLargeError, FsError, InvalidArgumentError, NotUtf8Error
from memfs.core.model.handles import OpenFiles
from memfs.core.model.inodes import Kind, Node
from memfs.core.model.state import CoreState
from memfs.core.ops.namespace import Namespace
from memfs.core.ops.refusals import NOT_UTF8, REFUSED_CHARACTER, TOO_LARGE, Refusals
from memfs.writeback.queue import WriteBack

log = logging.getLogger(__name__)


@dataclass
class SavedOpen:
    """A file open for writing when the mount ended: its content was committed then."""

    node: Node
    path: str
    conflicts_before: int  # ``Durable.conflict_count`` then: a later one of ``path`` is its own
    gen: int  # the content saved (``Node.gen``): a later pass saves it again only if it changed
    failed: str | None = None  # its commit failed (the journal could not be written): why


def utf8(data: bytes | bytearray) -> str | None:
    """``data`` as text, None if it is not UTF-8."""
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        return None


class Commits:
    """Validates, refuses and queues the commits of one mount's files."""

    def __init__(
        self,
        state: CoreState,
        writeback: WriteBack,
        refusals: Refusals,
        files: OpenFiles,
        namespace: Namespace,
    ) -> None:
        self.state = state
        self.config = state.config
        self.writeback = writeback
        self.refusals = refusals
        self.files = files
        self.namespace = namespace  # a file never created leaves the directory
        self.saved_open: dict[int, SavedOpen] = {}  # by inode: ``save_open``

    def committed(self, node: Node) -> bool:
        """Whether ``node``'s content is committed (validated, then uploaded)."""
        return (
            node.kind is Kind.FILE
            and not node.local_only
            and node.path is not None
            and not self.state.read_only
        )

    def too_large(self) -> FileTooLargeError:
        return FileTooLargeError(f"a memory holds at most {self.state.max_content_bytes} bytes")

    def holds_refused(self, node: Node, character: str) -> InvalidArgumentError:
        return InvalidArgumentError(
            f"{node.path} holds U+{ord(character):04X}, which the store refuses"
        )

    def validate(self, node: Node) -> str:
        """The text of a new content being committed; refuse it if it is not UTF-8 (EILSEQ) or
        holds a character the store refuses (EINVAL). Valid content ends any refusal: it is a
        new save (memfs.core.ops.refusals)."""
        data = node.data if node.data is not None else bytearray()
        if len(data) > self.state.max_content_bytes:
            raise self.too_large()
        text = utf8(data)
        if text is None:
            self.refuse(node, NOT_UTF8)
            raise NotUtf8Error(f"{node.path} is not UTF-8 text")
        character = self.state.refused_character(text)
        if character is not None:
            self.refuse(node, REFUSED_CHARACTER)
            raise self.holds_refused(node, character)
        self.end_refusal(node)
        return text

    def refuse(self, node: Node, reason: str) -> None:
        """The current content of ``node`` is refused: kept, never uploaded nor journaled.
        Work queued for an earlier commit of the file is superseded by it (a pending move of
        the memory still goes, without content: ``Uploader.sync``)."""
        self.refusals.refuse(node, reason)
        if self.writeback.pending(node.ino):
            self.writeback.cancel(node.ino)  # drops its journal record
            if node.memory_id is not None and self.state.store_path(node) != node.remote_path:
                self.writeback.schedule(node.ino, self.config.grace)

    def end_refusal(self, node: Node) -> None:
        self.refusals.clear(node)
        for handle in self.files.of(node):
            handle.refused = False

    def refusal(self, node: Node) -> FsError | None:
        """The error of a commit of ``node``'s current content if it is the refused one."""
        if node.refused is None or node.refused_gen != node.gen:
            return None
        text = utf8(node.data or b"")
        if node.refused == TOO_LARGE and text is not None:
            return FileTooLargeError(
                f"a write to {node.path} crossed {self.state.max_content_bytes} bytes: what it "
                "left is not uploaded"
            )
        character = None if text is None else self.state.refused_character(text)
        if character is not None:
            return self.holds_refused(node, character)
        return NotUtf8Error(f"{node.path} is not UTF-8 text")

    def closed(self, node: Node) -> None:
        """The last open of ``node`` was released: a new file whose every write was refused
        is not created at all."""
        if (
            node.refused == TOO_LARGE
            and node.memory_id is None
            and not node.data
            and node.path is not None
        ):
            self.refusals.clear(node)
            self.writeback.cancel(node.ino)
            self.namespace.forget_memory(node)

    def commit(self, node: Node) -> None:
        """Validate a changed file and queue its upload (rule: close/fsync/rename commit).
        The commit of a refused content raises the refusal's error (again: never sticky, the
        next commit of another content decides anew)."""
        if not self.committed(node):
            return
        refusal = self.refusal(node)
        if refusal is not None:
            self.refusals.keep(node)
            raise refusal
        at_home = self.state.store_path(node) == node.remote_path
        if not node.dirty and node.memory_id is not None and at_home:
            return
        if node.dirty:
            self.validate(node)
        if node.memory_id is None:
            self.writeback.schedule(node.ino, self.config.new_file_delay, debounce=True)
        else:
            self.writeback.schedule(node.ino, self.config.update_delay)

    def save_open(self, *, conflicts: int) -> int:
        """The mount ends: commit the content of every file still open for writing that this
        mount changed, as its close would (a refused content goes to its kept copy); a
        local-only file is remembered, never uploaded. ``conflicts``: the conflicts so far.
        How many files were saved now (a second call saves only what changed since)."""
        saved = 0
        for handle in list(self.files.handles.values()):
            node = handle.node
            if not handle.writable or node.path is None or node.kind is not Kind.FILE:
                continue
            if node.local_only:
                if handle.changed and node.ino not in self.saved_open:
                    self.saved_open[node.ino] = SavedOpen(node, node.path, conflicts, node.gen)
                continue
            known = self.saved_open.get(node.ino)
            if known is not None and known.gen == node.gen:
                continue  # saved by an earlier pass, unchanged since
            if not node.dirty and self.refusal(node) is None:
                continue  # nothing unsaved: its content is the server's
            failed = None
            try:
                self.commit(node)
            except FsError as exc:  # refused: ``refusals`` kept a copy of it
                log.warning("%s, open for writing at unmount, was refused: %s", node.path, exc)
            except OSError as exc:  # its journal record could not be written
                failed = f"not saved: {exc}"
                log.error("%s, open for writing at unmount, %s", node.path, failed)
            before = conflicts if known is None else known.conflicts_before
            self.saved_open[node.ino] = SavedOpen(node, node.path, before, node.gen, failed)
            saved += 1
        if saved:
            log.info("saved %d file(s) still open for writing as the mount ends", saved)
        return saved
