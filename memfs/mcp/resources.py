"""Each memory of the store as an MCP resource: its URI, its listing a page at a time, its
reading. Free of the MCP SDK (``memfs.mcp.app`` turns these into the protocol's types).

The URI of the memory ``/notes/a.md`` is ``memfs://memories/notes/a.md``: the authority
``memories`` mirrors the memory tool's ``/memories``, and the URI's path is the store's, each
segment percent-encoded (RFC 3986: every byte of its UTF-8 but the unreserved
``A-Z a-z 0-9 - . _ ~``). Paths are written by agents, so hostile: a ``?``, ``#``, ``%``,
space or ``/``-lookalike in a name is encoded, never read as URI syntax. A URI is accepted
only in that one canonical form (what ``uri_of`` gives): no ``..`` segments, no ``%2F`` that
would split a name, no query or fragment, no second spelling of one memory. The template
(RFC 6570) is ``memfs://memories{/path*}``: the path's segments, each encoded.

Listing pages follow the path order; a cursor is the last path of the previous page, so a
memory created or deleted between two pages moves no other across the boundary.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from urllib.parse import quote, unquote

from memfs.contract.paths import PathError, validate_path
from memfs.mcp.backend import Listed, MemoryBackend, StoredMemory

log = logging.getLogger(__name__)

AUTHORITY = "memfs://memories"
TEMPLATE = AUTHORITY + "{/path*}"
PAGE_SIZE = 500  # resources a page (a store holds up to 2,000 memories)
MARKDOWN = (".md", ".markdown")
SHOWN_CHARS = 120  # of a refused URI or cursor, in its error message


class ResourceError(ValueError):
    """A URI or cursor that names no memory of this store; the message is one line."""


def uri_of(path: str) -> str:
    """The URI of the memory at the store path ``path``."""
    return AUTHORITY + "".join("/" + quote(segment, safe="") for segment in path[1:].split("/"))


def path_of(uri: str) -> str:
    """The store path that ``uri`` names, if it is a memory's URI in canonical form."""
    if not uri.startswith(AUTHORITY + "/"):
        raise ResourceError(f"Not a memory's URI (memfs://memories/...): {_shown(uri)}")
    try:
        path = "/".join(unquote(s, errors="strict") for s in uri[len(AUTHORITY) :].split("/"))
        validate_path(path)
    except (UnicodeDecodeError, PathError) as exc:
        raise ResourceError(f"Not a memory's URI ({exc}): {_shown(uri)}") from None
    if uri_of(path) != uri:
        raise ResourceError(f"Not a memory's URI in canonical form: {_shown(uri)}")
    return path


def mime_type(path: str) -> str:
    return "text/markdown" if path.lower().endswith(MARKDOWN) else "text/plain"


@dataclass(frozen=True)
class ResourcePage:
    memories: list[Listed]
    next_cursor: str | None


async def page(backend: MemoryBackend, cursor: str | None) -> ResourcePage:
    """The memories after ``cursor`` (None: from the first), at most ``PAGE_SIZE``, in path
    order."""
    size = PAGE_SIZE
    if cursor is not None:
        try:
            validate_path(cursor)
        except PathError:
            raise ResourceError(f"Not a cursor of this server: {_shown(cursor)}") from None
    # sorted here, not by the store: the cursor compares as Python does, whatever the
    # database's collation
    memories = sorted(await backend.list_below("/"), key=lambda m: m.path)
    after = [m for m in memories if cursor is None or m.path > cursor]
    shown = after[:size]
    return ResourcePage(shown, shown[-1].path if len(after) > size else None)


async def read(backend: MemoryBackend, uri: str) -> StoredMemory | None:
    """The memory ``uri`` names, with its content; None if there is none (now)."""
    return await backend.read(path_of(uri))


def _shown(text: str) -> str:
    return repr(text[:SHOWN_CHARS] + ("..." if len(text) > SHOWN_CHARS else ""))
