"""Directory listings derived from the memories of a whole sub-tree (a ``depth=0`` listing).

A store has no empty directories: a directory exists because a memory lies below it, so the
memories below a directory say everything its ``depth=1`` listing says (its memories, and a
prefix for each sub-directory). ``SubTreeListings`` collects a sub-tree's memories as their
pages arrive and hands out each directory's listing once it is complete:
- while the pages come in path order (checked: each path sorts after the one before), a
  directory is complete as soon as a path past its range arrived (a directory's paths share its
  prefix, so they are contiguous in path order): the walker lists it without waiting for the
  rest of the sub-tree;
- else only at the end (``rest``), when every page arrived. Pages found out of order after
  some listings were handed out make those suspect: ``rest`` then hands out nothing and
  ``disordered`` tells the caller to drop what it kept.

It must not know about caches or requests: ``memfs.core.fetch.prefetch`` feeds it and keeps
what it hands out.
"""

from __future__ import annotations

from memfs.contract import paths
from memfs.contract.models import ListItem, Memory, MemoryPrefix

# a directory, its complete listing's items, and the page its first item came in (0 on): the
# listing is as old as the request before that page (a memory added in its range meanwhile
# would be missing)
Listed = tuple[str, tuple[ListItem, ...], int]


class SubTreeListings:
    """The listings of ``root`` and of every directory below it; see the module docstring."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._items: dict[str, list[ListItem]] = {root: []}
        self._open: list[str] = []  # directories below the root not handed out yet
        self._last: str | None = None
        self._ordered = True
        self._handed_out = False  # some listings left before the last page (``passed``)
        self._page = 0
        self._first_page: dict[str, int] = {root: 0}

    def next_page(self) -> None:
        """The memories added from now on came in the next page."""
        self._page += 1

    def add(self, memory: Memory) -> None:
        """One memory of the sub-tree (a path outside it is ignored)."""
        path = memory.path
        if not paths.is_below(path, self.root):
            return
        if self._last is not None and path <= self._last:
            self._ordered = False  # no longer sure which directories are complete
        self._last = path
        directory = paths.parent(path)
        self._ensure(directory)
        self._items[directory].append(memory)

    def _ensure(self, directory: str) -> None:
        if directory in self._items:
            return
        parent = paths.parent(directory)
        self._ensure(parent)
        self._items[parent].append(MemoryPrefix(paths.as_prefix(directory)))
        self._items[directory] = []
        self._first_page[directory] = self._page
        self._open.append(directory)

    def passed(self) -> list[Listed]:
        """The directories complete since the last call: the pages went past their range."""
        last = self._last
        if not self._ordered or last is None:
            return []
        done = [d for d in self._open if not last.startswith(paths.as_prefix(d))]
        if done:
            self._open = [d for d in self._open if last.startswith(paths.as_prefix(d))]
            self._handed_out = True
        return [self._listed(d) for d in done]

    @property
    def disordered(self) -> bool:
        """Pages came out of path order after listings were handed out: those may miss memories."""
        return self._handed_out and not self._ordered

    def rest(self) -> list[Listed]:
        """Every directory not handed out yet, the root last: all pages arrived."""
        if self.disordered:
            return []
        done, self._open = self._open, []
        return [self._listed(d) for d in [*done, self.root]]

    def _listed(self, directory: str) -> Listed:
        items = self._items.pop(directory, [])
        first = self._first_page.pop(directory, 0)
        return directory, tuple(sorted(items, key=lambda item: item.path)), first
