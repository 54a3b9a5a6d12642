"""The memory-store endpoints of ``StoreClient`` (``/v1/memory_stores``): create, read, change,
archive, delete and list stores, and find a store by id or name.

Retried writes stay safe (``StoreClient``'s retry rules, ``memfs.api.client``):
- ``create_store`` has no natural key, so it is retried only when the server surely did not
  apply it (connection refused, 408, 429, 529); otherwise the error is raised;
- a ``delete_store`` retried after a lost answer that gets 404 is done.

It must not send anything except through ``Transport``.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import AsyncIterator, Iterable

from memfs.api.pagination import Pager, page_from
from memfs.api.transport import Transport, parse_answer, query_params
from memfs.contract.errors import BadRequestError, NotFoundError
from memfs.contract.models import JsonObject, MemoryStore, Page

log = logging.getLogger(__name__)

# Route templates: the keys of RequestStats and of the DEBUG log.
STORES = "/v1/memory_stores"
STORE = "/v1/memory_stores/{store}"
STORE_ARCHIVE = "/v1/memory_stores/{store}/archive"

STORE_ID_PREFIX = "memstore_"


def did_you_mean(wanted: str, names: Iterable[str]) -> str:
    """`` did you mean 'A' or 'B'?`` for the names closest to ``wanted`` (difflib, case ignored;
    at most three, the closest first), or "" when none is close: the hint of every not-found
    name a person typed (a store's name, a memory's path)."""
    by_folded = {name.casefold(): name for name in reversed(list(names))}
    near = difflib.get_close_matches(wanted.casefold(), list(by_folded), n=3, cutoff=0.6)
    if not near:
        return ""
    return " did you mean " + " or ".join(repr(by_folded[name]) for name in near) + "?"


def store_not_found(wanted: str, names: list[str]) -> str:
    """The words of a store that is not there: the names closest to ``wanted``, and where to
    see them all."""
    hint = did_you_mean(wanted, names)
    return f"memory store {wanted!r} not found;{hint} `memfs stores list` lists them"


class AmbiguousStoreError(BadRequestError):
    """A store name given where an id was expected matches more than one store."""


class StoreEndpoints(Transport):
    """The store methods of ``StoreClient``, sent by its ``Transport``."""

    async def create_store(
        self,
        name: str,
        *,
        description: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> MemoryStore:
        body: JsonObject = {"name": name}
        if description is not None:
            body["description"] = description
        if metadata is not None:
            body["metadata"] = metadata
        data = await self._call("POST", STORES, {}, body=body, retry_unsafe=False)
        return parse_answer(MemoryStore.from_json, data, STORES)

    async def get_store(self, store_id: str) -> MemoryStore:
        data = await self._call("GET", STORE, {"store": store_id})
        return parse_answer(MemoryStore.from_json, data, STORE)

    async def update_store(
        self,
        store_id: str,
        *,
        name: str | None = None,
        description: str | None = None,
        metadata: dict[str, str | None] | None = None,
    ) -> MemoryStore:
        """Patch a store; a metadata value of None deletes that key."""
        body: JsonObject = {}
        if name is not None:
            body["name"] = name
        if description is not None:
            body["description"] = description
        if metadata is not None:
            body["metadata"] = metadata
        data = await self._call("POST", STORE, {"store": store_id}, body=body)
        return parse_answer(MemoryStore.from_json, data, STORE)

    async def archive_store(self, store_id: str) -> MemoryStore:
        data = await self._call("POST", STORE_ARCHIVE, {"store": store_id})
        return parse_answer(MemoryStore.from_json, data, STORE_ARCHIVE)

    async def delete_store(self, store_id: str) -> None:
        reply = await self._exchange("DELETE", STORE, {"store": store_id})
        if reply.error is not None:
            if reply.lost_answer and isinstance(reply.error, NotFoundError):
                log.info("store %s was deleted by an attempt whose answer was lost", store_id)
                return
            raise reply.error

    async def list_stores_page(
        self,
        *,
        include_archived: bool = False,
        limit: int | None = None,
        page: str | None = None,
    ) -> Page[MemoryStore]:
        query = query_params(include_archived=include_archived or None, limit=limit, page=page)
        data = await self._call("GET", STORES, {}, query=query)
        return page_from(MemoryStore.from_json, data, STORES)

    def list_stores(
        self, *, include_archived: bool = False, limit: int | None = None
    ) -> AsyncIterator[MemoryStore]:
        """Every store, following pages; ``limit`` is the page size."""

        async def fetch(cursor: str | None) -> Page[MemoryStore]:
            return await self.list_stores_page(
                include_archived=include_archived, limit=limit, page=cursor
            )

        return Pager(fetch)

    async def resolve_store(self, id_or_name: str) -> MemoryStore:
        """The store with this id (``memstore_…``), else the one store with this exact name.

        Archived stores count. No match: NotFoundError; several: AmbiguousStoreError.
        """
        if id_or_name.startswith(STORE_ID_PREFIX):
            try:
                return await self.get_store(id_or_name)
            except NotFoundError:
                pass  # perhaps a store is named like an id
        stores = [store async for store in self.list_stores(include_archived=True, limit=100)]
        matches = [store for store in stores if store.name == id_or_name]
        if not matches:
            raise NotFoundError(store_not_found(id_or_name, [store.name for store in stores]))
        if len(matches) > 1:
            ids = ", ".join(store.id for store in matches)
            raise AmbiguousStoreError(
                f"{len(matches)} memory stores are named {id_or_name!r} ({ids}); use an id"
            )
        return matches[0]
