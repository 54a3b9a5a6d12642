"""``memory_history`` and ``memory_restore``: a memory's versions, and one of them written back.

Memory Stores keep every change as an immutable version; these tools show them (newest first:
id, time, operation, who wrote it, size) and restore one: its content written as a new
version, over the content the tool read (a concurrent change is reported, never overwritten),
or as a new memory when the path holds none any more (it was deleted). Paths are the memory
tool's (``/memories/...``). Only offered where the store has history (``StoreInfo.history``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from memfs.mcp.backend import ChangedError, MemoryBackend, MissingError
from memfs.mcp.memory_paths import STORE_ROOT, to_store, to_tool
from memfs.mcp.tool_error import ToolError, int_argument, read_only_refusal, text_argument

log = logging.getLogger(__name__)

HISTORY = "memory_history"
RESTORE = "memory_restore"
DEFAULT_LIMIT = 10
MAX_LIMIT = 100


class HistoryTools:
    def __init__(self, backend: MemoryBackend) -> None:
        self.backend = backend

    async def history(self, arguments: Mapping[str, Any]) -> str:
        path = text_argument(arguments, "path")
        limit = int_argument(arguments, "limit", default=DEFAULT_LIMIT, low=1, high=MAX_LIMIT)
        store_path = _file_path(path)
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
                        version.created_at.isoformat().replace("+00:00", "Z"),
                        version.operation,
                        version.author or "-",
                        size,
                        to_tool(version.path) if version.path else "-",
                    )
                )
            )
        return "\n".join(rows)

    async def restore(self, arguments: Mapping[str, Any]) -> str:
        path = text_argument(arguments, "path")
        version_id = text_argument(arguments, "version_id")
        if self.backend.info.read_only:
            raise read_only_refusal(f"`{RESTORE}`")
        store_path = _file_path(path)
        try:
            version = await self.backend.version(version_id)
        except MissingError:
            raise ToolError(f"No version {version_id} in this store.") from None
        current = await self.backend.read(store_path)
        if version.path != store_path and (current is None or current.id != version.memory_id):
            raise ToolError(f"Version {version_id} is not a version of {path}.")
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
