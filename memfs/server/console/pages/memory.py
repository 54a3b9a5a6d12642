"""A memory's pages: ``/console/stores/{id}/memories/{memory_id}`` and its ``edit``,
``rename`` and ``delete`` pages (``history`` is linked; its pages are their own group).

The memory page shows the content rendered as Markdown for a ``.md`` path, or as numbered lines
(``?view=raw``, and for every other path): ``console.markdown`` (raw HTML never rendered, links
only to http(s), mailto or relative addresses). Every write carries the ``content_sha256`` of
what the person saw (a hidden field), checked by the storage inside the write's transaction:
- Save (``edit``): on a conflict nothing is overwritten; the page shows their version against
  yours as a diff and offers "Save over theirs" (a fresh precondition: the hash of the version
  shown) or "Keep theirs". A memory deleted meanwhile is not created again: the page says so
  and shows what was typed;
- Rename and Delete: a memory changed since the page was opened is left alone, with a message.
Writes are the signed-in key's (``SignedIn.actor``).
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from memfs.contract.errors import ApiError, NotFoundError, PreconditionFailedError
from memfs.contract.models import Memory, MemoryStore
from memfs.server.console.context import Console
from memfs.server.console.diff import diff_table
from memfs.server.console.live import memory_stores_target
from memfs.server.console.markdown import content_view
from memfs.server.console.pages.store import memory_opener, memory_url, textarea
from memfs.server.console.pages.stores import store_url
from memfs.server.console.sessions import SignedIn
from memfs.server.memory_stores import validation

log = logging.getLogger(__name__)

CHANGED = "This memory changed since you opened this page, so nothing was {done}. Look again."
GONE = "This memory was deleted since you opened this page; nothing was saved."
CONFLICT = "Someone changed this memory since you opened it: nothing was saved."
# A browser's text box cannot hold U+0000 (HTML turns it into U+FFFD), so saving such a memory
# from the edit page would change every NUL it holds, unseen: refused, the way named.
HOLDS_NUL = (
    "This memory holds NUL characters (U+0000), which a browser's text box cannot keep: "
    "saving it here would replace them. Edit it through a mount, memfs memories put or the API."
)


# each page's title says what it is for, as its h1 does: a tab or a screen reader's list of
# windows tells a memory from its edit form
TITLES = {
    "memory.html": "{path}",
    "edit.html": "Edit {path}",
    "rename.html": "Rename {path}",
    "delete.html": "Delete {path}?",
}


class MemoryPages:
    """A memory's page, editing, renaming and deleting it (module doc)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.storage = self.console.storage

    async def load(self, request: Request) -> tuple[SignedIn, MemoryStore, Memory]:
        signed_in = await self.console.signed_in(request)
        store = await self.storage.get_store(request.path_params["store_id"])
        memory = await self.storage.get_memory(store.id, request.path_params["memory_id"])
        return signed_in, store, memory

    def page(
        self,
        request: Request,
        template: str,
        signed_in: SignedIn,
        store: MemoryStore,
        memory: Memory,
        *,
        status: int = 200,
        error: str | None = None,
        **context: Any,
    ) -> Response:
        return self.console.renderer.page(
            request,
            template,
            signed_in=signed_in,
            status=status,
            error=error,
            title=TITLES[template].format(path=memory.path),
            store=store,
            memory=memory,
            memory_url=memory_url(store.id, memory.id),
            store_url=store_url(store.id),
            **context,
        )

    async def memory_page(self, request: Request) -> Response:
        signed_in, store, memory = await self.load(request)
        live = await memory_stores_target(self.console, store.id, "notice", memory_id=memory.id)
        content = await content_view(
            memory_url(store.id, memory.id),
            memory.path,
            memory.content or "",
            request.query_params.get("view"),
            memory_opener(store.id),
        )
        return self.page(
            request, "memory.html", signed_in, store, memory, live=live, content=content
        )

    async def edit_form(self, request: Request) -> Response:
        signed_in, store, memory = await self.load(request)
        return self.page(
            request,
            "edit.html",
            signed_in,
            store,
            memory,
            error=HOLDS_NUL if "\x00" in (memory.content or "") else None,
            yours=memory.content or "",
            precondition=memory.content_sha256,
            diff=None,
            live=await memory_stores_target(self.console, store.id, "notice", memory_id=memory.id),
        )

    async def save(self, request: Request) -> Response:
        signed_in = await self.console.signed_in(request)
        store = await self.storage.get_store(request.path_params["store_id"])
        memory_id = request.path_params["memory_id"]
        form = await self.console.post_form(request, signed_in)
        yours = textarea(form.get("content", ""))
        try:
            expected = validation.sha256_field(form.get("precondition", ""), "precondition")
            edited = await self.storage.get_memory(store.id, memory_id)
            if edited.content_sha256 == expected and "\x00" in (edited.content or ""):
                return self.page(
                    request, "edit.html", signed_in, store, edited, status=409,
                    error=HOLDS_NUL, yours=yours, precondition=expected, diff=None,
                )  # fmt: skip
            await self.storage.update_memory(
                store.id,
                memory_id,
                content=validation.memory_content(yours),
                path=None,
                expected_sha256=expected,
                actor=signed_in.actor,
            )
        except PreconditionFailedError:
            try:
                theirs = await self.storage.get_memory(store.id, memory_id)
            except NotFoundError:
                return self.gone(request, signed_in, store, yours)
            return self.page(
                request,
                "edit.html",
                signed_in,
                store,
                theirs,
                status=409,
                error=CONFLICT,
                yours=yours,
                precondition=theirs.content_sha256,
                diff=diff_table(theirs.content or "", yours).unified,
                live=await memory_stores_target(
                    self.console, store.id, "notice", memory_id=memory_id
                ),
            )
        except NotFoundError:
            return self.gone(request, signed_in, store, yours)
        except ApiError as exc:
            current = await self.storage.get_memory(store.id, memory_id)
            return self.page(
                request,
                "edit.html",
                signed_in,
                store,
                current,
                status=exc.status,
                error=exc.message,
                yours=yours,
                precondition=form.get("precondition", ""),
                diff=None,
            )
        return RedirectResponse(memory_url(store.id, memory_id) + "?notice=saved", 303)

    def gone(
        self, request: Request, signed_in: SignedIn, store: MemoryStore, yours: str
    ) -> Response:
        return self.console.renderer.page(
            request,
            "gone.html",
            signed_in=signed_in,
            status=404,
            error=GONE,
            title="Memory deleted",
            store=store,
            store_url=store_url(store.id),
            yours=yours,
        )

    async def rename_form(self, request: Request) -> Response:
        signed_in, store, memory = await self.load(request)
        return self.page(request, "rename.html", signed_in, store, memory, new_path=memory.path)

    async def rename(self, request: Request) -> Response:
        signed_in, store, memory = await self.load(request)
        form = await self.console.post_form(request, signed_in)
        new_path = form.get("path", "")
        try:
            expected = validation.sha256_field(form.get("precondition", ""), "precondition")
            await self.storage.update_memory(
                store.id,
                memory.id,
                content=None,
                path=validation.memory_path(new_path),
                expected_sha256=expected,
                actor=signed_in.actor,
            )
        except PreconditionFailedError:
            error = CHANGED.format(done="renamed")
            return self.page(
                request, "rename.html", signed_in, store, memory, status=409, error=error,
                new_path=new_path,
            )  # fmt: skip
        except ApiError as exc:
            return self.page(
                request, "rename.html", signed_in, store, memory, status=exc.status,
                error=exc.message, new_path=new_path,
            )  # fmt: skip
        return RedirectResponse(memory_url(store.id, memory.id) + "?notice=renamed", 303)

    async def delete_form(self, request: Request) -> Response:
        signed_in, store, memory = await self.load(request)
        return self.page(request, "delete.html", signed_in, store, memory)

    async def delete(self, request: Request) -> Response:
        signed_in, store, memory = await self.load(request)
        form = await self.console.post_form(request, signed_in)
        try:
            expected = validation.sha256_field(form.get("precondition", ""), "precondition")
            await self.storage.delete_memory(
                store.id, memory.id, expected_sha256=expected, actor=signed_in.actor
            )
        except PreconditionFailedError:
            error = CHANGED.format(done="deleted")
            return self.page(
                request, "delete.html", signed_in, store, memory, status=409, error=error
            )
        return RedirectResponse(store_url(store.id) + "?notice=deleted", 303)

    async def open_path(self, request: Request) -> Response:
        """A link between memories (``markdown.MemoryLinks``): the page of the memory at
        ``?path=``, or 404 naming the path."""
        await self.console.signed_in(request)
        store = await self.storage.get_store(request.path_params["store_id"])
        path = validation.memory_path(request.query_params.get("path", ""))
        found = await self.storage.memory_at(store.id, path, with_content=False)
        if found is None:
            raise NotFoundError(f"no memory at {path} in this store")
        return RedirectResponse(memory_url(store.id, found.id), 303)

    def routes(self) -> list[Route]:
        memory = "/stores/{store_id}/memories/{memory_id}"
        return [
            Route("/stores/{store_id}/open", self.open_path, methods=["GET"]),
            Route(memory, self.memory_page, methods=["GET"]),
            Route(memory + "/edit", self.edit_form, methods=["GET"]),
            Route(memory + "/edit", self.save, methods=["POST"]),
            Route(memory + "/rename", self.rename_form, methods=["GET"]),
            Route(memory + "/rename", self.rename, methods=["POST"]),
            Route(memory + "/delete", self.delete_form, methods=["GET"]),
            Route(memory + "/delete", self.delete, methods=["POST"]),
        ]
