"""Typed objects of the Memory Stores API, with JSON in (``from_json``) and out (``to_json``).

Shared by the client (parsing answers) and the reference server (rendering them), so the two
cannot drift. Timestamps are kept as aware ``datetime`` objects in UTC; ``format_time`` and
``parse_time`` are the one place that turns them into RFC 3339 strings and back.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, Generic, Literal, TypeVar

# The header by which a request tells the reference server which session it acts for; versions it
# writes are then attributed to {"type": "session_actor", "session_id": ...}. An extension of
# the API, namespaced so it never collides with the hosted service's headers.
SESSION_HEADER = "x-memfs-session-id"

JsonObject = dict[str, Any]
Operation = Literal["created", "modified", "deleted"]


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with microseconds: ``2026-11-30T08:46:23.123456Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    """Parse an RFC 3339 timestamp (``Z`` or an offset; any number of fraction digits)."""
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    # Python 3.11 accepts 1-6 fraction digits; trim longer fractions (nanoseconds).
    if "." in value:
        head, _, rest = value.partition(".")
        tail = rest.lstrip("0123456789")
        digits = rest[: len(rest) - len(tail)]
        value = f"{head}.{digits[:6]}{tail}"
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _time_or_none(value: Any) -> datetime | None:
    return parse_time(value) if isinstance(value, str) else None


def sha256_hex(content: str | bytes) -> str:
    """Lowercase hex SHA-256 of the UTF-8 bytes of ``content``."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True)
class Actor:
    """Who made a change: ``session_actor``, ``api_actor`` or ``user_actor``."""

    type: str
    id: str

    _ID_FIELD: ClassVar[dict[str, str]] = {
        "session_actor": "session_id",
        "api_actor": "api_key_id",
        "user_actor": "user_id",
        "service_account_actor": "service_account_id",
    }

    @classmethod
    def from_json(cls, data: JsonObject | None) -> Actor | None:
        if not data:
            return None
        kind = str(data.get("type", ""))
        id_field = cls._ID_FIELD.get(kind)
        value = data.get(id_field, "") if id_field else ""
        return cls(type=kind, id=str(value or ""))

    def to_json(self) -> JsonObject:
        return {"type": self.type, self._ID_FIELD.get(self.type, "id"): self.id}

    def describe(self) -> str:
        """Short human form: ``session sesn_…``, ``api apikey_…``."""
        return f"{self.type.removesuffix('_actor')} {self.id}"


@dataclass(frozen=True)
class MemoryStore:
    id: str
    name: str
    description: str
    metadata: dict[str, str]
    created_at: datetime
    updated_at: datetime
    archived_at: datetime | None = None

    @property
    def archived(self) -> bool:
        return self.archived_at is not None

    @classmethod
    def from_json(cls, data: JsonObject) -> MemoryStore:
        return cls(
            id=data["id"],
            name=data["name"],
            description=data.get("description") or "",
            metadata=dict(data.get("metadata") or {}),
            created_at=parse_time(data["created_at"]),
            updated_at=parse_time(data["updated_at"]),
            archived_at=_time_or_none(data.get("archived_at")),
        )

    def to_json(self) -> JsonObject:
        return {
            "id": self.id,
            "type": "memory_store",
            "name": self.name,
            "description": self.description,
            "metadata": dict(self.metadata),
            "created_at": format_time(self.created_at),
            "updated_at": format_time(self.updated_at),
            "archived_at": format_time(self.archived_at) if self.archived_at else None,
        }


@dataclass(frozen=True, slots=True)
class Memory:
    id: str
    memory_store_id: str
    path: str
    content_sha256: str
    content_size_bytes: int
    memory_version_id: str
    created_at: datetime
    updated_at: datetime
    content: str | None = None  # None with view=basic
    # an API whose memories carry one (Databricks entries); never on the Memory Stores wire
    description: str | None = None

    @classmethod
    def from_json(cls, data: JsonObject) -> Memory:
        return cls(
            id=data["id"],
            memory_store_id=data["memory_store_id"],
            path=data["path"],
            content_sha256=data["content_sha256"],
            content_size_bytes=int(data["content_size_bytes"]),
            memory_version_id=data["memory_version_id"],
            created_at=parse_time(data["created_at"]),
            updated_at=parse_time(data["updated_at"]),
            content=data.get("content"),
        )

    def to_json(self, *, full: bool = True) -> JsonObject:
        return {
            "id": self.id,
            "type": "memory",
            "memory_store_id": self.memory_store_id,
            "path": self.path,
            "content": self.content if full else None,
            "content_sha256": self.content_sha256,
            "content_size_bytes": self.content_size_bytes,
            "memory_version_id": self.memory_version_id,
            "created_at": format_time(self.created_at),
            "updated_at": format_time(self.updated_at),
        }


@dataclass(frozen=True)
class MemoryPrefix:
    """A directory rolled up by a ``depth=1`` listing; ``path`` ends with ``/``."""

    path: str

    @classmethod
    def from_json(cls, data: JsonObject) -> MemoryPrefix:
        return cls(path=data["path"])

    def to_json(self) -> JsonObject:
        return {"type": "memory_prefix", "path": self.path}


ListItem = Memory | MemoryPrefix


def list_item_from_json(data: JsonObject) -> ListItem:
    if data.get("type") == "memory_prefix":
        return MemoryPrefix.from_json(data)
    return Memory.from_json(data)


@dataclass(frozen=True, slots=True)
class MemoryVersion:
    id: str
    memory_id: str
    memory_store_id: str
    operation: Operation
    created_at: datetime
    path: str | None  # None only when redacted
    content_sha256: str | None  # None when deleted or redacted
    content_size_bytes: int | None
    created_by: Actor | None = None
    redacted_at: datetime | None = None
    redacted_by: Actor | None = None
    content: str | None = None  # None with view=basic, for deleted, or when redacted

    @property
    def redacted(self) -> bool:
        return self.redacted_at is not None

    @classmethod
    def from_json(cls, data: JsonObject) -> MemoryVersion:
        size = data.get("content_size_bytes")
        return cls(
            id=data["id"],
            memory_id=data["memory_id"],
            memory_store_id=data["memory_store_id"],
            operation=data["operation"],
            created_at=parse_time(data["created_at"]),
            path=data.get("path"),
            content_sha256=data.get("content_sha256"),
            content_size_bytes=int(size) if size is not None else None,
            created_by=Actor.from_json(data.get("created_by")),
            redacted_at=_time_or_none(data.get("redacted_at")),
            redacted_by=Actor.from_json(data.get("redacted_by")),
            content=data.get("content"),
        )

    def to_json(self, *, full: bool = True) -> JsonObject:
        return {
            "id": self.id,
            "type": "memory_version",
            "memory_id": self.memory_id,
            "memory_store_id": self.memory_store_id,
            "operation": self.operation,
            "path": self.path,
            "content": self.content if full else None,
            "content_sha256": self.content_sha256,
            "content_size_bytes": self.content_size_bytes,
            "created_at": format_time(self.created_at),
            "created_by": self.created_by.to_json() if self.created_by else None,
            "redacted_at": format_time(self.redacted_at) if self.redacted_at else None,
            "redacted_by": self.redacted_by.to_json() if self.redacted_by else None,
        }


T = TypeVar("T")


@dataclass
class Page(Generic[T]):
    """One page of a list: its items and the opaque cursor of the next page (None at the end)."""

    data: list[T] = field(default_factory=list)
    next_page: str | None = None
