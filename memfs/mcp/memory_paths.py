"""The memory tool's paths and the store's: ``/memories/notes/a.md`` is the memory
``/notes/a.md``; ``/memories`` is the store's root (``/``).

Every path the model sends is hostile: it must start with ``/memories``; ``.`` and ``..``
segments are resolved, and one that would climb above ``/memories`` is refused with the
contract's message; what is left must be a valid memory path (``memfs.contract.paths``, the rules
the server applies). Stores hold no links, so no link can lead out.
"""

from __future__ import annotations

import logging

from memfs.contract.paths import PathError, validate_file_path
from memfs.mcp.tool_error import ToolError

log = logging.getLogger(__name__)

ROOT = "/memories"
STORE_ROOT = "/"


def to_store(path: object) -> str:
    """The store path that the tool path ``path`` names (``/`` for ``/memories``)."""
    if not isinstance(path, str) or not (path == ROOT or path.startswith(ROOT + "/")):
        raise ToolError(f"Path must start with /memories, got: {path}")
    segments: list[str] = []
    for segment in path[len(ROOT) :].split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not segments:
                raise ToolError(f"Path {path} would escape /memories directory")
            segments.pop()
            continue
        segments.append(segment)
    if not segments:
        return STORE_ROOT
    store_path = "/" + "/".join(segments)
    try:
        validate_file_path(store_path)
    except PathError as exc:
        raise ToolError(f"Path {path} is not a valid memory path: {exc}") from None
    return store_path


def to_tool(store_path: str) -> str:
    """The tool path of the store path ``store_path``."""
    return ROOT if store_path == STORE_ROOT else ROOT + store_path


def prefix_of(store_path: str) -> str:
    """The listing prefix of a directory: ``/`` -> ``/``, ``/a`` -> ``/a/``."""
    return store_path if store_path.endswith("/") else store_path + "/"
