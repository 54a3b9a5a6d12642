"""The Memory Stores search extension: ``POST /v1/memory_stores/{store_id}/memfs/search``.

Body ``{"query": str, "limit": int 1-100 (default 10), "path_prefix": str (optional)}``;
answer ``{"type": "memfs_search_results", "data": [{"memory": <memory with content>,
"score": float}, ...]}``, best first (higher = more relevant). ``GET /v1/memfs/capabilities``
announces it (``search``, ``search_path``). The ranking is ``memfs.server.search``'s.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from memfs.contract import paths
from memfs.contract.errors import BadRequestError
from memfs.server.http.body import check_fields, read_json_object, text_field, type_name
from memfs.server.memory_stores.storage import MemoryStoresStorage
from memfs.server.search import validate_query

log = logging.getLogger(__name__)

DEFAULT_LIMIT, MAX_LIMIT = 10, 100
MAX_PREFIX_CHARS = 1024


def search_limit(value: Any) -> int:
    if value is None:
        return DEFAULT_LIMIT
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequestError(f"limit: expected an integer, got {type_name(value)}")
    if not 1 <= value <= MAX_LIMIT:
        raise BadRequestError(f"limit: must be between 1 and {MAX_LIMIT}, got {value}")
    return value


def search_prefix(value: Any) -> str | None:
    """A raw prefix of paths (``/notes/co`` matches ``/notes/coffee.md``), or None. It obeys the
    rules of a listing's prefix (``memfs.contract.paths``: no NUL or other control character, no
    empty, ``.`` or ``..`` segment, NFC), with the same 400s, except that it may end inside a
    name."""
    if value is None:
        return None
    prefix = text_field(value, "path_prefix")
    if not prefix.startswith("/"):
        raise BadRequestError("path_prefix: must start with '/'")
    if len(prefix) > MAX_PREFIX_CHARS:
        raise BadRequestError(f"path_prefix: at most {MAX_PREFIX_CHARS} characters")
    whole, _, partial = prefix.rpartition("/")
    try:
        paths.validate_prefix(whole + "/")  # the whole segments, as a listing's
        if partial not in ("", ".", ".."):  # the start of a name ("/notes/." finds ".bashrc")
            paths.check_segment(partial)
    except paths.PathError as exc:
        raise BadRequestError(f"path_prefix: {exc}") from None
    return prefix


@dataclass(frozen=True)
class SearchRoutes:
    """The search endpoint, bound to one ``MemoryStoresStorage``."""

    storage: MemoryStoresStorage

    async def search(self, request: Request) -> Response:
        body = await read_json_object(request)
        check_fields(body, ("query", "limit", "path_prefix"))
        if "query" not in body:
            raise BadRequestError("query: required")
        query = validate_query(body["query"])
        limit = search_limit(body.get("limit"))
        prefix = search_prefix(body.get("path_prefix"))
        hits = await self.storage.search_memories(
            request.path_params["store_id"], query, limit=limit, path_prefix=prefix
        )
        data = [{"memory": memory.to_json(full=True), "score": score} for memory, score in hits]
        return JSONResponse({"type": "memfs_search_results", "data": data})
