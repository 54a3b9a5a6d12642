"""The server's one prompt, ``memory_store``: what the agent needs to know about the store (its
name, description and access) and how to use the tools it was given, in the session prompt's
words (``memfs.contract.store_brief``) where they apply. Free of the MCP SDK. The description is the
store owner's, passed through on one line.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from memfs.contract.store_brief import access, one_paragraph, persistence
from memfs.mcp.backend import StoreInfo
from memfs.mcp.resources import AUTHORITY

log = logging.getLogger(__name__)

NAME = "memory_store"
DESCRIPTION = "The memory store of this server: its name, description, access, and its tools."


def render(info: StoreInfo, tools: Sequence[str]) -> str:
    """Markdown for the agent: the store, then how to use ``tools`` (the names offered)."""
    lines = [
        "# Memory",
        "",
        f"You have a memory store: {info.name}. " + persistence("Its memories"),
        "",
        f"- Access: {access(info.read_only, 'memories')}",
        f"- Kind: {_kind(info)}",
    ]
    if info.description.strip():
        lines.append(f"- Description: {one_paragraph(info.description)}")
    lines += [
        f"- Tools: {', '.join(f'`{name}`' for name in tools)}",
        "",
        "Use the `memory` tool on `/memories` (view `/memories` first: what you already know). "
        "Each memory is UTF-8 text of at most 100 KB. An edit applies to the content it read: "
        "if someone else changed the file meanwhile, it is applied again only when that is "
        "unambiguous, else the answer shows the file as it now is; nothing is overwritten.",
        "",
        f"Each memory is also a resource, `{AUTHORITY}/notes/a.md` for `/memories/notes/a.md`.",
    ]
    return "\n".join(lines) + "\n"


def _kind(info: StoreInfo) -> str:
    if info.api == "databricks":
        return "Databricks Agent Memory store (the entries named above); each has a description"
    if info.history:
        return "Memory Stores store; every change of a memory is kept (`memory_history`)"
    return "Memory Stores store"
