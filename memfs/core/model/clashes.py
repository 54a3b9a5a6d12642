"""A file and a directory with one name: memories ``/x`` and ``/x/y`` (the API allows both).

A filesystem cannot show both under ``x``. The rule (docs/semantics.md, "Files and
directories"): the directory keeps the name, so ``x/y`` and every tool walking the tree see
everything below it; the file memory ``/x`` is shown in the same directory as ``x.file-clash``
(``x.file-clash-2``, ``-3``, ... when that name is taken by an entry of its own). The derived name
*is* the memory ``/x``: reads and writes go to ``/x`` (same id, new versions), ``unlink`` deletes
it, ``rename`` moves it (which ends the clash). Each clash is logged once, as a warning naming
both paths, and listed by ``memfs status``.

This module owns the naming rule and the record of the clashes seen; ``namespace`` decides when a
listing shows one. It must not talk to the server or know about FUSE.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass

from memfs.contract import paths

log = logging.getLogger(__name__)

SUFFIX = ".file-clash"
_DERIVED = re.compile(re.escape(SUFFIX) + r"(?:-[1-9][0-9]*)?$")


def derived_name(name: str, taken: Callable[[str], bool]) -> str:
    """The name the file ``name`` is shown under: ``x.file-clash``, or the first of
    ``x.file-clash-2``, ``-3``, ... that ``taken`` says is free (never a real entry's name)."""
    candidate = name + SUFFIX
    number = 2
    while taken(candidate):
        candidate = f"{name}{SUFFIX}-{number}"
        number += 1
    return candidate


def base_name(name: str) -> str | None:
    """``x.file-clash`` or ``x.file-clash-3`` -> ``x`` (the name it may stand for), else None."""
    match = _DERIVED.search(name)
    if match is None or match.start() == 0:
        return None
    return name[: match.start()]


@dataclass(frozen=True)
class Clash:
    memory_id: str
    memory_path: str  # the file memory's path on the server: ``/d/x``
    shown_path: str  # where the mount shows it: ``/d/x.file-clash``


class Clashes:
    """The clashes this mount has seen, by memory id (a memory is in at most one)."""

    def __init__(self) -> None:
        self._by_id: dict[str, Clash] = {}

    def get(self, memory_id: str | None) -> Clash | None:
        return self._by_id.get(memory_id) if memory_id is not None else None

    def note(self, memory_id: str, memory_path: str, shown_path: str) -> None:
        """A listing shows the clash; logged the first time (or when the names change)."""
        clash = Clash(memory_id, memory_path, shown_path)
        if self._by_id.get(memory_id) == clash:
            return
        self._by_id[memory_id] = clash
        log.warning(
            "name clash: %s is a file and %s a directory in the store; the directory keeps the "
            "name, the file is shown as %s",
            memory_path,
            paths.as_prefix(memory_path),
            shown_path,
        )

    def resolved(self, memory_id: str) -> None:
        """The memory is shown under its own path again (moved, or the directory went)."""
        clash = self._by_id.pop(memory_id, None)
        if clash is not None:
            log.info("name clash of %s resolved", clash.memory_path)

    def current(self, is_shown: Callable[[Clash], bool]) -> list[Clash]:
        """The clashes still shown (``is_shown`` says if a clash's file is at its name)."""
        return [c for c in self._by_id.values() if is_shown(c)]
