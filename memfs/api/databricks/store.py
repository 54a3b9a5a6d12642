"""One Databricks Agent Memory store, seen as one (actor, session), as a ``StoreAPI``.

The mount shows the entries of one actor: without a session, its session-less entries (a list
returns the whole actor: the others are filtered out here); with one, only that session's.
Each entry is a memory: its id the entry id, its path the entry path, its content the file,
its description the ``user.description`` attribute.

What the API lacks is made up here, where the window it leaves is known (docs/semantics.md,
"Databricks stores"):
- no content hashes: ``content_sha256`` is computed from the content (an entry seen without
  it, BASIC view, takes the hash last computed for the same ``update_time``, else is read);
- no preconditions: ``update``/``delete`` with ``expected_sha256`` read the entry first and
  raise ``PreconditionFailedError`` if its content is no longer the expected one; a change
  made elsewhere between that read and the write is not detected (the window);
- no rename: ``update(path=...)`` creates at the new path (content and description kept) and
  deletes the old entry if it is still as read (else it stays: its change wins); the answer
  is the new entry (a new id: ``rename_keeps_identity``);
- no directories: ``list_directory_page`` derives them from the flat entry paths;
- no versions and no change listing: ``recent_changes`` compares listings (BASIC view)
  (``memfs.api.databricks.changes``); each change is one made-up version. memfs server pushes
  changes instead (``memfs.api.databricks.stream``) when its capabilities say so: each becomes
  the same made-up version (the id of the entry's state), with the hash the server computed;
- no search of the session-less entries alone (no session = the whole actor): memfs server
  offers one (``memfs_session_less``); elsewhere a session-less mount searches with its own
  index (``offers_search``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterable, AsyncIterator
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any

from memfs.api.capabilities import server_offers
from memfs.api.databricks.changes import ListingDiff
from memfs.api.databricks.client import VIEW_BASIC, VIEW_FULL, DatabricksClient, Entry
from memfs.api.databricks.stream import EntryChange, EntryChangeStream, server_offers_entry_stream
from memfs.contract import databricks_limits
from memfs.contract.errors import NotFoundError, NotSupportedError, PreconditionFailedError
from memfs.contract.models import (
    ListItem,
    Memory,
    MemoryPrefix,
    MemoryVersion,
    Page,
    format_time,
    sha256_hex,
)
from memfs.contract.store_api import Capabilities, ChangeEvent, SearchResult

log = logging.getLogger(__name__)

DATABRICKS = Capabilities(
    preconditions=False,
    versions=False,
    rename_keeps_identity=False,
    descriptions=True,
    max_content_bytes=databricks_limits.MAX_CONTENT_BYTES,
    max_description_bytes=databricks_limits.MAX_DESCRIPTION_BYTES,
    max_memories=databricks_limits.MAX_ENTRIES_PER_STORE,
    refused_characters=databricks_limits.REFUSED_CHARACTERS,
)


# memfs server's capability: entries:search takes "memfs_session_less": true
SESSION_LESS_SEARCH = "databricks_search_session_less"


class DatabricksStore:
    """The entries of ``actor_id`` (and ``session_id``, or none) in the store ``store_id``."""

    capabilities = DATABRICKS

    def __init__(
        self,
        client: DatabricksClient,
        store_id: str,
        actor_id: str,
        session_id: str | None = None,
        *,
        diff: ListingDiff | None = None,
    ) -> None:
        self.client = client
        self._store_id = store_id
        self.actor_id = actor_id
        self.session_id = session_id
        # content hashes by entry id, for the update_time they were computed at (BASIC lists)
        self._hashes: dict[str, tuple[datetime, str, int]] = {}
        # the listing compared by recent_changes; shared by the daemon's two adapters
        self.diff = diff if diff is not None else ListingDiff()

    def __repr__(self) -> str:
        session = f", session {self.session_id}" if self.session_id else ""
        return f"DatabricksStore({self._store_id}, actor {self.actor_id}{session})"

    def with_client(self, client: DatabricksClient) -> DatabricksStore:
        """The same store over another client (other deadlines), sharing the change listing."""
        twin = DatabricksStore(
            client, self._store_id, self.actor_id, self.session_id, diff=self.diff
        )
        twin._hashes = self._hashes
        return twin

    @property
    def store_id(self) -> str:
        return self._store_id

    # -- entries as memories -----------------------------------------------------------------

    def _mine(self, entry: Entry) -> bool:
        return entry.actor_id == self.actor_id and entry.session_id == self.session_id

    def _memory(self, entry: Entry, *, with_content: bool = True) -> Memory:
        """The memory of an entry read with its content (FULL view)."""
        content = entry.content or ""
        sha, size = sha256_hex(content), len(content.encode("utf-8"))
        self._hashes[entry.id] = (entry.update_time, sha, size)
        return Memory(
            id=entry.id,
            memory_store_id=self._store_id,
            path=entry.path,
            content_sha256=sha,
            content_size_bytes=size,
            memory_version_id=version_id(entry.id, entry.update_time),
            created_at=entry.create_time,
            updated_at=entry.update_time,
            content=content if with_content else None,
            description=entry.description,
        )

    async def _hash_of(self, entry: Entry) -> tuple[str, int]:
        """The content hash and size of an entry listed without content (read if unknown)."""
        known = self._hashes.get(entry.id)
        if known is not None and known[0] == entry.update_time:
            return known[1], known[2]
        full = self._memory(await self._get(entry.id))
        return full.content_sha256, full.content_size_bytes

    async def _entries(self, prefix: str | None, *, view: str = VIEW_FULL) -> list[Entry]:
        """This actor's (and session's) entries below ``prefix`` ("/a/": None for all)."""
        # sent without its trailing slash (whether the API takes a prefix as a string or by
        # segments is an open question of the contract); narrowed here
        wire_prefix = prefix.rstrip("/") if prefix and prefix != "/" else None
        found: list[Entry] = []
        async for entry in self.client.list_entries(
            self._store_id,
            self.actor_id,
            session_id=self.session_id,
            path_prefix=wire_prefix,
            view=view,
        ):
            if self._mine(entry) and (prefix is None or entry.path.startswith(prefix)):
                found.append(entry)
        found.sort(key=lambda e: e.path)
        return found

    async def _get(self, entry_id: str) -> Entry:
        entry = await self.client.get_entry(self._store_id, entry_id, view=VIEW_FULL)
        if not self._mine(entry):  # another actor's or session's: not in this mount
            raise NotFoundError(f"entry {entry_id!r} not found")
        return entry

    # -- reading -----------------------------------------------------------------------------

    async def list_directory_page(
        self,
        prefix: str | None,
        *,
        with_content: bool = False,
        cursor: str | None = None,
        limit: int = 100,
    ) -> Page[ListItem]:
        """The whole directory in one page (the API lists flat entries: its pages are followed
        here, and the directories derived from the paths below ``prefix``)."""
        base = prefix or "/"
        items: list[ListItem] = []
        seen_dirs: set[str] = set()
        for entry in await self._entries(None if base == "/" else base):
            rest = entry.path[len(base) :]
            if "/" in rest:
                directory = base + rest.split("/", 1)[0] + "/"
                if directory not in seen_dirs:
                    seen_dirs.add(directory)
                    items.append(MemoryPrefix(directory))
            else:
                items.append(self._memory(entry, with_content=with_content))
        return Page(items, None)

    async def list_subtree_page(
        self, prefix: str | None, *, cursor: str | None = None, limit: int = 20
    ) -> Page[Memory]:
        """Every entry below ``prefix``, content too, in one page (the API lists flat)."""
        return Page([self._memory(entry) for entry in await self._entries(prefix)], None)

    async def list_below(self, prefix: str | None) -> AsyncIterator[Memory]:
        for entry in await self._entries(prefix):
            yield self._memory(entry, with_content=False)

    async def find(self, path: str) -> Memory | None:
        async for entry in self.client.list_entries(
            self._store_id, self.actor_id, path=path, view=VIEW_FULL
        ):
            if entry.path == path and self._mine(entry):
                return self._memory(entry, with_content=False)
        return None

    async def read(self, memory_id: str, *, with_content: bool = True) -> Memory:
        return self._memory(await self._get(memory_id), with_content=with_content)

    async def store_exists(self) -> bool:
        try:
            await self.client.get_store(self._store_id)
        except NotFoundError:
            return False
        return True

    # -- writing -----------------------------------------------------------------------------

    async def create(self, path: str, content: str, *, description: str | None = None) -> Memory:
        entry = await self.client.create_entry(
            self._store_id, self.actor_id, self.session_id, path, content, description
        )
        return self._memory(entry)

    async def update(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        path: str | None = None,
        expected_sha256: str | None = None,
        description: str | None = None,
    ) -> Memory:
        current: Entry | None = None
        if expected_sha256 is not None or path is not None:
            current = await self._get(memory_id)
            self._check_precondition(current, expected_sha256)
        if path is not None and current is not None and path != current.path:
            return await self._move(current, path, content, description)
        if content is None and description is None:
            return self._memory(current or await self._get(memory_id))
        entry = await self.client.update_entry(
            self._store_id, memory_id, content=content, description=description
        )
        return self._memory(entry)

    async def _move(
        self, current: Entry, path: str, content: str | None, description: str | None
    ) -> Memory:
        """A rename the API has not: create at ``path`` (description kept), delete the old."""
        moved = await self.client.create_entry(
            self._store_id,
            self.actor_id,
            self.session_id,
            path,
            current.content or "" if content is None else content,
            current.description if description is None else description,
        )
        with contextlib.suppress(NotFoundError):  # deleted elsewhere meanwhile: moved all the same
            # the old entry is deleted only as it was read (the delete's precondition): changed
            # elsewhere since, it stays and its change wins; the window is this read's round trip
            latest = await self.client.get_entry(self._store_id, current.id, view=VIEW_BASIC)
            if latest.update_time != current.update_time:
                log.warning(
                    "%s (%s) was changed elsewhere while it was moved to %s: not deleted",
                    current.path,
                    current.id,
                    path,
                )
            else:
                await self.client.delete_entry(self._store_id, current.id)
        return self._memory(moved)

    def _check_precondition(self, current: Entry, expected_sha256: str | None) -> None:
        if expected_sha256 is None:
            return
        actual = self._memory(current).content_sha256
        if actual != expected_sha256:
            raise PreconditionFailedError(
                f"entry {current.id!r} changed since it was read (content_sha256 {actual}, "
                f"not {expected_sha256})"
            )

    async def delete(self, memory_id: str, *, expected_sha256: str | None = None) -> None:
        if expected_sha256 is not None:
            self._check_precondition(await self._get(memory_id), expected_sha256)
        await self.client.delete_entry(self._store_id, memory_id)

    # -- changes: made up by comparing listings -------------------------------------------------

    async def recent_changes(self, *, since: datetime | None, limit: int) -> Page[MemoryVersion]:
        listed = await self._entries(None, view=VIEW_BASIC)
        hashes: dict[str, tuple[str, int]] = {}
        for entry in [e for e in listed if self.diff.changed(e)]:
            try:
                hashes[entry.id] = await self._hash_of(entry)
            except NotFoundError:  # deleted since the listing: the next poll reports it
                listed.remove(entry)
        self.diff.compare(self._store_id, listed, hashes)
        return self.diff.recent(since, limit)

    # -- changes: pushed by memfs server (an extension) -------------------------------------------

    async def offers_change_stream(self) -> bool:
        return await server_offers_entry_stream(self.client)

    def change_stream(self) -> AbstractAsyncContextManager[AsyncIterable[ChangeEvent]]:
        return EntryChangeStream(self.client, self._store_id, self.actor_id, self._version_of)

    def _version_of(self, change: EntryChange) -> MemoryVersion | None:
        """The made-up version of a pushed change; None if the entry is not this mount's (the
        stream has the actor's changes, of every session)."""
        if change.actor_id != self.actor_id or change.session_id != self.session_id:
            return None
        if change.content_sha256 is not None and change.content_size is not None:
            # a BASIC listing of this state then needs no read (``_hash_of``)
            self._hashes[change.entry_id] = (
                change.update_time,
                change.content_sha256,
                change.content_size,
            )
        return MemoryVersion(
            id=version_id(change.entry_id, change.update_time),
            memory_id=change.entry_id,
            memory_store_id=self._store_id,
            operation="modified" if change.kind == "updated" else change.kind,
            created_at=change.update_time,
            path=change.path,
            content_sha256=change.content_sha256,
            content_size_bytes=change.content_size,
        )

    async def offers_search(self) -> bool:
        """Without a session, ``entries:search`` searches the whole actor: filtering its top
        100 would miss and misrank session-less entries, so only a memfs server that ranks
        them alone (``memfs_session_less``) searches; elsewhere the mount's index does."""
        if self.session_id is not None:
            return True
        return await server_offers(self.client, SESSION_LESS_SEARCH)

    async def search(
        self, query: str, *, limit: int = 10, path_prefix: str | None = None
    ) -> list[SearchResult]:
        """``entries:search`` of the mount's actor and session (without one: its session-less
        entries, ``memfs_session_less``; only if ``offers_search``)."""
        hits = await self.client.search_entries(
            self._store_id,
            self.actor_id,
            query,
            session_id=self.session_id,
            session_less=self.session_id is None,
            path_prefix=path_prefix,
            page_size=limit,
        )
        return [
            SearchResult(entry.path, score, entry.description, entry.id, entry.content)
            for entry, score in hits
            if self._mine(entry)  # never another session's, whatever a server answers
        ]

    def list_versions(
        self, *, memory_id: str | None = None, since: datetime | None = None
    ) -> AsyncIterator[MemoryVersion]:
        raise NotSupportedError("Databricks entries have no versions")

    async def get_version(self, version_id: str) -> MemoryVersion:
        raise NotSupportedError("Databricks entries have no versions")

    def request_counts(self) -> dict[str, Any]:
        return self.client.stats.snapshot()


def version_id(entry_id: str, update_time: datetime) -> str:
    """The made-up version id of an entry's state: its id and ``update_time``."""
    return f"{entry_id}@{format_time(update_time)}"
