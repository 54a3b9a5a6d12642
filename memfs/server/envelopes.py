"""Which envelope an error answer takes: the Databricks API's under its paths
(``memfs.server.databricks.envelope``), the Memory Stores one everywhere else
(``memfs.server.http.envelope``).

``error_response_for`` picks one by the request's path (``http.middleware.ApiMiddleware`` is
given it); ``EXCEPTION_HANDLERS`` are the Starlette handlers that render what a route raises:
an ``ApiError``, a routing error (404 unknown route, 405 with its ``Allow`` header), or anything
unexpected (a 500; ``ApiMiddleware`` logs its traceback).

This module renders errors; it must not decide which error a request gets.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Scope

from memfs.contract.errors import ApiError
from memfs.server.databricks import envelope as databricks_envelope
from memfs.server.http.envelope import api_error_response, error_body, request_id_of

log = logging.getLogger(__name__)


def error_response_for(scope: Scope, exc: ApiError, request_id: str) -> JSONResponse:
    """``exc`` in the envelope of the API the request's path belongs to."""
    if databricks_envelope.is_databricks_path(scope["path"]):
        return databricks_envelope.api_error_response(exc)
    return api_error_response(exc, request_id)


async def _on_api_error(request: Request, exc: Exception) -> Response:
    return error_response_for(request.scope, cast(ApiError, exc), request_id_of(request.scope))


async def _on_http_error(request: Request, exc: Exception) -> Response:
    http = cast(HTTPException, exc)
    rid = request_id_of(request.scope)
    where = f"{request.method} {request.url.path}"
    if databricks_envelope.is_databricks_path(request.url.path):
        status, code = http.status_code, "INVALID_PARAMETER_VALUE"
        message = str(http.detail)
        if status == 404:
            code, message = "NOT_FOUND", f"no such endpoint: {where}"
        elif status == 405:
            code, message = "METHOD_NOT_ALLOWED", f"method not allowed: {where}"
        response = databricks_envelope.error_response(status, code, message)
        response.headers.update(http.headers or {})
        return response
    if http.status_code == 404:
        body = error_body("not_found_error", f"no such endpoint: {where}", rid)
    elif http.status_code == 405:
        body = error_body("invalid_request_error", f"method not allowed: {where}", rid)
    else:
        body = error_body("invalid_request_error", str(http.detail), rid)
    return JSONResponse(body, status_code=http.status_code, headers=http.headers)


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    # ApiMiddleware logs the traceback (Starlette re-raises after this response).
    if databricks_envelope.is_databricks_path(request.url.path):
        return databricks_envelope.error_response(500, "INTERNAL_ERROR", "internal server error")
    return JSONResponse(
        error_body("api_error", "internal server error", request_id_of(request.scope)),
        status_code=500,
    )


EXCEPTION_HANDLERS: Mapping[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
    ApiError: _on_api_error,
    HTTPException: _on_http_error,
    Exception: _on_unexpected,
}
