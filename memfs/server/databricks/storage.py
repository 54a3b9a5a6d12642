"""The storage interface of Databricks Agent Memory on the reference server, and its models.

``DatabricksStorage`` is what the Databricks routes (``memfs.server.databricks.routes``) need:
stores (created under a caller-chosen id), entries (keyed by actor, session and path), listings
and search. ``databricks.sql.SqlDatabricks`` implements it once for SQLite and PostgreSQL, in
the same database as the Memory Stores tables; ``Storage.databricks`` hands it out. The two APIs
share nothing but the database and the API keys.

A backend owns every rule that depends on stored state: a free store id, a free entry id, a
free ``(actor_id, session_id, path)`` key (``AlreadyExistsError``), existence
(``NotFoundError``), the entry limit of a store (``ResourceExhaustedError``). Each mutation is one
transaction, so these checks cannot race. Nothing here knows about HTTP or SQL.

``session_id`` is ``None`` for an entry without a session (stored as ``""``: an empty
``session_id`` on the wire means "unset" too).

The change log (a memfs extension, served by ``databricks.stream``): every entry create, update
(that changes something), delete and every store delete appends one ``DbxChange`` in the same
transaction. Its ``ordinal`` numbers the store's changes 1, 2, 3… in commit order, per store (a
store's ordinals never depend on another store's writes); a backend also announces the change on
``change_topic(store_id)`` (``memfs.server.db.notify``).
"""

from __future__ import annotations

import abc
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, Literal, NamedTuple, TypeVar

from memfs.contract.errors import ApiError

log = logging.getLogger(__name__)

T = TypeVar("T")
P = TypeVar("P")

SOURCE_AGENT = "MANAGED_MEMORY_ENTRY_SOURCE_TYPE_AGENT"
SOURCE_DREAMER = "MANAGED_MEMORY_ENTRY_SOURCE_TYPE_DREAMER"
# The change hub's name of a Databricks store (the Memory Stores side uses the bare store id,
# which never holds a "/", nor does a Databricks store id).
TOPIC_PREFIX = "databricks/"


def change_topic(store_id: str) -> str:
    return TOPIC_PREFIX + store_id


class AlreadyExistsError(ApiError):
    """A store id, an entry id or an entry's (actor, session, path) is taken."""

    status = 409
    error_type = "already_exists"


class ResourceExhaustedError(ApiError):
    """A store already holds ``MAX_ENTRIES_PER_STORE`` entries.

    400, not 429: databricks-sdk retries every 429 and 503 for minutes, and a full store stays
    full until somebody deletes entries."""

    status = 400
    error_type = "resource_exhausted"


def format_timestamp(moment: datetime) -> str:
    """RFC 3339 in UTC with ``Z`` and always 6 fractional digits (agentkit's parser on Python
    3.10 takes 0, 3 or 6 digits only)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Page(Generic[T, P]):
    """Items of one page and the position after the last one (``None``: no more items)."""

    items: list[T]
    next: P | None


@dataclass(frozen=True)
class DbxStore:
    id: str
    description: str | None
    creator: str
    create_time: datetime
    update_time: datetime

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "name": f"memory-stores/{self.id}",
            "display_name": self.id,
            "creator_user_id": self.creator,
            "owner_user_id": self.creator,  # deprecated alias: agentkit reads only this one
            "create_time": format_timestamp(self.create_time),
            "update_time": format_timestamp(self.update_time),
        }
        if self.description is not None:
            body["description"] = self.description
        return body


@dataclass(frozen=True)
class DbxEntry:
    store_id: str
    id: str
    actor_id: str
    session_id: str | None
    path: str
    content: str | None  # also None when read without content (view BASIC)
    description: str | None
    source_type: str
    create_time: datetime
    update_time: datetime

    def to_json(self) -> dict[str, Any]:
        """The wire form; unset fields are omitted (proto3 JSON), never sent as ``""``."""
        body: dict[str, Any] = {
            "name": f"memory-stores/{self.store_id}/entries/{self.id}",
            "actor_id": self.actor_id,
            "path": self.path,
            "source_type": self.source_type,
            "create_time": format_timestamp(self.create_time),
            "update_time": format_timestamp(self.update_time),
        }
        if self.session_id is not None:
            body["session_id"] = self.session_id
        if self.content is not None:
            body["content"] = self.content
        if self.description is not None:
            body["description"] = self.description
        return body


ChangeKind = Literal["created", "updated", "deleted", "store_deleted"]


@dataclass(frozen=True)
class DbxChange:
    """One change of a store's entries (or the store's deletion: ``entry_id`` "")."""

    ordinal: int  # its place in the store's change log: 1, 2, 3… (the stream's event id)
    store_id: str
    kind: ChangeKind
    entry_id: str
    actor_id: str
    session_id: str | None
    path: str
    update_time: datetime  # the entry's update_time after the change; a delete's own time
    content_sha256: str | None  # of the content written (None for deletes)
    content_size: int | None

    def to_json(self) -> dict[str, Any]:
        """The change stream's ``data`` (unset fields omitted, as entries are)."""
        body: dict[str, Any] = {
            "type": "entry_change",
            "kind": self.kind,
            "name": f"memory-stores/{self.store_id}/entries/{self.entry_id}",
            "actor_id": self.actor_id,
            "path": self.path,
            "update_time": format_timestamp(self.update_time),
        }
        if self.session_id is not None:
            body["session_id"] = self.session_id
        if self.content_sha256 is not None:
            body["content_sha256"] = self.content_sha256
            body["content_size_bytes"] = self.content_size
        return body


@dataclass(frozen=True)
class NewEntry:
    """An entry to create (checked by ``databricks.validation``)."""

    entry_id: str | None  # None: the server picks one
    actor_id: str
    session_id: str | None
    path: str
    content: str | None
    description: str | None
    source_type: str


@dataclass(frozen=True)
class EntryFilter:
    """Which of one actor's entries a listing returns.

    ``path``: that exact path in every session and without one (``session_id`` is ignored);
    else ``session_id``: that session only; neither: all the actor's entries. ``path_prefix``
    (a plain string prefix of the path) narrows further."""

    actor_id: str
    path: str | None = None
    path_prefix: str | None = None
    session_id: str | None = None


@dataclass(frozen=True)
class EntryPosition:
    """Where an entry listing (by path, then session, then id) continues: strictly after it."""

    path: str
    session_id: str  # "" for no session
    entry_id: str


@dataclass(frozen=True)
class EntryPatch:
    """Fields an update sets: a name in ``fields`` with value ``None`` clears that field."""

    fields: dict[str, str | None]


class ChangeBounds(NamedTuple):
    """The change log of one store, as positions (``ordinal``) a stream starts after."""

    # after the deletion of the store that had the id before this one (0: none): a store
    # created again under a deleted one's id has a history of its own
    start: int
    newest: int  # the store's newest change (``start`` if none yet)


@dataclass(frozen=True)
class SearchRequest:
    actor_id: str
    query: str
    limit: int
    session_id: str | None = None
    path_prefix: str | None = None
    session_less: bool = False  # the actor's session-less entries only (a memfs extension)


class DatabricksStorage(abc.ABC):
    """Async storage of Databricks memory stores and entries. Every mutation is one
    transaction."""

    # -- stores ---------------------------------------------------------------------------------

    @abc.abstractmethod
    async def create_store(
        self, store_id: str, *, description: str | None, creator: str
    ) -> DbxStore:
        """AlreadyExistsError when the id is taken."""

    @abc.abstractmethod
    async def get_store(self, store_id: str) -> DbxStore: ...

    @abc.abstractmethod
    async def list_stores(self, *, after: str | None, limit: int) -> Page[DbxStore, str]:
        """Stores by id (byte order); ``after`` is the last id seen."""

    @abc.abstractmethod
    async def update_store(self, store_id: str, *, description: str | None) -> DbxStore:
        """Set (or, with ``None``, clear) the description; a no-op keeps ``update_time``."""

    @abc.abstractmethod
    async def delete_store(self, store_id: str) -> None:
        """Delete the store and all its entries at once; the id is free again at once."""

    # -- entries --------------------------------------------------------------------------------

    @abc.abstractmethod
    async def create_entry(self, store_id: str, entry: NewEntry) -> DbxEntry:
        """Exclusive create: AlreadyExistsError for a taken id or (actor, session, path);
        ResourceExhaustedError when the store is full."""

    @abc.abstractmethod
    async def get_entry(self, store_id: str, entry_id: str, *, with_content: bool) -> DbxEntry: ...

    @abc.abstractmethod
    async def list_entries(
        self,
        store_id: str,
        flt: EntryFilter,
        *,
        after: EntryPosition | None,
        limit: int,
        with_content: bool,
    ) -> Page[DbxEntry, EntryPosition]: ...

    @abc.abstractmethod
    async def update_entry(
        self,
        store_id: str,
        entry_id: str,
        patch: EntryPatch,
        *,
        expected_sha256: str | None = None,
        expected_description_sha256: str | None = None,
    ) -> DbxEntry:
        """Apply the patch; ``update_time`` moves only when something changed.
        ``expected_sha256`` (a memfs extension, not on the wire: the server's MCP tools and
        console): only if the content's SHA-256 is still that, checked in the write's
        transaction, else ``PreconditionFailedError``; ``expected_description_sha256`` the same
        for the description (``""`` when it has none: the console's description edit)."""

    @abc.abstractmethod
    async def delete_entry(
        self, store_id: str, entry_id: str, *, expected_sha256: str | None = None
    ) -> None:
        """Delete; ``expected_sha256`` as for ``update_entry``."""

    @abc.abstractmethod
    async def search_entries(
        self, store_id: str, request: SearchRequest, *, with_content: bool
    ) -> list[tuple[DbxEntry, float]]:
        """The actor's best entries for the query, best first (higher score = better)."""

    # -- the change log (memfs extension) ---------------------------------------------------------

    @abc.abstractmethod
    async def list_changes(
        self, store_id: str, *, after: int, actor_id: str | None, limit: int
    ) -> list[DbxChange]:
        """The store's changes with ``ordinal`` > ``after``, oldest first, at most ``limit``: only
        ``actor_id``'s entries if given, and always the store's deletion."""

    @abc.abstractmethod
    async def change_bounds(self, store_id: str) -> ChangeBounds:
        """Where the store's own change history starts and ends (one snapshot);
        NotFoundError if the store does not exist."""
