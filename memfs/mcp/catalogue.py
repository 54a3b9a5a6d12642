"""Which tools one store gets, what each takes (its JSON schema) and which code answers it.

Every store: ``memory`` (reads, and writes unless read-only, where its write commands refuse)
and ``memory_search``. A store with history (Memory Stores): ``memory_history``, and
``memory_restore`` unless read-only. A Databricks store: ``search_memory``, ``list_memories``,
and ``save_memory``, ``forget_memory`` unless read-only. A read-only store is offered no tool
that only writes; ``Catalogue.call`` refuses one anyway, should a client call it unlisted.

Free of the MCP SDK: ``memfs.mcp.app`` turns these into the protocol's types.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from memfs.mcp import databricks_tools, history_tools, memory_tool, search_tool
from memfs.mcp.backend import MemoryBackend
from memfs.mcp.tool_error import ToolError, read_only_refusal

log = logging.getLogger(__name__)

Handler = Callable[[Mapping[str, Any]], Awaitable[str]]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]
    handler: Handler
    writes: bool  # changes the store (a read-only store is not offered it)
    reads_only: bool  # never changes the store (the protocol's readOnlyHint)


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_STRING = {"type": "string"}
_LIMIT = {"type": "integer", "minimum": 1, "maximum": 100, "description": "at most this many"}

MEMORY_SCHEMA = _schema(
    {
        "command": {"type": "string", "enum": list(memory_tool.COMMANDS)},
        "path": {**_STRING, "description": "a path under /memories (all but rename)"},
        "view_range": {
            "type": "array",
            "items": {"type": "integer"},
            "minItems": 2,
            "maxItems": 2,
            "description": "view: [start, end] lines, 1-based; end -1 = to the end",
        },
        "file_text": {**_STRING, "description": "create: the file's content"},
        "old_str": {**_STRING, "description": "str_replace: text that occurs exactly once"},
        "new_str": {**_STRING, "description": "str_replace: its replacement"},
        "insert_line": {
            "type": "integer",
            "minimum": 0,
            "description": "insert: the line after which to insert (0: before the first)",
        },
        "insert_text": {**_STRING, "description": "insert: the text to insert"},
        "old_path": {**_STRING, "description": "rename: the file or directory to move"},
        "new_path": {**_STRING, "description": "rename: where to (must not exist)"},
    },
    ["command"],
)

MEMORY_DESCRIPTION = (
    "Your persistent memory: files under /memories, kept in a memory store with every version. "
    "Commands: view (a directory two levels deep, or a file with line numbers; view_range), "
    "create (path, file_text; never overwrites), str_replace (path, old_str occurring exactly "
    "once, new_str), insert (path, insert_line, insert_text), delete (path), rename (old_path, "
    "new_path). Every edit applies to the content it read: if someone else changed the file "
    "meanwhile, the edit is applied again only when unambiguous, else the answer shows the "
    "file as it now is."
)


class Catalogue:
    """The tools of one store (module docstring)."""

    def __init__(self, backend: MemoryBackend) -> None:
        self.backend = backend
        info = backend.info
        memory = memory_tool.MemoryTool(backend)
        specs = [
            ToolSpec(memory_tool.NAME, MEMORY_DESCRIPTION, MEMORY_SCHEMA, memory.run, False, False),
            ToolSpec(
                search_tool.NAME,
                "Search the memories under /memories for free text; the best matches first, "
                "each with its path, score and the line that matches best.",
                _schema({"query": _STRING, "limit": _LIMIT}, ["query"]),
                lambda arguments: search_tool.search(backend, arguments),
                False,
                True,
            ),
        ]
        if info.history:
            history = history_tools.HistoryTools(backend)
            path = {**_STRING, "description": "a file under /memories"}
            specs += [
                ToolSpec(
                    history_tools.HISTORY,
                    "The versions of a memory file, newest first: version id, time, operation "
                    "(created, modified, deleted), who wrote it, size. Works for a deleted file.",
                    _schema({"path": path, "limit": _LIMIT}, ["path"]),
                    history.history,
                    False,
                    True,
                ),
                ToolSpec(
                    history_tools.RESTORE,
                    "Write one version's content (a version id from memory_history) back to "
                    "the file as a new version; re-creates a deleted file.",
                    _schema({"path": path, "version_id": _STRING}, ["path", "version_id"]),
                    history.restore,
                    True,
                    False,
                ),
            ]
        if info.api == "databricks":
            dbx = databricks_tools.DatabricksTools(backend)
            store_path = {**_STRING, "description": "the memory's path, e.g. /notes/a.md"}
            specs += [
                ToolSpec(
                    databricks_tools.SEARCH,
                    "Search your memories for free text (best first: path, score, best line).",
                    _schema({"query": _STRING, "limit": _LIMIT}, ["query"]),
                    dbx.search,
                    False,
                    True,
                ),
                ToolSpec(
                    databricks_tools.SAVE,
                    "Save a memory at a path: create it, or replace its content (append: add "
                    "the content as new lines instead); description optional.",
                    _schema(
                        {
                            "path": store_path,
                            "content": _STRING,
                            "description": _STRING,
                            "append": {"type": "boolean", "default": False},
                        },
                        ["path", "content"],
                    ),
                    dbx.save,
                    True,
                    False,
                ),
                ToolSpec(
                    databricks_tools.LIST,
                    "List your memories: path, size, description.",
                    _schema({}, []),
                    dbx.list,
                    False,
                    True,
                ),
                ToolSpec(
                    databricks_tools.FORGET,
                    "Forget (delete) the memory at a path.",
                    _schema({"path": store_path}, ["path"]),
                    dbx.forget,
                    True,
                    False,
                ),
            ]
        self._all = {spec.name: spec for spec in specs}
        self.offered = [s for s in specs if not (s.writes and info.read_only)]

    async def call(self, name: str, arguments: Mapping[str, Any] | None) -> str:
        """The answer of tool ``name``; ``ToolError`` (or a backend's error) if it failed."""
        spec = self._all.get(name)
        if spec is None:
            raise ToolError(f"Unknown tool: {name}")
        if spec.writes and self.backend.info.read_only:
            raise read_only_refusal(f"`{name}`")
        return await spec.handler(arguments or {})
