"""Strict decoding of JSON request bodies, with errors in API terms.

``decode(raw)`` turns the bytes of a request body into a JSON value or raises
``BadRequestError`` whose message says what is wrong with the body, never which Python limit or
codec tripped. Stricter than ``json.loads`` where the standard (RFC 8259) leaves room for
surprises:
- the body must be UTF-8 without a byte order mark;
- ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON and are refused;
- a number must fit: integers of at most ``MAX_INTEGER_DIGITS`` digits, floats that stay finite
  (``1e999`` would otherwise become infinity);
- an object must not name a field twice (``json.loads`` would silently keep the last one);
- nesting deeper than the parser's recursion limit is refused.

This module must not know about HTTP frameworks or routes.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from memfs.contract.errors import BadRequestError

log = logging.getLogger(__name__)

# No field of the API is a number this long; the bound keeps parsing cheap (CPython's int()
# refuses more than 4,300 digits with a message about its own limit).
MAX_INTEGER_DIGITS = 100
_PREFIX = "request body is not valid JSON"


class _RefusedError(Exception):
    """Raised by the decoder hooks; its message is the reason, in API terms."""


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise _RefusedError(f"integer too large (more than {MAX_INTEGER_DIGITS} digits)")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _RefusedError(f"number out of range: {text[:20]}")
    return value


def _constant(name: str) -> Any:
    raise _RefusedError(f"{name} is not a JSON value")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _RefusedError(f"field {key!r} appears more than once in an object")
        result[key] = value
    return result


def decode(raw: bytes) -> Any:
    """The JSON value of ``raw``; ``BadRequestError`` naming what is wrong (module docstring)."""
    if raw.startswith(b"\xef\xbb\xbf"):
        raise BadRequestError(f"{_PREFIX}: it starts with a byte order mark (U+FEFF)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequestError(
            f"request body is not valid UTF-8 (invalid byte at offset {exc.start})"
        ) from None
    try:
        return json.loads(
            text,
            parse_int=_integer,
            parse_float=_float,
            parse_constant=_constant,
            object_pairs_hook=_object,
        )
    except _RefusedError as exc:
        raise BadRequestError(f"{_PREFIX}: {exc}") from None
    except json.JSONDecodeError as exc:
        reason = exc.msg[:1].lower() + exc.msg[1:].removesuffix(" at")
        raise BadRequestError(
            f"{_PREFIX}: {reason} at line {exc.lineno}, column {exc.colno}"
        ) from None
    except RecursionError:
        raise BadRequestError(f"{_PREFIX}: nested too deeply") from None
    except ValueError:  # none known; its text would be Python's, not the API's
        log.warning("unexpected JSON decoding error", exc_info=True)
        raise BadRequestError(_PREFIX) from None


__all__ = ["MAX_INTEGER_DIGITS", "decode"]
