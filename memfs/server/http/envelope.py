"""The error envelope of the reference server: how every error answer looks.

``{"type": "error", "error": {"type": T, "message": M, …}, "request_id": R}``. ``error_body``
builds it, ``api_error_response`` renders a ``memfs.contract.errors.ApiError`` with its status
(extra fields of ``ApiError.body["error"]``, such as a path conflict's ``conflicting_memory_id``,
are kept; an error that asks the client to wait, a 429 or 503, carries ``retry-after``:
``answer_headers``, which the Databricks envelope uses too). It is the envelope of every path
but the Databricks API's (``memfs.server.databricks.envelope``); ``memfs.server.envelopes``
picks one by the request's path.

This module renders errors; it must not decide which error a request gets.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import Scope

from memfs.contract.errors import ApiError

log = logging.getLogger(__name__)


def error_body(
    error_type: str, message: str, request_id: str, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    error: dict[str, Any] = {"type": error_type, "message": message}
    error.update(extra or {})
    return {"type": "error", "error": error, "request_id": request_id}


def api_error_response(exc: ApiError, request_id: str) -> JSONResponse:
    extra = {}
    details = exc.body.get("error") if isinstance(exc.body, dict) else None
    if isinstance(details, dict):
        extra = {k: v for k, v in details.items() if k not in ("type", "message")}
    return JSONResponse(
        error_body(exc.error_type, exc.message, request_id, extra),
        status_code=exc.status,
        headers=answer_headers(exc),
    )


def request_id_of(scope: Scope) -> str:
    """The id ``ApiMiddleware`` gave this request ("" before it did)."""
    return str(scope.get("state", {}).get("request_id", ""))


def answer_headers(exc: ApiError) -> dict[str, str]:
    """The headers an error answer carries in either envelope: ``retry-after`` (whole seconds,
    what databricks-sdk reads) when the error asks the client to wait."""
    if exc.retry_after is None:
        return {}
    return {"retry-after": str(max(1, math.ceil(exc.retry_after)))}
