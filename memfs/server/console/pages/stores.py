"""The stores page (``/console/``) and a store's settings (``/console/stores/{id}/settings``).

The stores page lists every Memory Stores store, archived ones too (newest first, up to
``MAX_LISTED``), each a link by its name with its description, its memory count against the
limit and whether it is archived, then the Databricks stores (links to
``/console/databricks/{id}``), and a form to create a store. The settings page edits a store's
name, description and metadata, archives it (for ever: a box to tick), and deletes it (the
person types the store's name). Bodies are checked by the API's own rules
(``validation``); a refusal shows the form again with the API's message.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from memfs.contract.errors import ApiError, BadRequestError
from memfs.contract.models import MemoryStore
from memfs.server.console.context import Console
from memfs.server.console.security import CONSOLE_PATH
from memfs.server.console.sessions import SignedIn
from memfs.server.databricks.storage import DbxStore
from memfs.server.memory_stores import validation
from memfs.server.memory_stores.storage import MAX_METADATA_PAIRS, MetadataPatch, StoreFilter

log = logging.getLogger(__name__)

MAX_LISTED = 1000  # stores of each API a page lists
PAGE = 200
BLANK_METADATA_ROWS = 2


@dataclass(frozen=True)
class StoreRow:
    store: MemoryStore
    memories: int


def store_url(store_id: str) -> str:
    return f"{CONSOLE_PATH}/stores/{store_id}"


class StoresPages:
    """The stores page and a store's settings (module doc)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.storage = self.console.storage

    async def list_all(self) -> tuple[list[StoreRow], list[DbxStore], bool]:
        stores: list[MemoryStore] = []
        after = None
        more = False
        while True:
            page = await self.storage.list_stores(
                StoreFilter(include_archived=True), after=after, limit=PAGE
            )
            stores += page.items
            if page.next is None:
                break
            if len(stores) >= MAX_LISTED:
                more = True
                break
            after = page.next
        stores = stores[:MAX_LISTED]
        counts = await self.console.console_storage.memory_counts([s.id for s in stores])
        dbx = await self.storage.databricks.list_stores(after=None, limit=MAX_LISTED)
        rows = [StoreRow(s, counts.get(s.id, 0)) for s in stores]
        return rows, dbx.items, more

    async def show(
        self,
        request: Request,
        signed_in: SignedIn,
        *,
        status: int = 200,
        error: str | None = None,
        form: dict[str, str] | None = None,
    ) -> Response:
        rows, dbx, more = await self.list_all()
        return self.console.renderer.page(
            request,
            "stores.html",
            signed_in=signed_in,
            status=status,
            error=error,
            title="Memory stores",
            rows=rows,
            dbx_stores=dbx,
            more=more,
            limit=self.console.console_storage.memory_limit,
            form=form or {},
        )

    async def stores_page(self, request: Request) -> Response:
        return await self.show(request, await self.console.signed_in(request))

    async def create_store(self, request: Request) -> Response:
        signed_in = await self.console.signed_in(request)
        form = await self.console.post_form(request, signed_in)
        try:
            store = await self.storage.create_store(
                name=validation.store_name(form.get("name", "")),
                description=validation.store_description(form.get("description", "")),
                metadata={},
            )
        except ApiError as exc:
            return await self.show(
                request, signed_in, status=exc.status, error=exc.message, form=form
            )
        return RedirectResponse(store_url(store.id) + "?notice=store-created", status_code=303)

    async def settings(
        self,
        request: Request,
        signed_in: SignedIn,
        store: MemoryStore,
        *,
        status: int = 200,
        error: str | None = None,
    ) -> Response:
        pairs = sorted(store.metadata.items())
        pairs += [("", "")] * min(BLANK_METADATA_ROWS, MAX_METADATA_PAIRS - len(pairs))
        return self.console.renderer.page(
            request,
            "store_settings.html",
            signed_in=signed_in,
            status=status,
            error=error,
            title=f"Settings of {store.name}",
            store=store,
            pairs=pairs,
        )

    async def settings_page(self, request: Request) -> Response:
        signed_in = await self.console.signed_in(request)
        store = await self.storage.get_store(request.path_params["store_id"])
        return await self.settings(request, signed_in, store)

    async def save_settings(self, request: Request) -> Response:
        signed_in = await self.console.signed_in(request)
        store = await self.storage.get_store(request.path_params["store_id"])
        form = await self.console.post_form(request, signed_in)
        try:
            await self.storage.update_store(
                store.id,
                name=validation.store_name(form.get("name", "")),
                description=validation.store_description(form.get("description", "")),
                metadata=metadata_patch(form, store.metadata),
            )
        except ApiError as exc:
            return await self.settings(
                request, signed_in, store, status=exc.status, error=exc.message
            )
        return RedirectResponse(store_url(store.id) + "?notice=store-saved", status_code=303)

    async def archive(self, request: Request) -> Response:
        signed_in = await self.console.signed_in(request)
        store = await self.storage.get_store(request.path_params["store_id"])
        form = await self.console.post_form(request, signed_in)
        if form.get("confirm") != "yes":
            return await self.settings(
                request,
                signed_in,
                store,
                status=400,
                error="Tick the box to confirm: an archived store cannot be written again.",
            )
        await self.storage.archive_store(store.id)
        return RedirectResponse(store_url(store.id) + "?notice=store-archived", status_code=303)

    async def delete(self, request: Request) -> Response:
        signed_in = await self.console.signed_in(request)
        store = await self.storage.get_store(request.path_params["store_id"])
        form = await self.console.post_form(request, signed_in)
        if form.get("confirm_name") != store.name:
            return await self.settings(
                request,
                signed_in,
                store,
                status=400,
                error="The name typed is not the store's name: nothing was deleted.",
            )
        await self.storage.delete_store(store.id)
        return RedirectResponse(CONSOLE_PATH + "/?notice=store-deleted", status_code=303)

    def routes(self) -> list[Route]:
        return [
            Route("/", self.stores_page, methods=["GET"]),
            Route("/stores", self.create_store, methods=["POST"]),
            Route("/stores/{store_id}/settings", self.settings_page, methods=["GET"]),
            Route("/stores/{store_id}/settings", self.save_settings, methods=["POST"]),
            Route("/stores/{store_id}/archive", self.archive, methods=["POST"]),
            Route("/stores/{store_id}/delete", self.delete, methods=["POST"]),
        ]


def metadata_patch(form: dict[str, str], current: dict[str, str]) -> MetadataPatch:
    """The patch from the settings form's key/value rows (``meta_key_N``, ``meta_value_N``):
    rows with a key set their pair; a current key no row names is deleted."""
    wanted: dict[str, str] = {}
    for index in range(MAX_METADATA_PAIRS + BLANK_METADATA_ROWS):
        key = form.get(f"meta_key_{index}", "").strip()
        if not key:
            continue
        if key in wanted:
            raise BadRequestError(f"metadata: the key {key!r} appears twice")
        wanted[validation.metadata_key(key)] = validation.metadata_value(
            form.get(f"meta_value_{index}", ""), key
        )
    changes: dict[str, str | None] = {k: v for k, v in wanted.items() if current.get(k) != v}
    changes.update({key: None for key in current if key not in wanted})
    return MetadataPatch(changes)
