"""``memory_search``: the memories that best match free text, ranked, each with its path (the
memory tool's ``/memories/...``), relevance (100 for the best, the others a percentage of it:
``memfs.contract.search_words.relevance_of``, as ``.search/`` and ``memfs search`` show it) and
the line that matches best. The server ranks when
it can, else a local index of the store does (the backend decides: ``MemoryBackend.search``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from memfs.contract.search_words import query_terms, relevance_of
from memfs.mcp.backend import MemoryBackend
from memfs.mcp.memory_paths import to_tool
from memfs.mcp.tool_error import ToolError, int_argument, text_argument

log = logging.getLogger(__name__)

NAME = "memory_search"
DEFAULT_LIMIT = 10
MAX_LIMIT = 100


async def search(
    backend: MemoryBackend, arguments: Mapping[str, Any], *, tool_paths: bool = True
) -> str:
    """The ranked matches, one a line: path, relevance, best line (and description, if any).
    ``tool_paths``: paths as ``/memories/...`` (else the store's own)."""
    query = text_argument(arguments, "query")
    limit = int_argument(arguments, "limit", default=DEFAULT_LIMIT, low=1, high=MAX_LIMIT)
    if not query_terms(query):
        raise ToolError("The query has no word to look for.")
    matches = await backend.search(query, limit)
    if not matches:
        return f"No memory matches {query!r}."
    rows = [f"{len(matches)} memories match {query!r}, best first (path, relevance, best line):"]
    relevances = relevance_of([match.score for match in matches])
    for match, relevance in zip(matches, relevances, strict=True):
        shown = to_tool(match.path) if tool_paths else match.path
        row = f"{shown}\t{relevance}\t{match.snippet}"
        if match.description:
            row += f"\t(description: {match.description})"
        rows.append(row)
    return "\n".join(rows)
