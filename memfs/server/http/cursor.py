"""Opaque page cursors: ``page_`` + base64url(check + JSON position).

A cursor names a position in one listing (the kind of list, the store, and a digest of the
query's filters) so that it cannot silently be reused with other filters. The 8-byte check is a
truncated SHA-256 of the payload: it detects tampering and corruption (it is not a secret; a
forged position would be harmless anyway). Anything that does not decode is ``CursorError``,
which the HTTP layer answers with 400. Because a client can forge one, a position's values are
held to what the database takes on both backends (``_storable``): no string with a NUL or a lone
surrogate (PostgreSQL ``text`` refuses the one, both drivers the other) and no integer outside
64 bits (SQLite's limit); else a forged cursor was a 500 on one backend or both.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
from typing import Any

log = logging.getLogger(__name__)

PREFIX = "page_"
_CHECK_BYTES = 8
MAX_CURSOR_LENGTH = 4096


class CursorError(ValueError):
    """A page cursor is malformed, tampered with, or belongs to another query."""


_INT64 = range(-(2**63), 2**63)


def _storable(value: Any) -> bool:
    """Whether both backends can take ``value`` as a query parameter (module docstring)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")  # a lone surrogate does not encode
        except UnicodeEncodeError:
            return False
        return "\x00" not in value
    if isinstance(value, int) and not isinstance(value, bool):
        return value in _INT64
    return True


def query_digest(*parts: object) -> str:
    """A short digest of a listing's filters, stored in its cursors."""
    text = json.dumps([str(p) if p is not None else None for p in parts], ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _check(payload: bytes) -> bytes:
    return hashlib.sha256(b"memfs-cursor\0" + payload).digest()[:_CHECK_BYTES]


def encode(kind: str, query: str, position: dict[str, Any]) -> str:
    payload = json.dumps(
        {"k": kind, "q": query, "p": position}, separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8")
    token = base64.urlsafe_b64encode(_check(payload) + payload).rstrip(b"=").decode("ascii")
    return PREFIX + token


def decode(cursor: str, kind: str, query: str) -> dict[str, Any]:
    """The position stored in ``cursor``; CursorError unless it is intact and for this query."""
    if not cursor.startswith(PREFIX) or len(cursor) > MAX_CURSOR_LENGTH:
        raise CursorError("page: not a valid page cursor")
    token = cursor[len(PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):
        raise CursorError("page: not a valid page cursor") from None
    check, payload = raw[:_CHECK_BYTES], raw[_CHECK_BYTES:]
    if len(check) != _CHECK_BYTES or _check(payload) != check:
        raise CursorError("page: not a valid page cursor")
    try:
        data = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise CursorError("page: not a valid page cursor") from None
    if not isinstance(data, dict) or not isinstance(data.get("p"), dict):
        raise CursorError("page: not a valid page cursor")
    if data.get("k") != kind or data.get("q") != query:
        raise CursorError("page: this cursor belongs to a different listing or filters")
    position: dict[str, Any] = data["p"]
    if not all(_storable(value) for value in position.values()):
        raise CursorError("page: not a valid page cursor")
    return position
