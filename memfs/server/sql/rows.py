"""How the SQL backends store the models: the columns read, rows to models, times as integers.

Times are integer microseconds since the epoch (``to_us`` / ``from_us``); the change stream's
cursors are these integers too. A store's metadata is a JSON text. A memory or version row
carries its content with ``content_sha256`` and ``content_size`` (``content_columns``; all
three NULL for a ``deleted`` or redacted version). The ``*_BASIC`` column lists read ``NULL AS
content`` so that a listing with ``view=basic`` never reads the contents.

This module must not run SQL; nothing above the backends sees a row.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

from memfs.models import Actor, Memory, MemoryStore, MemoryVersion, sha256_hex
from memfs.server.sql.transaction import Row

log = logging.getLogger(__name__)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

STORE_COLUMNS = "id, name, description, metadata, created_us, updated_us, archived_us"
STORE_STATE = "id, archived_us, memory_count, version_seq, last_version_us"
MEMORY_BASIC = (
    "id, store_id, path, NULL AS content, content_sha256, content_size, head_version_id, "
    "created_us, updated_us"
)
MEMORY_FULL = (
    "id, store_id, path, content, content_sha256, content_size, head_version_id, "
    "created_us, updated_us"
)
_VERSION_TAIL = (
    "content_sha256, content_size, created_us, actor_type, actor_id, redacted_us, "
    "redacted_by_type, redacted_by_id, seq"
)
VERSION_FULL = f"id, memory_id, store_id, operation, path, content, {_VERSION_TAIL}"
VERSION_BASIC = f"id, memory_id, store_id, operation, path, NULL AS content, {_VERSION_TAIL}"


def to_us(moment: datetime) -> int:
    delta = moment.astimezone(UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def _optional_time(value: int | None) -> datetime | None:
    return from_us(value) if value is not None else None


def store_from_row(row: Row) -> MemoryStore:
    return MemoryStore(
        id=row["id"],
        name=row["name"],
        description=row["description"],
        metadata=json.loads(row["metadata"]),
        created_at=from_us(row["created_us"]),
        updated_at=from_us(row["updated_us"]),
        archived_at=_optional_time(row["archived_us"]),
    )


def memory_from_row(row: Row) -> Memory:
    return Memory(
        id=row["id"],
        memory_store_id=row["store_id"],
        path=row["path"],
        content=row["content"],
        content_sha256=row["content_sha256"],
        content_size_bytes=row["content_size"],
        memory_version_id=row["head_version_id"],
        created_at=from_us(row["created_us"]),
        updated_at=from_us(row["updated_us"]),
    )


def version_from_row(row: Row) -> MemoryVersion:
    redacted_by = None
    if row["redacted_by_type"] is not None:
        redacted_by = Actor(row["redacted_by_type"], row["redacted_by_id"])
    return MemoryVersion(
        id=row["id"],
        memory_id=row["memory_id"],
        memory_store_id=row["store_id"],
        operation=row["operation"],
        created_at=from_us(row["created_us"]),
        path=row["path"],
        content=row["content"],
        content_sha256=row["content_sha256"],
        content_size_bytes=row["content_size"],
        created_by=Actor(row["actor_type"], row["actor_id"]),
        redacted_at=_optional_time(row["redacted_us"]),
        redacted_by=redacted_by,
    )


def content_columns(content: str | None) -> tuple[str | None, str | None, int | None]:
    """``content, content_sha256, content_size`` of a content (``None``: a deleted version)."""
    if content is None:
        return None, None, None
    return content, sha256_hex(content), len(content.encode("utf-8"))
