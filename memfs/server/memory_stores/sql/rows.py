"""How the SQL backends store the models: the columns read, rows to models, times as integers.

Times are integer microseconds since the epoch (``memfs.server.db.clock``). A store's metadata
is a JSON text. A memory or version row carries its content with ``content_sha256`` and
``content_size`` (``content_columns``; all three NULL for a ``deleted`` or redacted version). The
``*_BASIC`` column lists read ``NULL AS content`` so that a listing with ``view=basic`` never reads
the contents.

A content may hold U+0000 (the API allows it). Where the database's text cannot hold it
(PostgreSQL: ``Dialect.holds_nul`` false), the content column holds it escaped: ``NUL_ESCAPE``
doubled stands for itself, ``NUL_ESCAPE`` + ``"0"`` for a NUL (``stored_content`` /
``loaded_content``, the only two places that know it; schema step 10 doubled the escape character
in the contents stored before). ``content_sha256`` and ``content_size`` are always the content's
own, so no SQL ever needs the content unescaped.

This module must not run SQL; nothing above the backends sees a row.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import datetime
from typing import overload

from memfs.contract.models import Actor, Memory, MemoryStore, MemoryVersion, sha256_hex
from memfs.server.db.clock import from_us
from memfs.server.db.transaction import Dialect, Row

log = logging.getLogger(__name__)

# A noncharacter (U+FFFF): valid in UTF-8 and in PostgreSQL's text, and almost never in a text,
# so escaping costs nothing for nearly every content.
NUL_ESCAPE = "\uffff"
_ESCAPED = re.compile(NUL_ESCAPE + "(.)", re.DOTALL)

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


def stored_content(content: str, dialect: Dialect) -> str:
    """``content`` as the dialect's content column holds it (module docstring)."""
    if dialect.holds_nul or (NUL_ESCAPE not in content and "\0" not in content):
        return content
    return content.replace(NUL_ESCAPE, NUL_ESCAPE * 2).replace("\0", NUL_ESCAPE + "0")


@overload
def loaded_content(value: str, dialect: Dialect) -> str: ...
@overload
def loaded_content(value: None, dialect: Dialect) -> None: ...
def loaded_content(value: str | None, dialect: Dialect) -> str | None:
    """The content a content column's ``value`` holds (the reverse of ``stored_content``)."""
    if value is None or dialect.holds_nul or NUL_ESCAPE not in value:
        return value
    return _ESCAPED.sub(lambda m: NUL_ESCAPE if m[1] == NUL_ESCAPE else "\0", value)


def memory_from_row(row: Row, dialect: Dialect) -> Memory:
    return Memory(
        id=row["id"],
        memory_store_id=row["store_id"],
        path=row["path"],
        content=loaded_content(row["content"], dialect),
        content_sha256=row["content_sha256"],
        content_size_bytes=row["content_size"],
        memory_version_id=row["head_version_id"],
        created_at=from_us(row["created_us"]),
        updated_at=from_us(row["updated_us"]),
    )


def version_from_row(row: Row, dialect: Dialect) -> MemoryVersion:
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
        content=loaded_content(row["content"], dialect),
        content_sha256=row["content_sha256"],
        content_size_bytes=row["content_size"],
        created_by=Actor(row["actor_type"], row["actor_id"]),
        redacted_at=_optional_time(row["redacted_us"]),
        redacted_by=redacted_by,
    )


def content_columns(
    content: str | None, dialect: Dialect
) -> tuple[str | None, str | None, int | None]:
    """``content, content_sha256, content_size`` of a content (``None``: a deleted version)."""
    if content is None:
        return None, None, None
    return stored_content(content, dialect), sha256_hex(content), len(content.encode("utf-8"))
