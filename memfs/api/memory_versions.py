"""The version endpoints of ``StoreClient`` (``/v1/memory_stores/{store}/memory_versions``): list
a store's versions (newest first, with filters), read one, redact one.

``redact_version`` is retried like every idempotent request; if a retry after a lost answer is
refused as a bad request and the version is redacted by then, that version is the result.
It must not send anything except through ``Transport``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import datetime

from memfs.api.pagination import Pager, page_from
from memfs.api.transport import Transport, parse_answer, query_params
from memfs.contract.errors import BadRequestError
from memfs.contract.models import MemoryVersion, Page

log = logging.getLogger(__name__)

# Route templates: the keys of RequestStats and of the DEBUG log.
VERSIONS = "/v1/memory_stores/{store}/memory_versions"
VERSION = "/v1/memory_stores/{store}/memory_versions/{version}"
VERSION_REDACT = "/v1/memory_stores/{store}/memory_versions/{version}/redact"


class VersionEndpoints(Transport):
    """The version methods of ``StoreClient``, sent by its ``Transport``."""

    async def list_versions_page(
        self,
        store_id: str,
        *,
        memory_id: str | None = None,
        operation: str | None = None,
        session_id: str | None = None,
        api_key_id: str | None = None,
        created_gte: datetime | None = None,
        created_lte: datetime | None = None,
        limit: int | None = None,
        view: str | None = None,
        page: str | None = None,
    ) -> Page[MemoryVersion]:
        """One page of the store's versions, newest first."""
        query = query_params(
            memory_id=memory_id,
            operation=operation,
            session_id=session_id,
            api_key_id=api_key_id,
            limit=limit,
            view=view,
            page=page,
            **{"created_at[gte]": created_gte, "created_at[lte]": created_lte},
        )
        data = await self._call("GET", VERSIONS, {"store": store_id}, query=query)
        return page_from(MemoryVersion.from_json, data, VERSIONS)

    def list_versions(
        self,
        store_id: str,
        *,
        memory_id: str | None = None,
        operation: str | None = None,
        session_id: str | None = None,
        api_key_id: str | None = None,
        created_gte: datetime | None = None,
        created_lte: datetime | None = None,
        limit: int | None = None,
        view: str | None = None,
    ) -> AsyncIterator[MemoryVersion]:
        """Every matching version, newest first, following pages."""

        async def fetch(cursor: str | None) -> Page[MemoryVersion]:
            return await self.list_versions_page(
                store_id,
                memory_id=memory_id,
                operation=operation,
                session_id=session_id,
                api_key_id=api_key_id,
                created_gte=created_gte,
                created_lte=created_lte,
                limit=limit,
                view=view,
                page=cursor,
            )

        return Pager(fetch)

    async def get_version(self, store_id: str, version_id: str) -> MemoryVersion:
        data = await self._call("GET", VERSION, {"store": store_id, "version": version_id})
        return parse_answer(MemoryVersion.from_json, data, VERSION)

    async def redact_version(self, store_id: str, version_id: str) -> MemoryVersion:
        args = {"store": store_id, "version": version_id}
        reply = await self._exchange("POST", VERSION_REDACT, args)
        if reply.error is not None:
            if reply.lost_answer and isinstance(reply.error, BadRequestError):
                version = await self.get_version(store_id, version_id)
                if version.redacted:
                    return version
            raise reply.error
        return parse_answer(MemoryVersion.from_json, reply.data, VERSION_REDACT)
