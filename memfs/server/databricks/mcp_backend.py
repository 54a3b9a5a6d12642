"""The MCP tools' ``MemoryBackend`` over the Databricks API's own storage, for the tools
``memfs server`` serves over streamable HTTP (``memfs.server.mcp.endpoint``).

``DatabricksBackend``, built for one request (stateless: nothing outlives it): one actor's
entries (a session's, or the session-less ones) of a Databricks store. The API has no
precondition; ``DatabricksStorage`` takes one that is compared inside the write's transaction,
so the compare-then-write leaves no window (the client's ``DatabricksStore`` has one round
trip). No rename: a move is a create and a delete guarded by the content read (changed
meanwhile, the old entry stays: its change wins).

What the model sends is checked as the REST routes check a body (``validation``,
``search.validate_query``: paths, sizes, NUL); a refusal is the tool's one-line error. Errors
become the backend's through ``memfs.mcp.api_records.translated`` and ``_dbx_errors``. This
module must not import the client (``memfs.api``) nor the client's adapter
(``memfs.mcp.store_backend``): import-linter contracts.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from memfs.contract.errors import NotFoundError, PreconditionFailedError
from memfs.contract.models import sha256_hex
from memfs.contract.search_words import best_line
from memfs.mcp.api_records import first_line, translated
from memfs.mcp.backend import (
    ChangedError,
    Listed,
    Match,
    RefusedError,
    StoredMemory,
    StoreInfo,
    TakenError,
    Version,
)
from memfs.server.databricks import validation as dbx_valid
from memfs.server.databricks.storage import (
    SOURCE_AGENT,
    AlreadyExistsError,
    DatabricksStorage,
    DbxEntry,
    EntryFilter,
    EntryPatch,
    EntryPosition,
    NewEntry,
    ResourceExhaustedError,
    SearchRequest,
)
from memfs.server.search import validate_query

log = logging.getLogger(__name__)

PAGE = 200  # entries a listing asks the storage for at once


class DatabricksBackend:
    """``actor_id``'s entries of the Databricks store ``store_id``: those of ``session_id``, or
    (None) the session-less ones, as ``memfs mcp --api databricks`` shows them."""

    def __init__(
        self,
        dbx: DatabricksStorage,
        store_id: str,
        actor_id: str,
        session_id: str | None,
        info: StoreInfo,
    ) -> None:
        self.dbx = dbx
        self.store_id = store_id
        self.actor_id = actor_id
        self.session_id = session_id
        self._info = info

    @property
    def info(self) -> StoreInfo:
        return self._info

    def _mine(self, entry: DbxEntry) -> bool:
        return entry.session_id == self.session_id

    async def read(self, path: str) -> StoredMemory | None:
        # the path in every session of the actor (and none): pages until this one's
        after: EntryPosition | None = None
        with _dbx_errors():
            while True:
                page = await self.dbx.list_entries(
                    self.store_id,
                    EntryFilter(self.actor_id, path=path),
                    after=after,
                    limit=PAGE,
                    with_content=True,
                )
                found = next((_stored(e) for e in page.items if self._mine(e)), None)
                if found is not None or page.next is None:
                    return found
                after = page.next

    async def list_below(self, prefix: str) -> list[Listed]:
        # without a session the filter returns the whole actor: the others are left out here
        flt = EntryFilter(
            self.actor_id,
            path_prefix=None if prefix == "/" else prefix,
            session_id=self.session_id,
        )
        found: list[Listed] = []
        after: EntryPosition | None = None
        with _dbx_errors():
            while True:
                page = await self.dbx.list_entries(
                    self.store_id, flt, after=after, limit=PAGE, with_content=True
                )
                for entry in filter(self._mine, page.items):
                    content = entry.content or ""
                    found.append(
                        Listed(
                            entry.id,
                            entry.path,
                            len(content.encode("utf-8")),
                            sha256_hex(content),
                            entry.description or "",
                        )
                    )
                if page.next is None:
                    return found
                after = page.next

    async def create(self, path: str, content: str, *, description: str = "") -> StoredMemory:
        with _dbx_errors():
            entry = await self.dbx.create_entry(
                self.store_id,
                NewEntry(
                    entry_id=None,
                    actor_id=self.actor_id,
                    session_id=self.session_id,
                    path=dbx_valid.new_entry_path(path),
                    content=dbx_valid.content(content),
                    description=dbx_valid.description(description),
                    source_type=SOURCE_AGENT,
                ),
            )
        return _stored(entry)

    async def update(
        self,
        memory_id: str,
        *,
        expected_sha256: str,
        content: str | None = None,
        path: str | None = None,
        description: str | None = None,
    ) -> StoredMemory:
        with _dbx_errors():
            if path is not None:
                current = await self.dbx.get_entry(self.store_id, memory_id, with_content=True)
                if path != current.path:
                    return await self._move(current, path, expected_sha256, content, description)
            fields: dict[str, str | None] = {}
            if content is not None:
                fields["content"] = dbx_valid.content(content)
            if description is not None:
                fields["description"] = dbx_valid.description(description)
            entry = await self.dbx.update_entry(
                self.store_id, memory_id, EntryPatch(fields), expected_sha256=expected_sha256
            )
        return _stored(entry)

    async def _move(
        self,
        current: DbxEntry,
        path: str,
        expected_sha256: str,
        content: str | None,
        description: str | None,
    ) -> StoredMemory:
        """A rename the API has not: create at ``path``, then delete the old entry only if it
        still holds what was read (else it stays, its change wins, and the move is reported)."""
        if sha256_hex(current.content or "") != expected_sha256:
            raise ChangedError(f"{current.path} changed since it was read")
        moved = await self.create(
            path,
            current.content or "" if content is None else content,
            description=(current.description or "") if description is None else description,
        )
        try:
            await self.dbx.delete_entry(self.store_id, current.id, expected_sha256=expected_sha256)
        except NotFoundError:
            pass  # deleted elsewhere meanwhile: moved all the same
        except PreconditionFailedError:
            log.warning(
                "%s (%s) was changed elsewhere while it was moved to %s: not deleted",
                current.path,
                current.id,
                path,
            )
        return moved

    async def delete(self, memory_id: str, *, expected_sha256: str) -> None:
        with _dbx_errors():
            await self.dbx.delete_entry(self.store_id, memory_id, expected_sha256=expected_sha256)

    async def history(self, path: str, limit: int) -> list[Version]:
        raise RefusedError("This store keeps no history.")

    async def version(self, version_id: str) -> Version:
        raise RefusedError("This store keeps no history.")

    async def search(self, query: str, limit: int) -> list[Match]:
        with _dbx_errors():
            request = SearchRequest(
                self.actor_id,
                validate_query(query),
                limit,
                session_id=self.session_id,
                session_less=self.session_id is None,
            )
            hits = await self.dbx.search_entries(self.store_id, request, with_content=True)
        return [
            Match(e.path, score, best_line(e.content or "", query), e.description or "")
            for e, score in hits
        ]


def _stored(entry: DbxEntry) -> StoredMemory:
    content = entry.content or ""
    return StoredMemory(entry.id, entry.path, content, sha256_hex(content), entry.description or "")


@contextmanager
def _dbx_errors() -> Iterator[None]:
    """The Databricks storage's own errors first, then the shared table."""
    with translated():
        try:
            yield
        except AlreadyExistsError as exc:
            raise TakenError(first_line(exc)) from exc
        except ResourceExhaustedError as exc:
            raise RefusedError(f"The store refused it: {first_line(exc)}") from exc
