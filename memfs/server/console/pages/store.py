"""A store's page (``/console/stores/{id}``), its search and a new memory.

The store page shows the store's tree (``ConsoleStorage.tree_memories``: no content read),
grouped into folders that open and close (``<details>``: no script), folders first, as GitHub's
file view: each memory a link showing its name in its folder, its size, when and by whom it last
changed, and a badge where it is a mount's conflict copy or has one beside it (the server
records no conflict: the copies, ``NAME.conflict-TIME.EXT``, are what a store holds of one).
Folders start open when the store is small (``OPEN_ALL_BELOW`` memories), else only the top
level is. Beside the tree, how to use the store: its ``memfs mount`` and ``memfs mcp`` lines
with its name quoted for a shell and the server's base URL (never a key). The search
(``…/search?q=``) is the server's own (``Storage.search_memories``, the API's ranking and query
rules), each result its path and the best line of its content as an escaped snippet. "New
memory" (``…/new``) creates one at a path, with the API's path and size rules; a refusal shows
the form again, with what was typed and the API's message.
"""

from __future__ import annotations

import logging
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, NamedTuple, Protocol, TypeVar

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from memfs.contract.errors import ApiError
from memfs.contract.models import Actor, Memory, MemoryStore
from memfs.contract.search_words import best_line
from memfs.server.console import wording
from memfs.server.console.context import Console
from memfs.server.console.live import memory_stores_target
from memfs.server.console.pages.stores import store_url
from memfs.server.console.security import is_https
from memfs.server.console.sessions import SignedIn
from memfs.server.console.storage import TreeMemory
from memfs.server.db.clock import utc_now
from memfs.server.memory_stores import validation
from memfs.server.search import validate_query

log = logging.getLogger(__name__)

OPEN_ALL_BELOW = 200
SEARCH_LIMIT = 50
MOUNT_POINT = "~/memory"  # the mount line's example directory
# a mount's conflict copy (``memfs.core.ops.durable.conflict_path``): NAME.conflict-TIME[-N][.EXT]
_CONFLICT_COPY = re.compile(r"(?P<stem>.+)\.conflict-\d{8}T\d{6}Z(?:-\d+)?(?P<ext>\.[^.]+)?")
CONFLICT_COPY = "conflict copy"  # the badge of a copy
HAS_CONFLICT = "conflict"  # the badge of the memory a copy was saved beside


class HasPath(Protocol):
    @property
    def path(self) -> str: ...


P = TypeVar("P", bound=HasPath)


@dataclass
class Folder(Generic[P]):
    """One folder of a store's tree: its name, its path (ending with "/"), what it holds."""

    name: str
    path: str
    folders: dict[str, Folder[P]] = field(default_factory=dict)
    memories: list[P] = field(default_factory=list)

    def sorted_folders(self) -> list[Folder[P]]:
        return [self.folders[name] for name in sorted(self.folders)]


def build_tree(memories: Sequence[P]) -> Folder[P]:
    """The folders of ``memories`` (listed in path order, so each folder's are in order); the
    store page's memories, and the history's store as of a moment."""
    root: Folder[P] = Folder("/", "/")
    for memory in memories:
        folder = root
        parts = memory.path.strip("/").split("/")
        for part in parts[:-1]:
            child = folder.folders.get(part)
            if child is None:
                child = folder.folders[part] = Folder(part, folder.path + part + "/")
            folder = child
        folder.memories.append(memory)
    return root


def conflict_copy_of(name: str) -> str | None:
    """The name of the file ``name`` is a mount's conflict copy of, or None."""
    found = _CONFLICT_COPY.fullmatch(name)
    if found is None:
        return None
    return found["stem"] + (found["ext"] or "")


def conflict_badges(memories: Sequence[TreeMemory]) -> dict[str, str]:
    """The badge of each memory id that is a conflict copy, or has one in its folder."""
    by_path = {memory.path: memory.id for memory in memories}
    badges: dict[str, str] = {}
    for memory in memories:
        folder, _, name = memory.path.rpartition("/")
        original = conflict_copy_of(name)
        if original is None:
            continue
        badges[memory.id] = CONFLICT_COPY
        original_id = by_path.get(f"{folder}/{original}")
        if original_id is not None:
            badges.setdefault(original_id, HAS_CONFLICT)
    return badges


class TreeRow(NamedTuple):
    """One memory's row of the tree, its words made once (a page may show 2,000 rows: Jinja
    filters and lookups per row cost more than the rest of the page)."""

    path: str
    url: str
    name: str  # in its folder
    size: str
    changed_at: str  # a <time>'s datetime
    changed_exact: str  # its title
    changed_ago: str
    writer: str
    writer_id: str
    badge: str | None


def tree_rows(
    memories: Sequence[TreeMemory], store_id: str, me: str, now: datetime
) -> list[TreeRow]:
    """The rows of ``memories`` as the store page shows them, signed in as the key ``me``."""
    badges = conflict_badges(memories)
    writers: dict[Actor, str] = {}
    base = memory_url(store_id, "")
    rows = []
    for memory in memories:
        changed, exact = wording.time_attributes(memory.changed_at)
        actor = memory.changed_by
        who = writers.get(actor) or writers.setdefault(actor, wording.writer(actor, me))
        rows.append(
            TreeRow(
                memory.path,
                base + memory.id,
                memory.path.rpartition("/")[2],
                wording.human_size(memory.size),
                changed,
                exact,
                wording.ago(memory.changed_at, now),
                who,
                actor.id,
                badges.get(memory.id),
            )
        )
    return rows


def usage_lines(store_name: str, base_url: str) -> list[str]:
    """The shell lines that mount the store and serve it over MCP: its name quoted (it is
    agent-chosen; one that starts with "-" goes after "--", where no option is read)."""
    name = shlex.quote(store_name)
    if store_name.startswith("-"):
        name = "-- " + name
    return [
        f"export ANTHROPIC_BASE_URL={shlex.quote(base_url)}",
        f"memfs mount {name} {MOUNT_POINT}",
        f"memfs mcp {name}",
        f"memfs mcp --print-config {name}",
    ]


def base_url_of(request: Request) -> str:
    """The server's base URL as the browser reached it (a TLS proxy's https included)."""
    return f"{'https' if is_https(request) else 'http'}://{request.url.netloc}"


def memory_url(store_id: str, memory_id: str) -> str:
    return f"{store_url(store_id)}/memories/{memory_id}"


def memory_opener(store_id: str) -> str:
    """The address that opens the store's memory at ``?path=`` (a link between memories)."""
    return f"{store_url(store_id)}/open"


class StorePages:
    """A store's page, its search and a new memory (module doc)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.storage = self.console.storage

    async def store_page(self, request: Request) -> Response:
        signed_in = await self.console.signed_in(request)
        store = await self.storage.get_store(request.path_params["store_id"])
        memories = await self.console.console_storage.tree_memories(store.id)
        return self.console.renderer.page(
            request,
            "store.html",
            signed_in=signed_in,
            title=store.name,
            store=store,
            tree=build_tree(tree_rows(memories, store.id, signed_in.api_key_id, utc_now())),
            usage=usage_lines(store.name, base_url_of(request)),
            count=len(memories),
            limit=self.console.console_storage.memory_limit,
            open_all=len(memories) < OPEN_ALL_BELOW,
            live=await memory_stores_target(self.console, store.id, "reload"),
        )

    async def search_page(self, request: Request) -> Response:
        signed_in = await self.console.signed_in(request)
        store = await self.storage.get_store(request.path_params["store_id"])
        query = request.query_params.get("q", "")
        results: list[tuple[Memory, str]] = []
        error = None
        status = 200
        if query.strip():
            try:
                hits = await self.storage.search_memories(
                    store.id, validate_query(query), limit=SEARCH_LIMIT, path_prefix=None
                )
                results = [(m, best_line(m.content or "", query)) for m, _ in hits]
            except ApiError as exc:
                error, status = exc.message, exc.status
        return self.console.renderer.page(
            request,
            "search.html",
            signed_in=signed_in,
            status=status,
            error=error,
            title=f"Search {store.name}",
            store=store,
            query=query,
            results=results,
            searched=bool(query.strip()) and error is None,
        )

    async def new_page(
        self,
        request: Request,
        signed_in: SignedIn,
        store: MemoryStore,
        form: dict[str, str],
        *,
        status: int = 200,
        error: str | None = None,
    ) -> Response:
        return self.console.renderer.page(
            request,
            "new_memory.html",
            signed_in=signed_in,
            status=status,
            error=error,
            title=f"New memory in {store.name}",
            store=store,
            form=form,
        )

    async def new_form(self, request: Request) -> Response:
        signed_in = await self.console.signed_in(request)
        store = await self.storage.get_store(request.path_params["store_id"])
        return await self.new_page(request, signed_in, store, {"path": "/"})

    async def create(self, request: Request) -> Response:
        signed_in = await self.console.signed_in(request)
        store = await self.storage.get_store(request.path_params["store_id"])
        form = await self.console.post_form(request, signed_in)
        try:
            memory = await self.storage.create_memory(
                store.id,
                path=validation.memory_path(form.get("path", "")),
                content=validation.memory_content(textarea(form.get("content", ""))),
                actor=signed_in.actor,
            )
        except ApiError as exc:
            return await self.new_page(
                request, signed_in, store, form, status=exc.status, error=exc.message
            )
        return RedirectResponse(
            memory_url(store.id, memory.id) + "?notice=created", status_code=303
        )

    def routes(self) -> list[Route]:
        return [
            Route("/stores/{store_id}", self.store_page, methods=["GET"]),
            Route("/stores/{store_id}/search", self.search_page, methods=["GET"]),
            Route("/stores/{store_id}/new", self.new_form, methods=["GET"]),
            Route("/stores/{store_id}/new", self.create, methods=["POST"]),
        ]


def textarea(value: str) -> str:
    """A textarea's text as the person typed it: browsers send every line break as CRLF (the
    HTML form encoding), so CRLF and a lone CR become LF (docs/console.md)."""
    return value.replace("\r\n", "\n").replace("\r", "\n")
