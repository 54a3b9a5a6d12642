"""Files the mount refuses to upload: over 102,400 bytes (EFBIG), not UTF-8 (EILSEQ), or holding
a character the store refuses (EINVAL: NUL on Databricks and where a server says it refuses it,
``Capabilities.refused_characters``).

Owns the ``refused`` state of file nodes, what happens to refused content, and how refusals are
counted and reported (docs/semantics.md, "Refused files"). A refusal is about one content: the
content of the node at generation ``refused_gen`` (``Node.gen``):
- ``TOO_LARGE``: a ``write`` crossed the limit after its open had changed the file (wrote,
  truncated or created it): what the open left is a part of what the program meant to write;
- ``NOT_UTF8``: a commit (``fsync``, ``close``, rename) found bytes that are not UTF-8;
- ``REFUSED_CHARACTER``: a commit found a character the store refuses (the API would answer
  400 for good: an upload of it would fail at every retry);
- while ``refused`` is set, the file's committed content is refused: it is never uploaded nor
  journaled (so never replayed), and a commit of that same content raises the refusal's error
  again (to the writer: ``vfs`` decides who hears it);
- the refusal ends at the next commit of other content that is valid (which is uploaded as
  usual), at a truncate that ends a ``TOO_LARGE`` refusal, or when the file is removed; it is
  never sticky;
- the content of a refused file (if any) is copied to the mount's kept directory,
  ``<cache dir>/<store id>/kept/slot-<n>/`` (``n``: its journal slot; written and fsynced when
  the refusal is answered), the copy is removed when the refusal ends or the file is removed,
  and every refused file still there at unmount is listed in the unmount report with its copy;
  ``memfs status`` lists the same paths (``files``) and their copies (``copies``);
- once the file is closed its content lives in the copy only (``spill``; an open loads it back,
  ``load``): refused content does not stay in the daemon's memory;
- content and copies count against the mount's local budget (``memfs.core.model.budget``). Copies
  left by earlier mounts in the kept directory count too until a write needs their room: then
  the oldest are removed (``reclaim``, one log line). A copy that cannot be written (the disk
  is full...) leaves the content in memory: ``memfs status`` says "not kept".

A description the store refuses (``setfattr`` of one holding a refused character) changes
nothing: it is counted and logged here (``DESCRIPTION``), and the call fails (EINVAL).

It must not decide when content is refused (``commit`` and ``vfs`` do), talk to the server or
touch FUSE.
"""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path

from memfs.core.model.budget import LocalBudget
from memfs.core.model.inodes import Node
from memfs.host.portable import NOFOLLOW, read_at
from memfs.host.private import replace_file

log = logging.getLogger(__name__)

TOO_LARGE = "too large"
NOT_UTF8 = "not UTF-8"
REFUSED_CHARACTER = "refused character"
DESCRIPTION = "description"

_WHY = {
    TOO_LARGE: "a write over 102,400 bytes was refused (EFBIG)",
    NOT_UTF8: "not UTF-8 text (EILSEQ)",
    REFUSED_CHARACTER: "holds a character the store refuses, such as NUL (EINVAL)",
}
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class Refusals:
    """See the module docstring. ``directory`` None: no copies are kept (tests of the core)."""

    def __init__(self, directory: Path | None = None, budget: LocalBudget | None = None) -> None:
        self.directory = directory
        self.budget = budget or LocalBudget()
        self.life = f"{int(time.time() * 1000):x}"
        # copies earlier mounts left in ``directory``, oldest first: (mtime, path, size)
        self._earlier: list[tuple[float, Path, int]] = self._find_earlier()
        self.budget.earlier = sum(size for _, _, size in self._earlier)
        self.budget.reclaim = self.reclaim
        self.reclaimed = 0  # earlier copies removed to make room
        if self.budget.earlier > self.budget.limit:
            self.reclaim(self.budget.earlier - self.budget.limit)
        self.count = 0  # refusals answered since the mount started
        self.by_reason: dict[str, int] = {
            TOO_LARGE: 0,
            NOT_UTF8: 0,
            REFUSED_CHARACTER: 0,
            DESCRIPTION: 0,
        }
        self.nodes: dict[int, Node] = {}  # refused file nodes by inode
        self.copies: dict[int, Path] = {}
        self._kept: dict[int, tuple[int, str]] = {}  # inode -> (gen, path) of its copy

    def refuse(self, node: Node, reason: str) -> None:
        """The current content of ``node`` is refused for ``reason`` (counted and logged once
        per refused content)."""
        if node.refused != reason or node.refused_gen != node.gen:
            self.count += 1
            self.by_reason[reason] = self.by_reason.get(reason, 0) + 1
            log.warning(
                "refused %s: %s: kept locally, not uploaded (until a valid save)",
                node.path,
                _WHY.get(reason, reason),
            )
        node.refused = reason
        node.refused_gen = node.gen
        self.nodes[node.ino] = node
        self.budget.charge(node)
        self.keep(node)

    def why(self, ino: int) -> str | None:
        """Why the content of file ``ino`` is not uploaded, in words (its extended attribute
        ``user.memfs.refused``), or None when it is not refused."""
        node = self.nodes.get(ino)
        if node is None or node.refused is None:
            return None
        return f"{_WHY.get(node.refused, node.refused)}: kept locally, not uploaded"

    def refuse_description(self, node: Node, character: str) -> None:
        """A description holding ``character`` (which the store refuses) was not set."""
        self.count += 1
        self.by_reason[DESCRIPTION] += 1
        log.warning(
            "refused the description of %s: it holds U+%04X, which the store refuses; the "
            "description is unchanged",
            node.path,
            ord(character),
        )

    def keep(self, node: Node) -> None:
        """Copy the local content of refused ``node`` to the kept directory (durably; again
        only if the content or the path changed since the last copy)."""
        if self.directory is None or node.path is None:
            return
        if self._kept.get(node.ino) == (node.gen, node.path):
            return
        name = f"{self.life}-{node.ino}-{_SAFE.sub('_', node.path.strip('/'))[:150]}"
        target = self.directory / name
        old = self.copies.get(node.ino)
        if node.data is None and old is not None:  # spilled, then renamed: the copy follows
            try:
                os.replace(old, target)
            except OSError as exc:
                log.error("cannot rename the kept copy %s of refused %s: %s", old, node.path, exc)
                return
            self.copies[node.ino] = target
            self._kept[node.ino] = (node.gen, node.path)
            return
        if not node.data:
            return
        try:
            replace_file(target, bytes(node.data), "kept copy", durable=True, create_mode=0o700)
        except OSError as exc:  # memfs.host.private.NotPrivateError too
            log.error("cannot keep a copy of refused %s in %s: %s", node.path, target, exc)
            return
        if old is not None and old != target:
            old.unlink(missing_ok=True)
        self.copies[node.ino] = target
        self._kept[node.ino] = (node.gen, node.path)
        self.budget.kept(node, len(node.data))

    def spill(self, node: Node) -> None:
        """``node`` was closed: its refused content leaves memory if its copy holds it."""
        kept = self._kept.get(node.ino)
        if (
            node.refused is None
            or node.open_count > 0
            or not node.data
            or kept is None
            or kept[0] != node.gen
        ):
            return
        node.kept_size = len(node.data)
        node.data = None
        self.budget.charge(node)

    def read(self, node: Node, offset: int, size: int) -> bytes:
        """``size`` bytes at ``offset`` of spilled ``node``'s content (from its kept copy)."""
        copy = self.copies.get(node.ino)
        try:
            if copy is None:
                raise FileNotFoundError("no copy")
            fd = os.open(copy, os.O_RDONLY | NOFOLLOW)
            try:
                return read_at(fd, size, offset)
            finally:
                os.close(fd)
        except OSError as exc:
            log.error("cannot read the kept copy of refused %s (%s): %s", node.path, copy, exc)
            return b""

    def load(self, node: Node) -> bytes:
        """The whole content of spilled ``node`` (``read``)."""
        return self.read(node, 0, node.kept_size or 0)

    def restore(self, node: Node) -> None:
        """Load spilled ``node``'s content back into memory (an open for writing, a rename)."""
        if node.data is None and node.kept_size is not None:
            node.data = bytearray(self.load(node))
            node.kept_size = None
            self.budget.charge(node)

    def clear(self, node: Node) -> None:
        """The refusal of ``node`` ends (saved validly, truncated, or removed)."""
        if node.refused is None:
            return
        self.restore(node)  # the content outlives its copy (``vfs`` drops a removed file's)
        node.refused = None
        self.nodes.pop(node.ino, None)
        self._kept.pop(node.ino, None)
        copy = self.copies.pop(node.ino, None)
        if copy is not None:
            copy.unlink(missing_ok=True)
        self.budget.kept(node, 0)

    def _find_earlier(self) -> list[tuple[float, Path, int]]:
        if self.directory is None:
            return []
        found = []
        try:
            with os.scandir(self.directory) as entries:
                for entry in entries:
                    if entry.name.startswith(self.life) or not entry.is_file(follow_symlinks=False):
                        continue
                    info = entry.stat(follow_symlinks=False)
                    found.append((info.st_mtime, Path(entry.path), info.st_size))
        except FileNotFoundError:
            return []
        return sorted(found)

    def reclaim(self, wanted: int) -> None:
        """Remove copies earlier mounts left, oldest first, until ``wanted`` bytes are free."""
        freed = dropped = 0
        while self._earlier and freed < wanted:
            _, path, size = self._earlier.pop(0)
            path.unlink(missing_ok=True)
            freed += size
            dropped += 1
        self.budget.earlier -= freed
        self.reclaimed += dropped
        if dropped:
            log.warning(
                "removed the %d oldest kept copies of refused files of earlier mounts from %s "
                "(%s bytes): this mount's local budget needed their room",
                dropped,
                self.directory,
                f"{freed:,}",
            )

    def refused(self) -> list[Node]:
        """The refused files still in the mount, by path (status and unmount report agree)."""
        still = [n for n in self.nodes.values() if n.path is not None and n.refused is not None]
        return sorted(still, key=lambda n: n.path or "")

    def report(self) -> list[dict[str, str | None]]:
        """One entry per refused file still in the mount (the unmount report): its path, why,
        and its copy (None: it was empty)."""
        for node in list(self.nodes.values()):
            if node.path is None or node.refused is None:
                self.clear(node)  # removed by the user: nothing to report or keep
        out: list[dict[str, str | None]] = []
        for node in self.refused():
            copy = self.copies.get(node.ino)
            out.append(
                {
                    "path": node.path,
                    "why": _WHY.get(node.refused or "", node.refused),
                    "copy": None if copy is None else str(copy),
                }
            )
        return out

    def status(self) -> dict[str, object]:
        refused = self.refused()
        return {
            "count": self.count,
            "by_reason": dict(self.by_reason),
            "files": [n.path for n in refused],
            # where each one's text is; None: not kept on disk (empty, or the copy failed)
            "copies": {n.path: _str(self.copies.get(n.ino)) for n in refused},
            "kept_dir": _str(self.directory),
            "earlier_copies_removed": self.reclaimed,
        }


def _str(path: Path | None) -> str | None:
    return None if path is None else str(path)
