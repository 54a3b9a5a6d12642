"""The store at a moment, from its version history: the rules ``.versions/`` shows in a mount
(docs/semantics.md, "History") and the console's "Show the store as of" page applies, in one
place for both.

- ``infer_paths``: a redacted version has no path; it is shown at the path of its memory's
  version before it (or, for a first version, after it);
- ``files_at``: from each memory's newest version at or before an instant (with its path), the
  store's files then: a deleted memory is absent, and of two memories at one path (one renamed
  away, another created there, in the same instant) the newer version wins.

Pure functions of their arguments, over anything shaped like a version (``VersionLike``): the
mount's ``MemoryVersion`` objects and the server's lighter rows alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Protocol, TypeVar


class VersionLike(Protocol):
    @property
    def memory_id(self) -> str: ...

    @property
    def operation(self) -> str: ...

    @property
    def created_at(self) -> datetime: ...


V = TypeVar("V", bound=VersionLike)


def infer_paths(own: Sequence[str | None]) -> list[str | None]:
    """The paths of one memory's versions, oldest first, each redacted one's (None) taken
    from the version before it, or for leading ones from the first version after them."""
    paths: list[str | None] = []
    known: str | None = None
    for path in own:
        known = path if path is not None else known
        paths.append(known)
    known = None
    for i in range(len(own) - 1, -1, -1):
        if own[i] is not None:
            known = own[i]
        elif paths[i] is None:
            paths[i] = known
    return paths


def files_at(latest: Iterable[tuple[V, str | None]]) -> dict[str, V]:
    """path -> version: the store's files, given each memory's newest version at or before the
    instant with its path (inferred if redacted), oldest first among equal times."""
    files: dict[str, V] = {}
    for version, path in latest:
        if version.operation == "deleted" or path is None:
            continue
        other = files.get(path)
        if other is None or other.created_at <= version.created_at:
            files[path] = version
    return files
