"""The one exception hierarchy of memfs, and the errno table.

Everything memfs raises on purpose is a ``MemfsError``. API errors carry the HTTP status, the
error type of the wire envelope and the ``request_id``; filesystem errors carry only a meaning.
``errno_for`` is the single place where a meaning becomes an errno: the FUSE adapter calls it at
the boundary and nowhere else decides an errno.

This module must not import httpx, pyfuse3 or anything else from memfs.
"""

from __future__ import annotations

import errno
from typing import Any


class MemfsError(Exception):
    """Base of every error memfs raises on purpose."""


# ---------------------------------------------------------------------------------------------
# Errors of the Memory Stores API (raised by the client, produced by the server)


class ApiError(MemfsError):
    """The server answered with an error envelope."""

    status: int = 0
    error_type: str = "api_error"

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        error_type: str | None = None,
        request_id: str | None = None,
        body: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        # seconds the server asked us to wait before trying again (retry-after), if it did
        self.retry_after = retry_after
        if status is not None:
            self.status = status
        if error_type is not None:
            self.error_type = error_type
        self.request_id = request_id
        self.body = body or {}

    def __str__(self) -> str:
        suffix = f" (request_id {self.request_id})" if self.request_id else ""
        return f"{self.status} {self.error_type}: {self.message}{suffix}"


class BadRequestError(ApiError):
    status = 400
    error_type = "invalid_request_error"


class StoreFullError(BadRequestError):
    """A create was refused because the store already holds its maximum number of memories."""


class StoreArchivedError(BadRequestError):
    """A mutation was refused because the store is archived (read-only for ever)."""


class AuthenticationError(ApiError):
    status = 401
    error_type = "authentication_error"


class PermissionDeniedError(ApiError):
    status = 403
    error_type = "permission_error"


class NotFoundError(ApiError):
    status = 404
    error_type = "not_found_error"


class ConflictError(ApiError):
    status = 409
    error_type = "invalid_request_error"


class PreconditionFailedError(ConflictError):
    error_type = "memory_precondition_failed_error"


class PathConflictError(ConflictError):
    error_type = "memory_path_conflict_error"

    @property
    def conflicting_memory_id(self) -> str | None:
        value = self.body.get("error", {}).get("conflicting_memory_id")
        return value if isinstance(value, str) else None

    @property
    def conflicting_path(self) -> str | None:
        value = self.body.get("error", {}).get("conflicting_path")
        return value if isinstance(value, str) else None


class RequestTooLargeError(ApiError):
    status = 413
    error_type = "request_too_large"


class RequestTimeoutError(ApiError):
    """The request's body did not arrive in time (the server's 408; the request's own fault)."""

    status = 408
    error_type = "invalid_request_error"


class RateLimitError(ApiError):
    status = 429
    error_type = "rate_limit_error"


class InternalServerError(ApiError):
    status = 500
    error_type = "api_error"


class OverloadedError(ApiError):
    status = 529
    error_type = "overloaded_error"


class ServiceUnavailableError(ApiError):
    """The server cannot answer now (its database is unreachable): 503, with ``retry-after``."""

    status = 503
    error_type = "api_error"


class ApiConnectionError(MemfsError):
    """The server could not be reached, or the connection broke before an answer came."""


class ApiTimeoutError(ApiConnectionError):
    """No answer within the deadline."""


# Messages the server uses for the two memory-specific 400s, so the client can tell them apart
# from other invalid requests. The wire type stays `invalid_request_error` as on the hosted API.
STORE_FULL_MESSAGE = "Memory store is full"
STORE_ARCHIVED_MESSAGE = "Memory store is archived"

_BY_TYPE: dict[str, type[ApiError]] = {
    "authentication_error": AuthenticationError,
    "permission_error": PermissionDeniedError,
    "not_found_error": NotFoundError,
    "request_too_large": RequestTooLargeError,
    "rate_limit_error": RateLimitError,
    "api_error": InternalServerError,
    "overloaded_error": OverloadedError,
    "memory_precondition_failed_error": PreconditionFailedError,
    "memory_path_conflict_error": PathConflictError,
}
_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: RequestTooLargeError,
    429: RateLimitError,
    529: OverloadedError,
}


def api_error_class(status: int, error_type: str | None, message: str) -> type[ApiError]:
    """The most specific ApiError subclass for a status, wire error type and message."""
    if error_type == "invalid_request_error" and status == 400:
        if message.startswith(STORE_FULL_MESSAGE):
            return StoreFullError
        if message.startswith(STORE_ARCHIVED_MESSAGE):
            return StoreArchivedError
        return BadRequestError
    if error_type in _BY_TYPE:
        return _BY_TYPE[error_type]
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    if status >= 500:
        return InternalServerError
    return ApiError


# ---------------------------------------------------------------------------------------------
# Filesystem meanings (raised by the filesystem core, mapped to errnos at the FUSE boundary)


class FsError(MemfsError):
    """A filesystem operation cannot be done; the subclass says why."""


class NoEntryError(FsError):
    pass


class ExistsError(FsError):
    pass


class NotDirectoryError(FsError):
    pass


class IsDirectoryError(FsError):
    pass


class DirectoryNotEmptyError(FsError):
    pass


class InvalidNameError(FsError):
    pass


class NameTooLongError(InvalidNameError):
    pass


class ReadOnlyError(FsError):
    pass


class FileTooLargeError(FsError):
    pass


class NoSpaceError(FsError):
    pass


class NotUtf8Error(FsError):
    pass


class RemoteConflictError(FsError):
    """The memory changed underneath a local edit; the local content was kept (see docs)."""


class AccessDeniedError(FsError):
    pass


class NotPermittedError(FsError):
    pass


class NotSupportedError(FsError):
    pass


class InvalidArgumentError(FsError):
    pass


class NoAttributeError(FsError):
    """The file has no such extended attribute."""


class AttributeNotSupportedError(FsError):
    """The mount does not keep that extended attribute (on that file)."""


class AttributeTooLargeError(FsError):
    """An extended attribute's value is longer than the store keeps."""


class CrossDeviceError(FsError):
    """A rename or hard link between two stores of a mount, or a store and local scratch."""


class BusyError(FsError):
    """A store's directory at the root of a mount of several: never removed or renamed."""


class StoreGoneError(FsError):
    """The mounted store was deleted: nothing can be uploaded or changed any more."""


class RemoteUnavailableError(FsError):
    pass


# Most specific class first: the first match wins.
ERRNO: list[tuple[type[MemfsError], int]] = [
    (NameTooLongError, errno.ENAMETOOLONG),
    (InvalidNameError, errno.EINVAL),
    (NoEntryError, errno.ENOENT),
    (ExistsError, errno.EEXIST),
    (NotDirectoryError, errno.ENOTDIR),
    (IsDirectoryError, errno.EISDIR),
    (DirectoryNotEmptyError, errno.ENOTEMPTY),
    (ReadOnlyError, errno.EROFS),
    (FileTooLargeError, errno.EFBIG),
    (NoSpaceError, errno.ENOSPC),
    (NotUtf8Error, errno.EILSEQ),
    (RemoteConflictError, errno.ESTALE),
    (AccessDeniedError, errno.EACCES),
    (NotPermittedError, errno.EPERM),
    (CrossDeviceError, errno.EXDEV),
    (BusyError, errno.EBUSY),
    (NotSupportedError, errno.ENOSYS),
    (InvalidArgumentError, errno.EINVAL),
    (NoAttributeError, errno.ENODATA),
    (AttributeNotSupportedError, errno.ENOTSUP),
    (AttributeTooLargeError, errno.E2BIG),
    (RemoteUnavailableError, errno.EIO),
    (StoreGoneError, errno.ENODEV),
    # API errors that reach the filesystem boundary untranslated
    (StoreFullError, errno.ENOSPC),
    (StoreArchivedError, errno.EROFS),
    (PreconditionFailedError, errno.ESTALE),
    (PathConflictError, errno.EEXIST),
    (NotFoundError, errno.ENOENT),
    (AuthenticationError, errno.EACCES),
    (PermissionDeniedError, errno.EACCES),
    (RequestTooLargeError, errno.EFBIG),
    (BadRequestError, errno.EINVAL),
    (ApiConnectionError, errno.EIO),
    (MemfsError, errno.EIO),
]


def errno_for(exc: BaseException) -> int:
    """The errno a filesystem caller sees for ``exc``; anything unexpected is EIO."""
    for cls, number in ERRNO:
        if isinstance(exc, cls):
            return number
    return errno.EIO
