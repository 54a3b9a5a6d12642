"""What the console (``memfs.server.console``) keeps and reads beyond the API's ``Storage``.

``ConsoleStorage`` holds the console's sign-in sessions, in the database so
that every replica sees them: a session row is the SHA-256 of the random token the browser's
cookie holds (never the token itself), the id of the API key signed in with (``ids.api_key_id``,
never the key) and its times. The policy (how long a session lives, when it is touched) is the
console's; this interface only stores rows. It also counts a page of stores' memories at once
(the stores page shows "N of 2,000"), and lists a store's memories as what the store page's
tree shows of each (``TreeMemory``: id, path, size, when and by whom it last changed; no
content or hash read or turned into objects, which made the API's listing of 2,000 memories
cost most of the page). For "the store as of" a moment it reads
``VersionMark`` rows (no content, nothing but what ``memfs.contract.version_view`` needs and the
page shows): each memory's newest version then, and the whole history of the few memories whose
version then was redacted (its path is inferred from its neighbours').
For the history's "+3 −1" it reads a page of versions' contents each beside its memory's
version before it (``version_changes``: one query, the previous found by index).
For a Databricks store it counts entries by actor and by an actor's session
(``dbx_actors``, ``dbx_sessions``): the Databricks API has no listing of either; and it reads a
Databricks store's newest change (``dbx_newest_change``: where a live page's stream starts, one
index lookup where ``DatabricksStorage.change_bounds`` also looks for the store's last deletion
among all its changes).

``console.sql`` implements it on the ``Storage`` backend's transactions for both SQL backends. This
module must not know about HTTP.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from memfs.contract.models import Actor

log = logging.getLogger(__name__)


class TreeMemory(NamedTuple):
    """A memory as the store page's tree shows it: its head version's time and writer (a
    tuple: 2,000 of them are made for one page, 4x faster than a frozen dataclass)."""

    id: str
    path: str
    size: int  # bytes of UTF-8 content
    changed_at: datetime
    changed_by: Actor


@dataclass(frozen=True, slots=True)
class VersionMark:
    """A version as "the store as of" reads it (``memfs.contract.version_view.VersionLike``)."""

    id: str
    memory_id: str
    operation: str
    path: str | None  # None when redacted
    created_at: datetime
    size: int | None  # None when deleted or redacted
    redacted: bool


@dataclass(frozen=True, slots=True)
class ContentPair:
    """A version's content and that of its memory's version before it, for a line count:
    ``""`` for a deletion's content or a first version's predecessor, None when redacted."""

    content: str | None
    previous: str | None


@dataclass(frozen=True, slots=True)
class EntryGroup:
    """The entries of one actor of a Databricks store, or of one of its sessions (``key``
    ``None``: the actor's entries without a session)."""

    key: str | None
    entries: int


@dataclass(frozen=True)
class ConsoleSession:
    """One signed-in browser: ``token_hash`` is the hex SHA-256 of its cookie's token."""

    token_hash: str
    api_key_id: str
    created_at: datetime
    expires_at: datetime  # the absolute limit
    last_seen_at: datetime  # the idle limit counts from here


class ConsoleStorage(abc.ABC):
    """The console's sessions and counts (see the module docstring)."""

    @property
    @abc.abstractmethod
    def memory_limit(self) -> int:
        """How many memories a store may hold (the storage's limit)."""

    @abc.abstractmethod
    async def create_session(self, session: ConsoleSession, *, ended_before: datetime) -> None:
        """Store ``session``; in the same transaction delete every session that expired or was
        last seen before ``ended_before`` (so ended sessions never pile up)."""

    @abc.abstractmethod
    async def get_session(self, token_hash: str) -> ConsoleSession | None:
        """The session of ``token_hash``, or None."""

    @abc.abstractmethod
    async def touch_session(self, token_hash: str, seen_at: datetime) -> None:
        """Move the session's ``last_seen_at`` to ``seen_at`` (nothing if it is gone)."""

    @abc.abstractmethod
    async def delete_session(self, token_hash: str) -> None:
        """End the session (nothing if it is gone)."""

    @abc.abstractmethod
    async def memory_counts(self, store_ids: Sequence[str]) -> dict[str, int]:
        """How many memories each of ``store_ids`` holds (unknown stores are left out)."""

    @abc.abstractmethod
    async def tree_memories(self, store_id: str) -> list[TreeMemory]:
        """Every memory of the store, in byte order of path (an unknown store: an empty list)."""

    @abc.abstractmethod
    async def latest_versions(self, store_id: str, instant: datetime) -> list[VersionMark]:
        """Each memory's newest version made at or before ``instant``, in the store's order
        (an unknown store: an empty list)."""

    @abc.abstractmethod
    async def version_marks(self, store_id: str, memory_ids: Sequence[str]) -> list[VersionMark]:
        """Every version of those memories of the store, oldest first (the store's order)."""

    @abc.abstractmethod
    async def version_changes(
        self, store_id: str, version_ids: Sequence[str]
    ) -> dict[str, ContentPair]:
        """Each of those versions of the store (by id; unknown ones left out) with its memory's
        version before it (``ContentPair``)."""

    @abc.abstractmethod
    async def dbx_actors(
        self, store_id: str, *, limit: int, after: str | None = None
    ) -> list[EntryGroup]:
        """The first ``limit`` actors of a Databricks store by id (byte order) after the actor
        ``after`` (None: from the first), each with its entry count (an unknown store: an
        empty list)."""

    @abc.abstractmethod
    async def dbx_sessions(
        self, store_id: str, actor_id: str, *, limit: int, after: str | None = None
    ) -> list[EntryGroup]:
        """The first ``limit`` sessions of an actor by id after the session ``after`` ("": the
        entries without a session; None: from the first), each with its entry count; the
        entries without a session first (``key`` None)."""

    @abc.abstractmethod
    async def dbx_newest_change(self, store_id: str) -> int:
        """The ``ordinal`` of the Databricks store's newest change (0: none yet; an unknown
        store: 0, as the page that asks has just read the store)."""
