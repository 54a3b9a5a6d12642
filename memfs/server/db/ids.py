"""Identifiers the server mints: object ids, request ids, and the public id of an API key.

Object ids are random and URL-safe (``memstore_…``, ``mem_…``, ``memver_…``). The id of an API
key (``apikey_…``) is a stable digest of the key, so versions can be attributed to a key without
ever storing or showing the key itself. This module must not log anything.
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
import string

log = logging.getLogger(__name__)

_ALPHABET = string.ascii_letters + string.digits
_RANDOM_LENGTH = 24  # ~143 bits
SESSION_ID_PATTERN = re.compile(r"^sesn_[A-Za-z0-9_-]{1,128}$")


def new_id(prefix: str) -> str:
    """A fresh random id such as ``mem_4fQ…``."""
    return prefix + "_" + "".join(secrets.choice(_ALPHABET) for _ in range(_RANDOM_LENGTH))


def new_store_id() -> str:
    return new_id("memstore")


def new_memory_id() -> str:
    return new_id("mem")


def new_version_id() -> str:
    return new_id("memver")


def new_request_id() -> str:
    return new_id("req")


def api_key_id(key: str) -> str:
    """The public, stable id of an API key: ``apikey_`` + 24 hex digits of its SHA-256."""
    return "apikey_" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]


def is_session_id(value: str) -> bool:
    return SESSION_ID_PATTERN.match(value) is not None
