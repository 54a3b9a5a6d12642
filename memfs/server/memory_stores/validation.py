"""The Memory Stores API's request bodies: every rule a field must meet that needs no stored state.

A body is read by ``memfs.server.http.body`` (bounded, strict JSON, an object, no unknown
field; ``text_field``: valid Unicode, no NUL). Each field then goes through its checker here:
``memory_path`` (``memfs.contract.paths`` rules), ``memory_content`` (at most
``MAX_CONTENT_BYTES`` UTF-8 bytes, else 413; a content may hold NUL), ``sha256_field`` and
``precondition_sha256``, the store's ``store_name``, ``store_description`` and metadata
(``store_metadata`` on create, ``metadata_patch`` on update).

Every refusal is a ``BadRequestError`` (400) or ``RequestTooLargeError`` (413) whose message
names the field. Rules that depend on stored state (existence, archived stores, free paths, the
memory limit, preconditions, the metadata count after a patch) are the storage's. This module is
pure: it must not touch storage.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from typing import Any

from memfs.contract import paths
from memfs.contract.errors import BadRequestError, RequestTooLargeError
from memfs.server.http.body import check_fields, text_field, type_name
from memfs.server.memory_stores.storage import MAX_METADATA_PAIRS, MetadataPatch

log = logging.getLogger(__name__)

MAX_CONTENT_BYTES = 102_400
MAX_NAME_CHARS = 255
MAX_DESCRIPTION_CHARS = 1024
MAX_METADATA_KEY_CHARS = 64
MAX_METADATA_VALUE_CHARS = 512
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


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
