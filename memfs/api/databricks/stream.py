"""Client of memfs server's Databricks change stream (a memfs extension; the hosted API has none).

``server_offers_entry_stream(client)`` asks ``GET /v1/memfs/capabilities`` once, with the
client's Bearer token; anything but a clear yes (a 404 on a Databricks workspace, an error, a
timeout) means "no": the store then compares listings (``changes.ListingDiff``).

``EntryChangeStream`` reads ``GET /api/2.0/agents/memory-stores/{store}/memfs/changes?actor_id=``
(docs/server.md, "Databricks change stream") with the reader both APIs share
(``memfs.api.changes.SseStream``: ``ready`` on each connection, ``interrupted`` when one is lost,
reconnects with the client's retry policy, resumes after the last cursor with
``Last-Event-ID``). Each ``entry_change`` is an ``EntryChange``, handed to ``version_of``, which
makes the seam's ``MemoryVersion`` of it, or None for a change that is not the mount's (another
session's); the ``ChangeEvent`` then carries that version. The store's deletion (``event:
error``, ``NOT_FOUND``) ends the stream with ``NotFoundError``. Like ``client``, this module must
not log the token or URLs with paths.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from memfs.api.capabilities import server_offers
from memfs.api.changes import SseStream
from memfs.api.databricks.client import DatabricksClient
from memfs.contract.errors import NotFoundError
from memfs.contract.models import JsonObject, MemoryVersion, parse_time
from memfs.contract.store_api import ChangeEvent

log = logging.getLogger(__name__)

CHANGES = "/api/2.0/agents/memory-stores/{store}/memfs/changes"


async def server_offers_entry_stream(client: DatabricksClient) -> bool:
    """True if the server of ``client`` offers the Databricks change stream (one try)."""
    return await server_offers(client, "databricks_change_stream")


@dataclass(frozen=True)
class EntryChange:
    """One change of an entry as the stream reports it (no content: its hash and size)."""

    kind: Literal["created", "updated", "deleted"]
    entry_id: str
    actor_id: str
    session_id: str | None
    path: str
    update_time: datetime  # after the change; a delete's own time
    content_sha256: str | None  # None for a delete
    content_size: int | None

    @classmethod
    def from_json(cls, data: JsonObject) -> EntryChange:
        kind = data["kind"]
        if kind not in ("created", "updated", "deleted"):
            raise ValueError(f"unknown change kind {kind!r}")
        size = data.get("content_size_bytes")
        session = data.get("session_id")
        return cls(
            kind=kind,
            entry_id=str(data["name"]).rsplit("/entries/", 1)[1],
            actor_id=str(data["actor_id"]),
            session_id=str(session) if session else None,
            path=str(data["path"]),
            update_time=parse_time(data["update_time"]),
            content_sha256=data.get("content_sha256"),
            content_size=int(size) if size is not None else None,
        )


class EntryChangeStream(SseStream):
    """The changes of ``actor_id``'s entries in one store, as the seam's ``ChangeEvent``s."""

    def __init__(
        self,
        client: DatabricksClient,
        store_id: str,
        actor_id: str,
        version_of: Callable[[EntryChange], MemoryVersion | None],
        *,
        after: str | None = None,
        read_timeout: float = 45.0,  # three missed server heartbeats
    ) -> None:
        super().__init__(
            client,
            CHANGES,
            {"store": store_id},
            query={"actor_id": actor_id},
            after=after,
            read_timeout=read_timeout,
        )
        self._version_of = version_of

    def _dispatch(self, kind: str, cursor: str, data: str) -> ChangeEvent | None:
        if kind == "entry_change":
            version = self._version_of(EntryChange.from_json(json.loads(data)))
            return None if version is None else ChangeEvent("memory_version", cursor, version)
        if kind == "ready":
            return ChangeEvent("ready", cursor)
        if kind == "error":
            body = json.loads(data) if data else {}
            message = body.get("message") if isinstance(body, dict) else None
            raise NotFoundError(
                str(message or "the change stream ended with an error"),
                status=404,
                error_type="NOT_FOUND",
                body=body if isinstance(body, dict) else None,
            )
        return None  # an event type from a newer server: ignore
