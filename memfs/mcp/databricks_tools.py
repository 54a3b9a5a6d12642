"""The four tools Databricks Agent Memory's docs ask every user to write by hand, on the
actor (and session) the server was started for, never one the model chooses:
``search_memory(query)``, ``save_memory(path, content, description)`` (a put: create, or
replace; ``append`` adds lines as databricks-agentkit's ``put(append=True)`` does),
``list_memories()``, ``forget_memory(path)``. Paths are the store's (``/notes/a.md``).

No lost update here either: a replace, an append and a forget are made over the content read
just before (``expected_sha256``); an append re-reads and appends again when another writer
got there first; a replace or forget of a changed entry is reported with what it now holds.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from memfs.contract.paths import PathError, validate_file_path
from memfs.mcp import search_tool
from memfs.mcp.backend import ChangedError, MemoryBackend, MissingError, StoredMemory, TakenError
from memfs.mcp.tool_error import ToolError, read_only_refusal, text_argument

log = logging.getLogger(__name__)

SEARCH = "search_memory"
SAVE = "save_memory"
LIST = "list_memories"
FORGET = "forget_memory"


class DatabricksTools:
    def __init__(self, backend: MemoryBackend) -> None:
        self.backend = backend

    async def search(self, arguments: Mapping[str, Any]) -> str:
        return await search_tool.search(self.backend, arguments, tool_paths=False)

    async def list(self, arguments: Mapping[str, Any]) -> str:
        listed = await self.backend.list_below("/")
        if not listed:
            return "No memories saved yet."
        rows = [f"{len(listed)} memories (path, size, description):"]
        rows += [f"{m.path}\t{m.size} bytes\t{m.description}".rstrip("\t") for m in listed]
        return "\n".join(rows)

    async def save(self, arguments: Mapping[str, Any]) -> str:
        path = _path(arguments)
        content = text_argument(arguments, "content")
        description = arguments.get("description")
        if description is not None and not isinstance(description, str):
            raise ToolError("Invalid parameter `description` (not a string)")
        append = arguments.get("append", False)
        if not isinstance(append, bool):
            raise ToolError("Invalid parameter `append` (not true or false)")
        if self.backend.info.read_only:
            raise read_only_refusal(f"`{SAVE}`")
        for attempt in (1, 2):
            memory = await self.backend.read(path)
            if memory is None:
                try:
                    await self.backend.create(path, content, description=description or "")
                except TakenError:
                    if attempt == 2:
                        raise ToolError(
                            f"{path} was not saved: another writer kept changing it."
                        ) from None
                    continue  # created meanwhile: read it and save over it
                return f"Saved {path} (new)."
            new = _appended(memory.content, content) if append else content
            if new == memory.content and description in (None, memory.description):
                return f"{path} already holds that; nothing changed."
            try:
                await self.backend.update(
                    memory.id, expected_sha256=memory.sha256, content=new, description=description
                )
            except (ChangedError, MissingError):
                if append and attempt == 1:
                    continue  # an append applies to whatever is there now
                now = await self.backend.read(path)
                raise _conflict(path, "saved", now) from None
            return f"Saved {path} ({'appended' if append else 'replaced'})."
        raise ToolError(f"{path} was not saved: another writer kept changing it.")

    async def forget(self, arguments: Mapping[str, Any]) -> str:
        path = _path(arguments)
        if self.backend.info.read_only:
            raise read_only_refusal(f"`{FORGET}`")
        memory = await self.backend.read(path)
        if memory is None:
            raise ToolError(f"No memory at {path}.")
        try:
            await self.backend.delete(memory.id, expected_sha256=memory.sha256)
        except MissingError:
            return f"Forgot {path} (it was already gone)."
        except ChangedError:
            raise _conflict(path, "forgotten", await self.backend.read(path)) from None
        return f"Forgot {path}."


def _path(arguments: Mapping[str, Any]) -> str:
    path = text_argument(arguments, "path")
    try:
        return validate_file_path(path)
    except PathError as exc:
        raise ToolError(f"Invalid path {path}: {exc}") from None


def _appended(old: str, new: str) -> str:
    """databricks-agentkit's append: unchanged if ``new`` is empty or already there as whole
    lines, else on a line of its own after ``old``."""
    if not new or f"\n{new}\n" in f"\n{old}\n":
        return old
    return f"{old}\n{new}" if old else new


def _conflict(path: str, done: str, now: StoredMemory | None) -> ToolError:
    held = "it is gone now" if now is None else f"it now holds:\n{now.content}"
    return ToolError(f"{path} was not {done}: another writer changed it after it was read; {held}")
