"""Validation of Databricks Agent Memory requests: every rule that needs no stored state.

Ids (``store_id``: the contract's pattern; ``entry_id``: what this server accepts for a
caller-chosen one), actors and sessions, entry paths (a new entry's under the rules a mount can
save: ``new_entry_path``) and path prefixes, content and description
sizes (``memfs.contract.databricks_limits``), source types, views, page sizes and update masks.
Proto3 JSON rules: a JSON ``null`` or an empty string is an unset field, unknown fields are ignored.
Every string goes through ``memfs.server.http.body.text_field`` first: valid Unicode, no NUL.

Every refusal is a ``BadRequestError`` whose message names the field; the Databricks routes
render it as 400 ``INVALID_PARAMETER_VALUE``. This module is pure: it must not touch storage.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from memfs.contract import paths
from memfs.contract.databricks_limits import (
    DEFAULT_PAGE_SIZE,
    MAX_CONTENT_BYTES,
    MAX_DESCRIPTION_BYTES,
    MAX_ID_CHARS,
    MAX_PAGE_SIZE,
    MAX_PATH_BYTES,
)
from memfs.contract.errors import BadRequestError
from memfs.server.databricks.storage import SOURCE_AGENT, SOURCE_DREAMER
from memfs.server.http.body import text_field, type_name
from memfs.server.http.query import decimal

log = logging.getLogger(__name__)

# managed_memory_store_id: 3-56 characters, a lowercase letter first, then lowercase letters,
# digits and hyphens, a letter or digit last.
_STORE_ID = re.compile(r"^[a-z][a-z0-9-]{1,54}[a-z0-9]$")
# A caller-chosen entry id (the contract leaves the format open): URL-safe, no '/'.
_ENTRY_ID = re.compile(r"^[A-Za-z0-9_.-]+$")
_SOURCE_UNSPECIFIED = "MANAGED_MEMORY_ENTRY_SOURCE_TYPE_UNSPECIFIED"
VIEW_BASIC = "MANAGED_MEMORY_ENTRY_VIEW_BASIC"
VIEW_FULL = "MANAGED_MEMORY_ENTRY_VIEW_FULL"
_VIEW_UNSPECIFIED = "MANAGED_MEMORY_ENTRY_VIEW_UNSPECIFIED"


def optional(body: Mapping[str, Any], name: str) -> Any:
    """A body field, or ``None`` when absent, ``null`` or ``""`` (unset in proto3 JSON)."""
    value = body.get(name)
    return None if value is None or value == "" else value


def store_id(value: Any, name: str = "managed_memory_store_id") -> str:
    if value is None or value == "":
        raise BadRequestError(f"{name}: required")
    text = text_field(value, name)
    if not _STORE_ID.match(text):
        raise BadRequestError(
            f"{name}: must be 3 to 56 characters: a lowercase letter first, then lowercase "
            "letters, digits or hyphens, ending with a letter or digit"
        )
    return text


def entry_id(value: Any) -> str:
    text = text_field(value, "managed_memory_entry_id")
    if len(text) > MAX_ID_CHARS or not _ENTRY_ID.match(text) or text in (".", ".."):
        raise BadRequestError(
            f"managed_memory_entry_id: must be 1 to {MAX_ID_CHARS} letters, digits, '-', '_' "
            "or '.' (not '.' or '..')"
        )
    return text


def _identifier(value: Any, name: str) -> str:
    """An actor or session id: at most ``MAX_ID_CHARS`` UTF-8 bytes (so as many ASCII
    characters). Counted in bytes because the key (actor, session, path) is indexed, and a
    PostgreSQL index entry holds at most 2,704 bytes: 256 four-byte characters each would not
    fit beside a 1,024-byte path."""
    text = text_field(value, name)
    if len(text.encode("utf-8")) > MAX_ID_CHARS:
        raise BadRequestError(f"{name}: must be at most {MAX_ID_CHARS} bytes of UTF-8")
    return text


def actor_id(value: Any) -> str:
    if value is None or value == "":
        raise BadRequestError("actor_id: required")
    return _identifier(value, "actor_id")


def session_id(value: Any) -> str | None:
    """``None`` (no session) for an absent or empty ``session_id``."""
    if value is None or value == "":
        return None
    return _identifier(value, "session_id")


def session_less(value: Any, session: str | None) -> bool:
    """``memfs_session_less`` of a search (a memfs extension): true = the actor's session-less
    entries only, which the contract's scopes cannot say (no session = the whole actor)."""
    if value is None:
        return False
    if not isinstance(value, bool):
        raise BadRequestError("memfs_session_less: expected true or false")
    if value and session is not None:
        raise BadRequestError("memfs_session_less: a search with a session_id has no such entries")
    return value


def _path_text(value: Any, name: str) -> str:
    text = text_field(value, name)
    if len(text.encode("utf-8")) > MAX_PATH_BYTES:
        raise BadRequestError(f"{name}: must be at most {MAX_PATH_BYTES} bytes of UTF-8")
    if not text.startswith("/"):
        raise BadRequestError(f"{name}: must start with '/' (got {text[:80]!r})")
    return text


def entry_path(value: Any, name: str = "path") -> str:
    """An entry path: absolute, with no empty, ``.`` or ``..`` segment (so not ``/``)."""
    if value is None or value == "":
        raise BadRequestError(f"{name}: required")
    text = _path_text(value, name)
    if any(segment in ("", ".", "..") for segment in text[1:].split("/")):
        raise BadRequestError(
            f"{name}: must not contain an empty, '.' or '..' segment (got {text[:80]!r})"
        )
    return text


def new_entry_path(value: Any) -> str:
    """The path of an entry being created: ``entry_path``, and the rules a mount can save
    (``memfs.contract.paths.validate_file_path``: NFC, no control or format characters, at most 20
    segments of at most 255 bytes), so that every entry can be a file of a mount. A path of an
    entry stored before these rules (by an older server) is still accepted where an existing
    entry is named: a list's exact ``path``."""
    text = entry_path(value)
    try:
        paths.validate_file_path(text)
    except paths.PathError as exc:
        raise BadRequestError(f"path: {exc}") from None
    return text


def path_prefix(value: Any) -> str | None:
    """A ``path_prefix``: like a path, but it may end in ``/`` (``/`` alone is every path). It
    matches as a plain string prefix: ``/notes`` matches ``/notes.md``, ``/notes/`` does not."""
    if value is None or value == "":
        return None
    text = _path_text(value, "path_prefix")
    segments = text[1:].split("/")
    if segments[-1] == "":
        segments.pop()  # one trailing '/'
    if any(segment in ("", ".", "..") for segment in segments):
        raise BadRequestError(
            f"path_prefix: must not contain an empty, '.' or '..' segment (got {text[:80]!r})"
        )
    return text


def _sized_text(value: Any, name: str, limit: int) -> str:
    text = text_field(value, name)
    size = len(text.encode("utf-8"))
    if size > limit:
        raise BadRequestError(f"{name}: {size} bytes is more than the maximum of {limit} bytes")
    return text


def content(value: Any) -> str | None:
    """``None`` (unset) for absent, ``null`` or ``""``: proto3 JSON cannot tell them apart."""
    if value is None or value == "":
        return None
    return _sized_text(value, "content", MAX_CONTENT_BYTES)


def description(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return _sized_text(value, "description", MAX_DESCRIPTION_BYTES)


def source_type(value: Any) -> str:
    """Omitted or UNSPECIFIED is stored as AGENT (the SDK's rollout flag, on)."""
    if value is None or value == "" or value == _SOURCE_UNSPECIFIED:
        return SOURCE_AGENT
    if value in (SOURCE_AGENT, SOURCE_DREAMER):
        return str(value)
    raise BadRequestError(
        f"source_type: expected {SOURCE_AGENT} or {SOURCE_DREAMER}, got {str(value)[:80]!r}"
    )


def full_view(value: Any) -> bool:
    """True unless ``view`` is BASIC (FULL is the default)."""
    if value is None or value in ("", VIEW_FULL, _VIEW_UNSPECIFIED):
        return True
    if value == VIEW_BASIC:
        return False
    raise BadRequestError(f"view: expected {VIEW_BASIC} or {VIEW_FULL}, got {str(value)[:80]!r}")


def page_size(value: Any, name: str = "page_size") -> int | None:
    """1 to ``MAX_PAGE_SIZE``; ``None`` for absent or 0 (proto3's unset). A query parameter
    arrives as text, a body field as a number (or a numeric string, as proto3 JSON allows):
    text must be ASCII digits (``http.query.decimal``)."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        number = decimal(value)
        if number is None:
            raise BadRequestError(
                f"{name}: expected an integer from 1 to {MAX_PAGE_SIZE}, got {value[:40]!r}"
            )
        value = number
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequestError(f"{name}: expected an integer, got {type_name(value)}")
    if value == 0:
        return None
    if not 1 <= value <= MAX_PAGE_SIZE:
        raise BadRequestError(f"{name}: must be from 1 to {MAX_PAGE_SIZE}, got {value}")
    return value


def effective_page_size(size: int | None) -> int:
    return DEFAULT_PAGE_SIZE if size is None else size


def update_mask(value: Any, allowed: tuple[str, ...]) -> list[str]:
    """The field names of an ``update_mask`` (comma-separated), each one of ``allowed``."""
    names = [] if value is None else [n.strip() for n in str(value).split(",") if n.strip()]
    if not names:
        raise BadRequestError(f"update_mask: required (one or more of {', '.join(allowed)})")
    for field in names:
        if field not in allowed:
            raise BadRequestError(
                f"update_mask: {field!r} cannot be updated (only {', '.join(allowed)})"
            )
    return list(dict.fromkeys(names))
