"""Files the mount refuses to upload: over 102,400 bytes (EFBIG) or not UTF-8 (EILSEQ).

Owns the ``refused`` state of file nodes, what happens to refused content, and how refusals are
counted and reported (docs/semantics.md, "Refused files"):
- ``TOO_LARGE``: a ``write`` crossed the limit. From then on the file is never uploaded in the
  state that open left it in (a prefix of what the program meant to write), until it is
  truncated (``ftruncate``, ``O_TRUNC``, ``>``) to a size the store accepts; then it is an
  ordinary dirty file again;
- ``NOT_UTF8``: a commit (``fsync``, ``close``, rename) found bytes that are not UTF-8; the
  refusal ends when a later commit finds valid text;
- the content of a refused file (if any) is copied to ``<cache dir>/<store id>/kept/``
  (written and fsynced when the refusal is answered), the copy is removed when the refusal
  ends or the file is removed, and every refused file still there at unmount is listed in the
  unmount report with its copy.

It must not decide when content is refused (``vfs`` does), talk to the server or touch FUSE.
"""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path

from memfs.inodes import Node

log = logging.getLogger(__name__)

TOO_LARGE = "too large"
NOT_UTF8 = "not UTF-8"

_WHY = {
    TOO_LARGE: "a write over 102,400 bytes was refused (EFBIG)",
    NOT_UTF8: "not UTF-8 text (EILSEQ)",
}
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class Refusals:
    """See the module docstring. ``directory`` None: no copies are kept (tests of the core)."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory
        self.life = f"{int(time.time() * 1000):x}"
        self.count = 0  # refusals answered since the mount started
        self.by_reason: dict[str, int] = {TOO_LARGE: 0, NOT_UTF8: 0}
        self.nodes: dict[int, Node] = {}  # refused file nodes by inode
        self.copies: dict[int, Path] = {}

    def refuse(self, node: Node, reason: str) -> None:
        """``node`` is refused for ``reason`` (counted and logged once per refusal)."""
        if node.refused == TOO_LARGE and reason != TOO_LARGE:
            self.keep(node)  # still refused for its size: that ends only with a truncate
            return
        if node.refused != reason:
            self.count += 1
            self.by_reason[reason] = self.by_reason.get(reason, 0) + 1
            log.warning(
                "refused %s: %s; not uploaded, kept locally%s",
                node.path,
                _WHY.get(reason, reason),
                " until it is truncated" if reason == TOO_LARGE else "",
            )
        node.refused = reason
        self.nodes[node.ino] = node
        self.keep(node)

    def keep(self, node: Node) -> None:
        """Copy the local content of refused ``node`` to the kept directory (durably)."""
        if self.directory is None or node.path is None or not node.data:
            return
        name = f"{self.life}-{node.ino}-{_SAFE.sub('_', node.path.strip('/'))[:150]}"
        target = self.directory / name
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            temp = target.with_name(target.name + ".tmp")
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, bytes(node.data))
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, target)
        except OSError as exc:
            log.error("cannot keep a copy of refused %s in %s: %s", node.path, target, exc)
            return
        old = self.copies.get(node.ino)
        if old is not None and old != target:
            old.unlink(missing_ok=True)
        self.copies[node.ino] = target

    def clear(self, node: Node) -> None:
        """The refusal of ``node`` ends (truncated, valid again, or removed)."""
        if node.refused is None:
            return
        node.refused = None
        self.nodes.pop(node.ino, None)
        copy = self.copies.pop(node.ino, None)
        if copy is not None:
            copy.unlink(missing_ok=True)

    def lines(self) -> list[str]:
        """One line per refused file still in the mount (for the unmount report)."""
        out = []
        for node in list(self.nodes.values()):
            if node.path is None or node.refused is None:
                self.clear(node)  # removed by the user: nothing to report or keep
                continue
            copy = self.copies.get(node.ino)
            where = f"a copy is in {copy}" if copy is not None else "it was empty"
            out.append(
                f"refused {node.path}: {_WHY.get(node.refused, node.refused)}; never "
                f"uploaded, {where}"
            )
        return out

    def status(self) -> dict[str, object]:
        return {
            "count": self.count,
            "by_reason": dict(self.by_reason),
            "files": sorted(n.path for n in self.nodes.values() if n.path is not None),
        }
