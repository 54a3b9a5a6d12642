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


def _text(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _limit(what: str, default: int, high: int) -> dict[str, Any]:
    return {
        "type": "integer",
        "minimum": 1,
        "maximum": high,
        "default": default,
        "description": f"at most this many {what} (1-{high}; {default} if left out)",
    }


def _per_command(required: Mapping[str, tuple[str, ...]]) -> dict[str, Any]:
    """``if``/``then``/``else`` on ``command``: the arguments each command needs. Not a root
    ``oneOf``, which says the same: the Anthropic API refuses ``oneOf``, ``anyOf`` and
    ``allOf`` at the top of a tool's schema, and a client that passes MCP tools to it (Claude
    Code, Claude Desktop) fails every request that lists such a tool. The last command is the
    final ``else``: an unknown one fails ``command``'s ``enum``."""
    *chained, (_last, last_needs) = required.items()
    rule: dict[str, Any] = {"required": list(last_needs)}
    for command, needs in reversed(chained):
        rule = {
            "if": {"properties": {"command": {"const": command}}, "required": ["command"]},
            "then": {"required": list(needs)},
            "else": rule,
        }
    return rule


MEMORY_SCHEMA = {
    **_schema(
        {
            "command": {
                "type": "string",
                "enum": list(memory_tool.COMMANDS),
                "description": "what to do; each command needs its own arguments: "
                + "; ".join(
                    f"{command}: {', '.join(needs)}"
                    for command, needs in memory_tool.REQUIRED.items()
                )
                + " (view also takes view_range)",
            },
            "path": _text(
                "view, create, str_replace, insert, delete: a path under /memories, "
                "e.g. /memories/notes/todo.md (view and delete: a directory too)"
            ),
            "view_range": {
                "type": "array",
                "items": {"type": "integer"},
                "minItems": 2,
                "maxItems": 2,
                "description": "view of a file, optional: [start, end], 1-based lines, "
                "end -1 = to the end",
            },
            "file_text": _text("create: the new file's whole content"),
            "old_str": _text("str_replace: the text to replace; must occur exactly once"),
            "new_str": _text("str_replace: the text to put in its place (may be empty)"),
            "insert_line": {
                "type": "integer",
                "minimum": 0,
                "description": "insert: the line after which to insert (0: before the first)",
            },
            "insert_text": _text("insert: the text to insert, as one or more lines"),
            "old_path": _text("rename: the file or directory under /memories to move"),
            "new_path": _text("rename: where to move it (must not exist yet)"),
        },
        ["command"],
    ),
    **_per_command(memory_tool.REQUIRED),
}

MEMORY_DESCRIPTION = (
    "Your persistent memory: files under /memories, kept in a memory store with every version. "
    "Commands: view (a directory two levels deep, or a file with line numbers; view_range), "
    "create (path, file_text; never overwrites), str_replace (path, old_str occurring exactly "
    "once, new_str), insert (path, insert_line, insert_text), delete (path), rename (old_path, "
    "new_path). Every edit applies to the content it read: if someone else changed the file "
    "meanwhile, the edit is applied again only when unambiguous, else the answer shows the "
    "file as it now is."
)

# how to search, the same words for memory_search and search_memory
SEARCH_HOW = (
    "Phrase the query as a few keywords the memory would contain (names, terms, identifiers), "
    "not a question or an expression: a memory matches if it holds any of the words, in any "
    "form (searching finds search), case and accents ignored; quotes, AND, OR, -, * are plain "
    "text and words such as the, of, to are skipped. Each line of the answer: path, relevance, "
    "the line that matches best. The relevance ranks the matches of this answer: 100 for the "
    "best, the others a percentage of its score (50: half as relevant); not a probability, "
    "not comparable across queries. "
    f"{search_tool.DEFAULT_LIMIT} matches unless limit says otherwise (at most "
    f"{search_tool.MAX_LIMIT})."
)
SEARCH_QUERY = _text(
    "keywords to look for, e.g. 'deploy staging database password rotation'; any of the "
    "words matches, the more and the rarer the better the rank"
)
SEARCH_LIMIT = _limit("matches, best first", search_tool.DEFAULT_LIMIT, search_tool.MAX_LIMIT)


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
                "Search the memories under /memories for the ones about something, best first. "
                + SEARCH_HOW,
                _schema({"query": SEARCH_QUERY, "limit": SEARCH_LIMIT}, ["query"]),
                lambda arguments: search_tool.search(backend, arguments),
                False,
                True,
            ),
        ]
        if info.history:
            history = history_tools.HistoryTools(backend)
            path = _text("a file under /memories, e.g. /memories/notes/todo.md (deleted too)")
            specs += [
                ToolSpec(
                    history_tools.HISTORY,
                    "The versions of a memory file, newest first: version id, time, operation "
                    "(created, modified, deleted), who wrote it, size; works for a deleted file. "
                    "With version_id: that version's content, line-numbered. With version_id "
                    "and compare_to: a unified diff from version_id to compare_to (another "
                    "version, or 'current'), to see what changed before restoring.",
                    _schema(
                        {
                            "path": path,
                            "limit": _limit(
                                "versions, newest first",
                                history_tools.DEFAULT_LIMIT,
                                history_tools.MAX_LIMIT,
                            ),
                            "version_id": _text(
                                "optional: a version id this tool listed for the path "
                                "(memver_...); the answer is its content instead of the list"
                            ),
                            "compare_to": _text(
                                "optional, with version_id: another version id of the path, "
                                f"or '{history_tools.CURRENT}' (the content now); the answer "
                                "is the diff from version_id to it"
                            ),
                        },
                        ["path"],
                    ),
                    history.history,
                    False,
                    True,
                ),
                ToolSpec(
                    history_tools.RESTORE,
                    "Write one version's content (a version id from memory_history) back to "
                    "the file as a new version; re-creates a deleted file.",
                    _schema(
                        {
                            "path": path,
                            "version_id": _text(
                                "the version to restore: an id memory_history listed for "
                                "this path (memver_...)"
                            ),
                        },
                        ["path", "version_id"],
                    ),
                    history.restore,
                    True,
                    False,
                ),
            ]
        if info.api == "databricks":
            dbx = databricks_tools.DatabricksTools(backend)
            store_path = _text("the memory's path, e.g. /notes/a.md")
            specs += [
                ToolSpec(
                    databricks_tools.SEARCH,
                    "Search your memories for the ones about something, best first. " + SEARCH_HOW,
                    _schema({"query": SEARCH_QUERY, "limit": SEARCH_LIMIT}, ["query"]),
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
                            "content": _text(
                                "the memory's whole new content (with append: the lines to add)"
                            ),
                            "description": _text(
                                "optional: one line saying what the memory is about, shown "
                                "by list_memories and search_memory"
                            ),
                            "append": {
                                "type": "boolean",
                                "default": False,
                                "description": "true: add content as new lines at the end "
                                "(nothing if they are already there) instead of replacing",
                            },
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
