"""How a memory store is described to an agent, in the words both of its prompts share: the
session's (``memfs.session.prompt``, mounted stores) and the MCP server's
(``memfs.mcp.prompt``, one store behind tools). A shared leaf: it imports nothing of memfs, so
the MCP tools, which may import only the leaves, can use it.
"""

from __future__ import annotations


def persistence(subject: str) -> str:
    """Why the agent should read and keep ``subject`` ("The files in it", "Its memories")."""
    return (
        f"{subject} persist across sessions: read them before you start, to recall what "
        "earlier sessions learned, and keep them up to date as you work."
    )


def access(read_only: bool, things: str = "files") -> str:
    """The store's access in words: read-only (what fails) or read-write."""
    return f"read-only (you can read these {things}; writes fail)" if read_only else "read-write"


def one_paragraph(text: str) -> str:
    """A store owner's description on one line: its words kept, its line breaks not."""
    return " ".join(text.split())
