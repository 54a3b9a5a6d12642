"""Descriptions in a synced directory: ``DIR/.memfs/descriptions.json``, as ``memfs export``
keeps them (Databricks stores; ``memfs.transfer.layout`` is the format: ``{path: text}``, one
entry per line, keys sorted).

The store's side is written into DIR after each pass (atomically, only when it changed); an
edit of the file in DIR sets the descriptions it lists that differ from the store's, through the
core (``StoreCore.descriptions``: the mount's ``user.description``, uploaded by the write-back
queue, journaled first). The file is read as hostile input (``load_descriptions``: entry by
entry, with caps); an entry the core refuses is logged and skipped. A path missing from the
file changes nothing (deleting the file must not wipe every description): an empty text ``""``
removes one.
"""

from __future__ import annotations

import logging

from memfs.contract.errors import FsError
from memfs.contract.paths import shown
from memfs.core import StoreCore
from memfs.sync.corefiles import CoreFile
from memfs.sync.localdir import LocalDir, Seen
from memfs.transfer.layout import FormatError, dump_descriptions, load_descriptions

log = logging.getLogger(__name__)

DESCRIPTIONS_PATH = "/.memfs/descriptions.json"
DESCRIPTION_ATTRIBUTE = "user.description"
MAX_FILE_BYTES = 16 * 1024 * 1024  # 2,000 entries of at most a few kB each, with room


class DescriptionsFile:
    """The descriptions file of one synced directory (module docstring)."""

    def __init__(self, core: StoreCore, local: LocalDir) -> None:
        self.core = core
        self.local = local
        self._seen: Seen | None = None  # the file as this sync last wrote or read it

    @property
    def enabled(self) -> bool:
        return self.core.descriptions.enabled

    async def take_local_edits(self, walked: dict[str, CoreFile]) -> int:
        """Set the descriptions the file lists that differ from the store's; how many."""
        state = self.local.stat(DESCRIPTIONS_PATH)
        if not isinstance(state, Seen) or state == self._seen:
            return 0
        got = self.local.read(DESCRIPTIONS_PATH, MAX_FILE_BYTES)
        if got is None:
            return 0
        data, self._seen = got
        try:
            found = load_descriptions(data)
        except FormatError as exc:
            log.warning("%s: %s (descriptions unchanged)", DESCRIPTIONS_PATH, exc)
            return 0
        for path, why in found.refused:
            log.warning("%s: %s: %s", DESCRIPTIONS_PATH, shown(path or "?"), why)
        changed = 0
        for path, text in found.entries.items():
            core_file = walked.get(path)
            if core_file is None or core_file.description == text:
                continue
            try:
                await self.core.descriptions.set(
                    core_file.ino, DESCRIPTION_ATTRIBUTE, text.encode("utf-8")
                )
            except FsError as exc:
                log.warning("the description of %s stays: %s", shown(path), exc)
                continue
            changed += 1
        return changed

    def write_store_side(self, walked: dict[str, CoreFile]) -> None:
        """Write the store's descriptions into DIR if they are not what the file holds."""
        data = dump_descriptions(
            {path: f.description for path, f in walked.items() if f.description}
        )
        state = self.local.stat(DESCRIPTIONS_PATH)
        expect = state if isinstance(state, Seen) else None
        if expect is not None and expect != self._seen:
            return  # edited here since: taken first (``take_local_edits``), written next pass
        if expect is not None:
            current = self.local.read(DESCRIPTIONS_PATH, MAX_FILE_BYTES)
            if current is not None and current[0] == data:
                return
        elif data == dump_descriptions({}):
            return  # nothing to say, and no file yet
        written = self.local.write(DESCRIPTIONS_PATH, data, expect, read_only=False)
        if written is not None:
            self._seen = written
