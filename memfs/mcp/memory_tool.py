"""The ``memory`` tool: the contract of Claude's memory tool (``memory_20250818``) on a store.

Commands, arguments, output formats and messages are those of the official SDKs' local
implementation (Python's ``BetaLocalFilesystemMemoryTool``; docs/mcp.md),
word for word, so an agent trained on the memory tool needs nothing new. The paths are
``memfs.mcp.memory_paths``'s: ``/memories/a/b.md`` is the memory ``/a/b.md``; a directory is
a path that memories lie below.

What memfs adds, the no-lost-update rule: every write carries the hash of the content it was
computed from (``MemoryBackend``'s ``expected_sha256``). When another writer got there first
(``ChangedError``), ``str_replace`` and ``insert`` read the memory again and apply the edit
once more if it still applies unambiguously (``old_str`` occurs exactly once; the lines on one
side of ``insert_line`` are unchanged); otherwise, and for ``delete`` of a changed file, the
answer names the conflict and shows what the file holds now. Nothing is ever overwritten
without having been read. ``rename`` moves the memory (its id is kept where the API can).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from memfs.mcp.backend import (
    ChangedError,
    Listed,
    MemoryBackend,
    MissingError,
    StoredMemory,
    TakenError,
)
from memfs.mcp.memory_paths import STORE_ROOT, prefix_of, to_store, to_tool
from memfs.mcp.tool_error import ToolError, read_only_refusal, text_argument

log = logging.getLogger(__name__)

NAME = "memory"
# each command and the arguments it needs (the SDKs' contract; view_range is view's only option)
REQUIRED: dict[str, tuple[str, ...]] = {
    "view": ("path",),
    "create": ("path", "file_text"),
    "str_replace": ("path", "old_str", "new_str"),
    "insert": ("path", "insert_line", "insert_text"),
    "delete": ("path",),
    "rename": ("old_path", "new_path"),
}
COMMANDS = tuple(REQUIRED)
WRITE_COMMANDS = frozenset(COMMANDS) - {"view"}
MAX_LINES = 999_999  # the SDK's limit on a viewed file
LINE_NUMBER_WIDTH = 6
LISTING_DEPTH = 2  # a directory's view shows two levels below it


class MemoryTool:
    """The ``memory`` tool on one store (module docstring)."""

    def __init__(self, backend: MemoryBackend) -> None:
        self.backend = backend

    async def run(self, arguments: Mapping[str, Any]) -> str:
        """The answer to one call; a ``ToolError`` says why the call did nothing (or what
        it could not do)."""
        command = arguments.get("command")
        handlers: dict[str, Callable[[Mapping[str, Any]], Awaitable[str]]] = {
            "view": self.view,
            "create": self.create,
            "str_replace": self.str_replace,
            "insert": self.insert,
            "delete": self.delete,
            "rename": self.rename,
        }
        if not isinstance(command, str) or command not in handlers:
            raise ToolError(f"Unknown command: {command}")
        if command in WRITE_COMMANDS and self.backend.info.read_only:
            raise read_only_refusal(f"`{command}`")
        return await handlers[command](arguments)

    # -- view --------------------------------------------------------------------------------

    async def view(self, arguments: Mapping[str, Any]) -> str:
        path = text_argument(arguments, "path", command="view")
        store_path = to_store(path)
        view_range = _view_range(arguments.get("view_range"))
        if store_path != STORE_ROOT:
            memory = await self.backend.read(store_path)
            if memory is not None:
                return _view_file(path, memory.content, view_range)
        below = await self.backend.list_below(prefix_of(store_path))
        if not below and store_path != STORE_ROOT:
            raise ToolError(f"The path {path} does not exist. Please provide a valid path.")
        return _view_directory(path, prefix_of(store_path), below)

    # -- create ------------------------------------------------------------------------------

    async def create(self, arguments: Mapping[str, Any]) -> str:
        path = text_argument(arguments, "path", command="create")
        file_text = text_argument(arguments, "file_text", command="create")
        store_path = to_store(path)
        if store_path == STORE_ROOT or await self._is_directory(store_path):
            raise ToolError(f"File {path} already exists")
        try:
            await self.backend.create(store_path, file_text)
        except TakenError:
            raise ToolError(f"File {path} already exists") from None
        return f"File created successfully at: {path}"

    # -- str_replace -------------------------------------------------------------------------

    async def str_replace(self, arguments: Mapping[str, Any]) -> str:
        path = text_argument(arguments, "path", command="str_replace")
        old = text_argument(arguments, "old_str", command="str_replace")
        new = text_argument(arguments, "new_str", command="str_replace")
        memory = await self._file(path)
        count = memory.content.count(old) if old else 0
        if count == 0:
            raise ToolError(
                f"No replacement was performed, old_str `{old}` did not appear verbatim in {path}."
            )
        if count > 1:
            lines = ", ".join(str(n) for n in _occurrence_lines(memory.content, old))
            raise ToolError(
                f"No replacement was performed. Multiple occurrences of old_str `{old}` in "
                f"lines: {lines}. Please ensure it is unique"
            )
        for attempt in (1, 2):
            position = memory.content.find(old)
            written = memory.content.replace(old, new, 1)
            try:
                await self._write(memory, written)
            except ChangedError:
                memory = await self._reread(path, memory)
                found = memory.content.count(old)
                if attempt == 2 or found != 1:
                    raise _str_replace_conflict(path, old, found, memory.content) from None
                log.info("str_replace: %s changed concurrently; applying the edit again", path)
                continue
            return (
                "The memory file has been edited. Here is the snippet showing the change (with "
                "line numbers):\n" + _snippet(written, memory.content[:position].count("\n"))
            )
        raise AssertionError("unreachable")

    # -- insert ------------------------------------------------------------------------------

    async def insert(self, arguments: Mapping[str, Any]) -> str:
        path = text_argument(arguments, "path", command="insert")
        text = text_argument(arguments, "insert_text", command="insert")
        line = arguments.get("insert_line")
        if isinstance(line, bool) or not isinstance(line, int):
            raise ToolError(f"Invalid `insert_line` parameter: {line}. It should be an integer.")
        memory = await self._file(path)
        lines = _split_lines(memory.content)
        if line < 0 or line > len(lines):
            raise ToolError(
                f"Invalid `insert_line` parameter: {line}. It should be within the range "
                f"[0, {len(lines)}]."
            )
        before, after = lines[:line], lines[line:]
        at = line
        for attempt in (1, 2):
            try:
                await self._write(memory, _inserted(lines, at, text))
            except ChangedError:
                memory = await self._reread(path, memory)
                lines = _split_lines(memory.content)
                found = _insertion_point(lines, before, after)
                if attempt == 2 or found is None:
                    raise ToolError(
                        f"No insertion was performed: {path} was changed by another writer after "
                        f"it was read, and line {line} no longer marks one place in it. It now "
                        f"holds:\n{numbered(memory.content)}"
                    ) from None
                log.info("insert: %s changed concurrently; inserting again at %d", path, found)
                at = found
                continue
            return f"The file {path} has been edited."
        raise AssertionError("unreachable")

    # -- delete ------------------------------------------------------------------------------

    async def delete(self, arguments: Mapping[str, Any]) -> str:
        path = text_argument(arguments, "path", command="delete")
        store_path = to_store(path)
        if store_path == STORE_ROOT:
            raise ToolError("Cannot delete the /memories directory itself")
        memory = await self.backend.read(store_path)
        if memory is not None:
            try:
                await self.backend.delete(memory.id, expected_sha256=memory.sha256)
            except ChangedError:
                now = await self._reread(path, memory)
                raise ToolError(
                    f"{path} was not deleted: another writer changed it after it was read. It "
                    f"now holds:\n{numbered(now.content)}"
                ) from None
            except MissingError:
                raise _vanished(path) from None
            return f"Successfully deleted {path}"
        below = await self.backend.list_below(prefix_of(store_path))
        if not below:
            raise ToolError(f"The path {path} does not exist")
        kept = []
        for listed in below:
            try:
                await self.backend.delete(listed.id, expected_sha256=listed.sha256)
            except ChangedError:
                kept.append(to_tool(listed.path))
            except MissingError:
                pass  # gone already: what was asked
        if kept:
            raise ToolError(
                f"{path} was deleted except {len(kept)} file(s) another writer changed after "
                f"they were listed, which were kept: {', '.join(kept)}"
            )
        return f"Successfully deleted {path}"

    # -- rename ------------------------------------------------------------------------------

    async def rename(self, arguments: Mapping[str, Any]) -> str:
        old_path = text_argument(arguments, "old_path", command="rename")
        new_path = text_argument(arguments, "new_path", command="rename")
        old, new = to_store(old_path), to_store(new_path)
        if old == STORE_ROOT:
            raise ToolError("Cannot rename the /memories directory itself")
        if new.startswith(prefix_of(old)):
            # the SDKs' rename(2) into its own subtree fails with EINVAL; their message, with
            # the tool's paths for the local ones (nothing is moved)
            raise ToolError(f"[Errno 22] Invalid argument: '{old_path}' -> '{new_path}'")
        taken = new == STORE_ROOT or await self.backend.read(new) is not None
        if taken or await self._is_directory(new):
            raise ToolError(f"The destination {new_path} already exists")
        memory = await self.backend.read(old)
        if memory is not None:
            await self._move(memory.id, memory.sha256, old, new, new_path)
            return f"Successfully renamed {old_path} to {new_path}"
        below = await self.backend.list_below(prefix_of(old))
        if not below:
            raise ToolError(f"The path {old_path} does not exist")
        for listed in below:
            target = new + listed.path[len(old) :]
            await self._move(listed.id, listed.sha256, listed.path, target, to_tool(target))
        return f"Successfully renamed {old_path} to {new_path}"

    async def _move(self, memory_id: str, sha256: str, old: str, new: str, shown_new: str) -> None:
        """Move one memory; a content changed meanwhile is moved as it now is (a move writes
        no content, so no edit is lost), once."""
        for attempt in (1, 2):
            try:
                await self.backend.update(memory_id, expected_sha256=sha256, path=new)
                return
            except TakenError:
                raise ToolError(f"The destination {shown_new} already exists") from None
            except MissingError:
                raise _vanished(to_tool(old)) from None
            except ChangedError:
                current = await self.backend.read(old)
                if attempt == 2 or current is None or current.id != memory_id:
                    raise ToolError(
                        f"{to_tool(old)} was not renamed: another writer kept changing it."
                    ) from None
                sha256 = current.sha256

    # -- shared ------------------------------------------------------------------------------

    async def _file(self, path: str) -> StoredMemory:
        """The memory at tool path ``path``, or the contract's refusal."""
        store_path = to_store(path)
        memory = None if store_path == STORE_ROOT else await self.backend.read(store_path)
        if memory is not None:
            return memory
        if store_path == STORE_ROOT or await self._is_directory(store_path):
            raise ToolError(f"The path {path} is not a file.")
        raise ToolError(f"The path {path} does not exist. Please provide a valid path.")

    async def _reread(self, path: str, before: StoredMemory) -> StoredMemory:
        """The memory read again after a concurrent change; gone (or replaced by another
        memory) is the contract's message."""
        memory = await self.backend.read(before.path)
        if memory is None or memory.id != before.id:
            raise _vanished(path)
        return memory

    async def _write(self, memory: StoredMemory, content: str) -> None:
        """``content`` over ``memory``, guarded by the hash of the content it was made from."""
        try:
            await self.backend.update(memory.id, expected_sha256=memory.sha256, content=content)
        except MissingError:
            raise _vanished(to_tool(memory.path)) from None

    async def _is_directory(self, store_path: str) -> bool:
        return bool(await self.backend.list_below(prefix_of(store_path)))


def _vanished(path: str) -> ToolError:
    return ToolError(
        f"The file {path} no longer exists (may have been deleted or renamed concurrently)."
    )


def _str_replace_conflict(path: str, old: str, found: int, content: str) -> ToolError:
    now = "no longer appears verbatim in it" if found == 0 else f"now appears {found} times"
    return ToolError(
        f"No replacement was performed: {path} was changed by another writer after it was "
        f"read, and old_str `{old}` {now}. It now holds:\n{numbered(content)}"
    )


def _view_range(value: object) -> tuple[int, int] | None:
    if value is None:
        return None
    if (
        not isinstance(value, list | tuple)
        or len(value) != 2
        or not all(isinstance(n, int) and not isinstance(n, bool) for n in value)
    ):
        raise ToolError(f"Invalid `view_range` parameter: {value}. It should be [start, end].")
    return (value[0], value[1])


def _view_file(path: str, content: str, view_range: tuple[int, int] | None) -> str:
    lines = content.split("\n")
    if len(lines) > MAX_LINES:
        raise ToolError(f"File {path} exceeds maximum line limit of 999,999 lines.")
    start = 0
    shown = lines
    if view_range is not None:
        start = max(1, view_range[0]) - 1
        end = len(lines) if view_range[1] == -1 else view_range[1]
        shown = lines[start:end]
    numbered = [_numbered_line(start + 1 + i, line) for i, line in enumerate(shown)]
    return f"Here's the content of {path} with line numbers:\n" + "\n".join(numbered)


def _view_directory(path: str, prefix: str, below: list[Listed]) -> str:
    """Files and directories up to two levels below ``prefix``, hidden names skipped, each
    directory followed by its own entries, names sorted; a directory's size is the sum of its
    memories' sizes (a store has no directory blocks)."""
    tree: dict[str, Any] = {}  # name -> subtree (a directory) or size (a file)
    total = 0
    for listed in below:
        total += listed.size
        parts = listed.path[len(prefix) :].split("/")
        if any(part.startswith(".") for part in parts[:LISTING_DEPTH]):
            continue
        node = tree
        for depth, part in enumerate(parts[:LISTING_DEPTH], start=1):
            if depth == len(parts):
                node[part] = listed.size
                break
            entry = node.setdefault(part, {"": 0})
            if not isinstance(entry, dict):  # a file and a directory of one name: the file
                break
            entry[""] += listed.size
            node = entry
    rows = [f"{_size(total)}\t{path}"]

    def walk(node: dict[str, Any], relative: str) -> None:
        for name in sorted(n for n in node if n):
            entry = node[name]
            shown = f"{relative}{name}"
            if isinstance(entry, dict):
                rows.append(f"{_size(entry[''])}\t{path}/{shown}/")
                walk(entry, f"{shown}/")
            else:
                rows.append(f"{_size(entry)}\t{path}/{shown}")

    walk(tree, "")
    header = (
        f"Here're the files and directories up to 2 levels deep in {path}, excluding hidden items:"
    )
    return header + "\n" + "\n".join(rows)


def _size(size: int) -> str:
    """The SDK's human size: 0B, 512B, 1.5K, 2M."""
    if size == 0:
        return "0B"
    units = ["B", "K", "M", "G"]
    i = min((size.bit_length() - 1) // 10, len(units) - 1)
    value = size / (1024**i)
    return f"{int(value)}{units[i]}" if value == int(value) else f"{value:.1f}{units[i]}"


def _numbered_line(number: int, line: str) -> str:
    return f"{str(number).rjust(LINE_NUMBER_WIDTH)}\t{line}"


def numbered(content: str) -> str:
    return "\n".join(_numbered_line(i, line) for i, line in enumerate(content.split("\n"), 1))


def _snippet(content: str, changed_line: int) -> str:
    """Two lines either side of the changed line (0-based), numbered."""
    lines = content.split("\n")
    start, end = max(0, changed_line - 2), min(len(lines), changed_line + 3)
    return "\n".join(_numbered_line(n, lines[n - 1]) for n in range(start + 1, end + 1))


def _occurrence_lines(content: str, old: str) -> list[int]:
    lines = []
    start = 0
    while (position := content.find(old, start)) != -1:
        lines.append(content[:position].count("\n") + 1)
        start = position + 1
    return lines


def _split_lines(content: str) -> list[str]:
    """Lines split on LF only (a CR stays), without the empty tail of a final newline."""
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _inserted(lines: list[str], at: int, text: str) -> str:
    result = [*lines[:at], text.rstrip("\n"), *lines[at:]]
    content = "\n".join(result)
    return content if content.endswith("\n") else content + "\n"


def _insertion_point(lines: list[str], before: list[str], after: list[str]) -> int | None:
    """Where an insertion meant to go between ``before`` and ``after`` (the lines it was
    computed against) goes in ``lines``, changed since: after ``before`` if the file still
    starts with it, before ``after`` if it still ends with it; None if neither holds or the
    two disagree (the change was made at the insertion point itself)."""
    points = set()
    if lines[: len(before)] == before:
        points.add(len(before))
    if len(after) <= len(lines) and lines[len(lines) - len(after) :] == after:
        points.add(len(lines) - len(after))
    return points.pop() if len(points) == 1 else None
