"""A request's body: read within a bound, decoded strictly, and the checks every field starts with.

``read_json_object`` reads at most ``MAX_BODY_BYTES`` (else 413; a larger declared
``content-length`` is refused before reading: ``read_body``), decodes it strictly
(``json_body``) and wants a JSON object. ``check_fields`` refuses an unknown field by name, as
the hosted APIs do; ``text_field`` is the check every string field starts with (valid Unicode,
no NUL unless allowed), ``type_name`` names a JSON type for messages. Each API's own field rules
are its ``validation`` module's. Every refusal is a ``BadRequestError`` (400) or
``RequestTooLargeError`` (413) whose message names the field.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from starlette.requests import Request

from memfs.contract.errors import BadRequestError, RequestTooLargeError
from memfs.server.http import json_body

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024  # a full-size content with every character \u-escaped fits


async def read_body(request: Request, max_bytes: int, what: str = "request body") -> bytes:
    """The request body, refused (413) past ``max_bytes``: a larger declared
    ``content-length`` before reading, a longer stream as soon as it is longer."""
    too_large = f"{what} is larger than {max_bytes} bytes"
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise RequestTooLargeError(too_large)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise RequestTooLargeError(too_large)
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json_object(request: Request, *, allow_empty: bool = False) -> dict[str, Any]:
    """The request body as a JSON object; 413 past MAX_BODY_BYTES, 400 if it is not one."""
    raw = await read_body(request, MAX_BODY_BYTES)
    if not raw.strip():
        if allow_empty:
            return {}
        raise BadRequestError("request body must be a JSON object")
    data = json_body.decode(raw)
    if not isinstance(data, dict):
        raise BadRequestError("request body must be a JSON object")
    return data


def check_fields(body: Mapping[str, Any], allowed: Sequence[str], *, where: str = "") -> None:
    for key in body:
        if key not in allowed:
            location = f" in {where}" if where else ""
            expected = ", ".join(allowed) if allowed else "none"
            raise BadRequestError(f"unknown field {key!r}{location} (expected: {expected})")


def type_name(value: Any) -> str:
    """The JSON name of ``value``'s type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "string"


def text_field(value: Any, name: str, *, nul: bool = False) -> str:
    """``value`` as a string that is valid Unicode (no lone surrogates), without a NUL unless
    ``nul`` (a Memory Stores content: the API allows it, and the backends store it, escaped on
    PostgreSQL: ``memory_stores.sql.rows``).

    The one check of every string a body carries, on both APIs: PostgreSQL ``text`` cannot
    hold U+0000 while SQLite can, so refusing it here keeps the backends alike (a 400, never a
    500 that a client retries for ever, nor a value one backend stores and the other cannot)."""
    if not isinstance(value, str):
        raise BadRequestError(f"{name}: expected a string, got {type_name(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequestError(f"{name}: not valid Unicode (contains a lone surrogate)") from None
    if not nul and "\x00" in value:
        raise BadRequestError(f"{name}: must not contain NUL characters (U+0000)")
    return value
