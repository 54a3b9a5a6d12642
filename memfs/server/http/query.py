"""Query parameters and pages: how the reference server reads a URL's query and shapes a listing.

Each ``query_*`` reads one parameter (``query_one``), treats an absent or empty one as "not
given", and refuses a bad one with a 400 ``BadRequestError`` that names it. A parameter given
twice is such a 400, whatever it is: Starlette's ``query_params.get`` answers the last one, so
``?read_only=true&read_only=false`` would undo a scope that a wrapper appended to a URL (or put
first); no reader may pick one. An integer is written in ASCII digits
(``decimal``): ``int()`` would also take ``1_0``, ``+5``, `` 5 `` and other scripts' digits
(``١٠``), which no client means. The parameters: ``limit`` (1 to ``MAX_LIMIT``, default
``DEFAULT_LIMIT``, and silently at most ``MAX_FULL_VIEW_LIMIT`` with ``view=full``), ``view``
(``basic`` or ``full``), booleans, RFC 3339 times, a listing's ``path_prefix`` (ends in ``/``)
and ``depth`` (0 or 1), and a version listing's ``operation``.

Pages: ``page_position`` decodes the ``page`` cursor of a listing (``memfs.server.http.cursor``: it
must come from the same listing and filters, else 400) into the position the route gives to
storage; ``listing`` renders ``{"data": […], "next_page": …}``. This module is pure: it must not
touch storage.
"""

from __future__ import annotations

import logging
import re
from typing import Any, cast

from starlette.requests import Request
from starlette.responses import JSONResponse

from memfs.contract import paths
from memfs.contract.errors import BadRequestError
from memfs.contract.models import Operation, parse_time
from memfs.server.http import cursor
from memfs.server.http.body import text_field

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
MAX_FULL_VIEW_LIMIT = 20
_DECIMAL = re.compile(r"-?[0-9]{1,18}")  # fits in 64 bits, a PostgreSQL BIGINT


def decimal(text: str) -> int | None:
    """The integer ``text`` writes in ASCII digits (with an optional ``-``), else None."""
    return int(text) if _DECIMAL.fullmatch(text) else None


def query_one(request: Request, name: str) -> str | None:
    """The value of ``name`` in the query (None if absent); given more than once: 400."""
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise BadRequestError(f"{name}: given {len(values)} times; send it once")
    return values[0] if values else None


def query_limit(request: Request, *, full: bool = False) -> int:
    raw = query_one(request, "limit")
    if raw is None or raw == "":
        limit = DEFAULT_LIMIT
    else:
        number = decimal(raw)
        if number is None:
            raise BadRequestError(f"limit: expected an integer from 1 to {MAX_LIMIT}")
        limit = number
        if not 1 <= limit <= MAX_LIMIT:
            raise BadRequestError(f"limit: must be from 1 to {MAX_LIMIT}, got {limit}")
    return min(limit, MAX_FULL_VIEW_LIMIT) if full else limit


def query_view(request: Request, default: str) -> bool:
    """True for ``view=full``."""
    view = query_one(request, "view") or default
    if view not in ("basic", "full"):
        raise BadRequestError(f"view: expected 'basic' or 'full', got {view!r}")
    return view == "full"


def query_bool(request: Request, name: str) -> bool:
    raw = query_one(request, name)
    if raw is None or raw == "":
        return False
    lowered = raw.lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise BadRequestError(f"{name}: expected true or false, got {raw!r}")


def query_time(request: Request, name: str) -> Any:
    raw = query_one(request, name)
    if raw is None or raw == "":
        return None
    try:
        return parse_time(raw)
    except (ValueError, OverflowError):
        raise BadRequestError(f"{name}: expected an RFC 3339 timestamp, got {raw!r}") from None


def query_text(request: Request, name: str) -> str | None:
    raw = query_one(request, name)
    return None if raw is None or raw == "" else raw


def query_path_prefix(request: Request) -> str:
    """A memory listing's ``path_prefix``: ``/`` when not given, else whole segments."""
    prefix = query_text(request, "path_prefix")
    if prefix is None:
        return "/"
    text_field(prefix, "path_prefix")
    if not prefix.endswith("/"):
        raise BadRequestError("path_prefix: must end with '/' (it matches whole segments)")
    try:
        paths.validate_prefix(prefix)
    except paths.PathError as exc:
        raise BadRequestError(f"path_prefix: {exc}") from None
    return prefix


def query_depth(request: Request) -> int:
    """A memory listing's ``depth``: 0 (the whole subtree, the default) or 1 (children only)."""
    raw_depth = query_text(request, "depth")
    if raw_depth is None or raw_depth == "0":
        return 0
    if raw_depth == "1":
        return 1
    raise BadRequestError(
        f"depth: expected 0 (whole subtree) or 1 (children only), got {raw_depth!r}"
    )


def query_operation(request: Request) -> Operation | None:
    """A version listing's ``operation`` filter."""
    operation = query_text(request, "operation")
    if operation is not None and operation not in ("created", "modified", "deleted"):
        raise BadRequestError(
            f"operation: expected 'created', 'modified' or 'deleted', got {operation!r}"
        )
    return cast("Operation | None", operation)


def page_position(request: Request, kind: str, query: str) -> dict[str, Any] | None:
    raw = query_one(request, "page")
    if raw is None or raw == "":
        return None
    try:
        return cursor.decode(raw, kind, query)
    except cursor.CursorError as exc:
        raise BadRequestError(str(exc)) from None


def bad_cursor() -> BadRequestError:
    return BadRequestError("page: not a valid page cursor")


def listing(data: list[dict[str, Any]], next_page: str | None) -> JSONResponse:
    return JSONResponse({"data": data, "next_page": next_page})
