"""Validation of request bodies: every rule a body must meet that needs no stored state.

A body is read by ``read_json_object``: at most ``MAX_BODY_BYTES`` (else 413; a larger declared
``content-length`` is refused before reading), decoded strictly by ``json_body``, and it must be
a JSON object. ``check_fields`` refuses an unknown field by name, as the hosted API does. Each
field then goes through its checker: ``text_field`` (a string of valid Unicode without a NUL,
which every other checker of a string starts with; a Memory Stores content may hold NUL),
``memory_path`` (``memfs.contract.paths`` rules), ``memory_content`` (at most ``MAX_CONTENT_BYTES``
UTF-8 bytes, else 413), ``sha256_field`` and ``precondition_sha256``, the store's ``store_name``,
``store_description`` and metadata (``store_metadata`` on create, ``metadata_patch`` on update).

Every refusal is a ``BadRequestError`` (400) or ``RequestTooLargeError`` (413) whose message
names the field. Rules that depend on stored state (existence, archived stores, free paths, the
memory limit, preconditions, the metadata count after a patch) are the storage's. This module is
pure: it must not touch storage.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from starlette.requests import Request

from memfs.contract import paths
from memfs.contract.errors import BadRequestError, RequestTooLargeError
from memfs.server import json_body
from memfs.server.storage import MAX_METADATA_PAIRS, MetadataPatch

log = logging.getLogger(__name__)

MAX_CONTENT_BYTES = 102_400
MAX_BODY_BYTES = 1024 * 1024  # a full-size content with every character \u-escaped fits
MAX_NAME_CHARS = 255
MAX_DESCRIPTION_CHARS = 1024
MAX_METADATA_KEY_CHARS = 64
MAX_METADATA_VALUE_CHARS = 512
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


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
    PostgreSQL: ``sql.rows``).

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


def memory_path(value: Any, name: str = "path") -> str:
    path = text_field(value, name)
    try:
        return paths.validate_path(path)
    except paths.PathError as exc:
        raise BadRequestError(f"{name}: {exc}") from None


def memory_content(value: Any) -> str:
    content = text_field(value, "content", nul=True)
    size = len(content.encode("utf-8"))
    if size > MAX_CONTENT_BYTES:
        raise RequestTooLargeError(
            f"content: {size} bytes is more than the maximum of {MAX_CONTENT_BYTES} bytes"
        )
    return content


def sha256_field(value: Any, name: str) -> str:
    text = text_field(value, name)
    if not _SHA256.match(text):
        raise BadRequestError(f"{name}: expected 64 lowercase hexadecimal characters")
    return text


def precondition_sha256(precondition: Any) -> str:
    """The hash an update's ``precondition`` object expects (``type: content_sha256``)."""
    if not isinstance(precondition, dict):
        raise BadRequestError(f"precondition: expected an object, got {type_name(precondition)}")
    check_fields(precondition, ("type", "content_sha256"), where="precondition")
    if precondition.get("type") != "content_sha256":
        raise BadRequestError("precondition.type: the only supported type is 'content_sha256'")
    if "content_sha256" not in precondition:
        raise BadRequestError("precondition.content_sha256: required")
    return sha256_field(precondition["content_sha256"], "precondition.content_sha256")


def store_name(value: Any) -> str:
    name = text_field(value, "name")
    if not 1 <= len(name) <= MAX_NAME_CHARS:
        raise BadRequestError(f"name: must be 1 to {MAX_NAME_CHARS} characters long")
    if any(unicodedata.category(ch) == "Cc" for ch in name):
        raise BadRequestError("name: must not contain control characters")
    return name


def store_description(value: Any) -> str:
    description = text_field(value, "description")
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise BadRequestError(
            f"description: must be at most {MAX_DESCRIPTION_CHARS} characters long"
        )
    return description


def metadata_key(key: str) -> str:
    text_field(key, "metadata key")
    if not 1 <= len(key) <= MAX_METADATA_KEY_CHARS:
        raise BadRequestError(
            f"metadata: keys must be 1 to {MAX_METADATA_KEY_CHARS} characters long"
        )
    return key


def metadata_value(value: Any, key: str) -> str:
    text = text_field(value, f"metadata[{key!r}]")
    if len(text) > MAX_METADATA_VALUE_CHARS:
        raise BadRequestError(
            f"metadata[{key!r}]: values must be at most {MAX_METADATA_VALUE_CHARS} characters"
        )
    return text


def store_metadata(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise BadRequestError(f"metadata: expected an object, got {type_name(value)}")
    if len(value) > MAX_METADATA_PAIRS:
        raise BadRequestError(f"metadata: at most {MAX_METADATA_PAIRS} key-value pairs")
    return {metadata_key(k): metadata_value(v, k) for k, v in value.items()}


def metadata_patch(value: Any) -> MetadataPatch:
    if not isinstance(value, dict):
        raise BadRequestError(f"metadata: expected an object, got {type_name(value)}")
    changes: dict[str, str | None] = {}
    for key, item in value.items():
        changes[metadata_key(key)] = None if item is None else metadata_value(item, key)
    return MetadataPatch(changes)
