"""The error envelope of Databricks Agent Memory: ``{"error_code": C, "message": M}``.

Every answer under ``DATABRICKS_PREFIX`` (and ``/.well-known/databricks-config``) that is an
error takes this form, whoever refuses the request: the gatekeeper (401 ``UNAUTHENTICATED``),
a route, the router (unknown endpoint, wrong method) or an unexpected failure (500).
``status_and_code`` is the one table from ``memfs.contract.errors`` classes to the HTTP status and
the ``error_code`` databricks-sdk classifies by (``errors/platform.py``), most specific class first.

This module renders errors; it must not decide which error a request gets.
"""

from __future__ import annotations

import logging

from starlette.responses import JSONResponse

from memfs.contract.errors import (
    ApiError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    NotFoundError,
    OverloadedError,
    PermissionDeniedError,
    RateLimitError,
    RequestTimeoutError,
    RequestTooLargeError,
    ServiceUnavailableError,
)
from memfs.server.databricks.storage import AlreadyExistsError, ResourceExhaustedError
from memfs.server.http.envelope import answer_headers

log = logging.getLogger(__name__)

DATABRICKS_PREFIX = "/api/2.0/"
WELL_KNOWN_CONFIG = "/.well-known/databricks-config"

_TABLE: list[tuple[type[ApiError], int, str]] = [
    (AlreadyExistsError, 409, "ALREADY_EXISTS"),
    # 400, not 429: databricks-sdk would retry a 429 for minutes; a full store stays full.
    (ResourceExhaustedError, 400, "RESOURCE_EXHAUSTED"),
    (RequestTooLargeError, 400, "INVALID_PARAMETER_VALUE"),  # a size limit, as every other
    (BadRequestError, 400, "INVALID_PARAMETER_VALUE"),
    (AuthenticationError, 401, "UNAUTHENTICATED"),
    (PermissionDeniedError, 403, "PERMISSION_DENIED"),
    (NotFoundError, 404, "NOT_FOUND"),
    (RequestTimeoutError, 408, "DEADLINE_EXCEEDED"),  # the body came too slowly
    (ConflictError, 409, "ABORTED"),
    (RateLimitError, 429, "REQUEST_LIMIT_EXCEEDED"),
    (OverloadedError, 503, "UNAVAILABLE"),
    (ServiceUnavailableError, 503, "UNAVAILABLE"),  # the database is unreachable
]


def is_databricks_path(path: str) -> bool:
    return path.startswith(DATABRICKS_PREFIX) or path == WELL_KNOWN_CONFIG


def status_and_code(exc: ApiError) -> tuple[int, str]:
    for cls, status, code in _TABLE:
        if isinstance(exc, cls):
            return status, code
    return 500, "INTERNAL_ERROR"


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    body = {"error_code": code, "message": message}
    return JSONResponse(body, status_code=status, headers=headers)


def api_error_response(exc: ApiError) -> JSONResponse:
    status, code = status_and_code(exc)
    return error_response(status, code, exc.message, answer_headers(exc))
