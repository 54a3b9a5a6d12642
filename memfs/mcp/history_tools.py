"""``memory_history`` and ``memory_restore``: a memory's versions, and one of them written back.

Memory Stores keep every change as an immutable version; these tools show them (newest first:
id, time, operation, who wrote it, size), one version's content (``version_id``), what changed
between two (``version_id`` and ``compare_to``: another version, or ``current``, a unified
diff), and restore one: its content written as a new version, over the content the tool read
(a concurrent change is reported, never overwritten), or as a new memory when the path holds
none any more (it was deleted). Paths are the memory tool's (``/memories/...``). Only offered
where the store has history (``StoreInfo.history``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from memfs.contract.unified_diff import unified_diff
from memfs.mcp.backend import ChangedError, MemoryBackend, MissingError, StoredMemory, Version
from memfs.mcp.memory_paths import STORE_ROOT, to_store, to_tool
from memfs.mcp.memory_tool import numbered
from memfs.mcp.tool_error import ToolError, int_argument, read_only_refusal, text_argument

log = logging.getLogger(__name__)

HISTORY = "memory_history"
RESTORE = "memory_restore"
DEFAULT_LIMIT = 10
MAX_LIMIT = 100
CURRENT = "current"  # compare_to: the content the memory holds now


class HistoryTools:
    def __init__(self, backend: MemoryBackend) -> None:
        self.backend = backend

    async def history(self, arguments: Mapping[str, Any]) -> str:
        path = text_argument(arguments, "path")
        limit = int_argument(arguments, "limit", default=DEFAULT_LIMIT, low=1, high=MAX_LIMIT)
        store_path = _file_path(path)
        if arguments.get("version_id") is not None:
            return await self._one_version(path, store_path, arguments)
        if arguments.get("compare_to") is not None:
            raise ToolError("`compare_to` needs `version_id`: the version to compare it with.")
        try:
            versions = await self.backend.history(store_path, limit)
        except MissingError:
            raise ToolError(f"The path {path} has no history: no memory was ever there.") from None
        rows = [f"Versions of {path}, newest first (id, time, operation, author, size, path):"]
        for version in versions:
            size = "-" if version.size is None else f"{version.size} bytes"
            rows.append(
                "\t".join(
                    (
                        version.id,
                        _time(version),
                        version.operation,
                        version.author or "-",
                        size,
                        to_tool(version.path) if version.path else "-",
                    )
                )
            )
        return "\n".join(rows)

    async def _one_version(self, path: str, store_path: str, arguments: Mapping[str, Any]) -> str:
        """``version_id``'s content, numbered; with ``compare_to``, the diff from it to that
        version (or to the current content)."""
        version_id = text_argument(arguments, "version_id")
        version, current = await self._version_of(path, store_path, version_id)
        old = _content(path, version)
        compare_to = arguments.get("compare_to")
        if compare_to is None:
            return (
                f"Version {version_id} of {path} ({version.operation} "
                f"{_time(version)} by {version.author or 'unknown'}), with line numbers:\n"
                + numbered(old)
            )
        if not isinstance(compare_to, str):
            raise ToolError("Invalid (not a string) parameter `compare_to`")
        if compare_to == CURRENT:
            if current is None:
                raise ToolError(f"{path} does not exist now: nothing current to compare with.")
            new, new_label = current.content, f"{path} (current)"
        else:
            other, _ = await self._version_of(path, store_path, compare_to)
            new, new_label = _content(path, other), f"{path} @ {compare_to}"
        diff = unified_diff(old, new, f"{path} @ {version_id}", new_label)
        if not diff:
            return f"No difference: {path} @ {version_id} and {new_label} hold the same content."
        return "".join(diff).rstrip("\n")

    async def _version_of(
        self, path: str, store_path: str, version_id: str
    ) -> tuple[Version, StoredMemory | None]:
        """Version ``version_id`` with its content, and the memory now at ``store_path``; a
        refusal if it is no version of the memory at ``path`` (now, or the last one there)."""
        try:
            version = await self.backend.version(version_id)
        except MissingError:
            raise ToolError(f"No version {version_id} in this store.") from None
        current = await self.backend.read(store_path)
        if version.path != store_path and (current is None or current.id != version.memory_id):
            raise ToolError(f"Version {version_id} is not a version of {path}.")
        return version, current

    async def restore(self, arguments: Mapping[str, Any]) -> str:
        path = text_argument(arguments, "path")
        version_id = text_argument(arguments, "version_id")
        if self.backend.info.read_only:
            raise read_only_refusal(f"`{RESTORE}`")
        store_path = _file_path(path)
        version, current = await self._version_of(path, store_path, version_id)
        if version.content is None:
            raise ToolError(
                f"Version {version_id} of {path} holds no content (a deletion, or redacted): "
                "nothing to restore."
            )
        if current is None:
            await self.backend.create(store_path, version.content)
            return f"Restored {path} from version {version_id}: the memory was created again."
        if current.content == version.content:
            return f"{path} already holds the content of version {version_id}; nothing changed."
        try:
            await self.backend.update(
                current.id, expected_sha256=current.sha256, content=version.content
            )
        except (ChangedError, MissingError):
            raise ToolError(
                f"{path} was not restored: another writer changed it while it was being "
                "restored. View it and try again."
            ) from None
        return f"Restored {path} from version {version_id}: written as a new version."


def _file_path(path: str) -> str:
    store_path = to_store(path)
    if store_path == STORE_ROOT:
        raise ToolError(f"The path {path} is not a file.")
    return store_path


def _time(version: Version) -> str:
    return version.created_at.isoformat().replace("+00:00", "Z")


def _content(path: str, version: Version) -> str:
    if version.content is None:
        raise ToolError(
            f"Version {version.id} of {path} holds no content (a deletion, or redacted): "
            "nothing to show."
        )
    return version.content
