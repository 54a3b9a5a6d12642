"""The errno table covers every error class, and API errors are classified precisely."""

from __future__ import annotations

import errno

import pytest

from memfs.contract import errors


def _all_subclasses(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found.add(sub)
        found |= _all_subclasses(sub)
    return found


def test_every_error_class_has_an_explicit_errno() -> None:
    listed = {cls for cls, _ in errors.ERRNO}
    unlisted = []
    for cls in _all_subclasses(errors.FsError):
        if cls not in listed:
            unlisted.append(cls.__name__)
    assert not unlisted, f"add to errors.ERRNO: {unlisted}"


def test_table_is_ordered_most_specific_first() -> None:
    seen: list[type] = []
    for cls, _ in errors.ERRNO:
        for earlier in seen:
            assert not issubclass(cls, earlier), f"{cls.__name__} is shadowed by {earlier.__name__}"
        seen.append(cls)


@pytest.mark.parametrize(
    ("exc", "number"),
    [
        (errors.NameTooLongError(), errno.ENAMETOOLONG),
        (errors.InvalidNameError(), errno.EINVAL),
        (errors.ReadOnlyError(), errno.EROFS),
        (errors.StoreArchivedError("archived"), errno.EROFS),
        (errors.StoreFullError("full"), errno.ENOSPC),
        (errors.FileTooLargeError(), errno.EFBIG),
        (errors.NotUtf8Error(), errno.EILSEQ),
        (errors.PreconditionFailedError("x"), errno.ESTALE),
        (errors.NotFoundError("x"), errno.ENOENT),
        (errors.AuthenticationError("x"), errno.EACCES),
        (errors.ApiConnectionError("down"), errno.EIO),
        (errors.ApiTimeoutError("slow"), errno.EIO),
        (RuntimeError("bug"), errno.EIO),
    ],
)
def test_errno_for(exc: BaseException, number: int) -> None:
    assert errors.errno_for(exc) == number


@pytest.mark.parametrize(
    ("status", "error_type", "message", "expected"),
    [
        (400, "invalid_request_error", "bad path", errors.BadRequestError),
        (400, "invalid_request_error", errors.STORE_FULL_MESSAGE + ": 2000", errors.StoreFullError),
        (400, "invalid_request_error", errors.STORE_ARCHIVED_MESSAGE, errors.StoreArchivedError),
        (401, "authentication_error", "", errors.AuthenticationError),
        (404, "not_found_error", "", errors.NotFoundError),
        (409, "memory_precondition_failed_error", "", errors.PreconditionFailedError),
        (409, "memory_path_conflict_error", "", errors.PathConflictError),
        (409, "invalid_request_error", "", errors.ConflictError),
        (413, "request_too_large", "", errors.RequestTooLargeError),
        (429, "rate_limit_error", "", errors.RateLimitError),
        (529, "overloaded_error", "", errors.OverloadedError),
        (502, None, "", errors.InternalServerError),
    ],
)
def test_api_error_class(
    status: int, error_type: str | None, message: str, expected: type[errors.ApiError]
) -> None:
    assert errors.api_error_class(status, error_type, message) is expected


def test_api_error_carries_request_id_and_conflict_details() -> None:
    body = {
        "type": "error",
        "error": {
            "type": "memory_path_conflict_error",
            "message": "occupied",
            "conflicting_memory_id": "mem_1",
            "conflicting_path": "/a",
        },
        "request_id": "req_1",
    }
    exc = errors.PathConflictError("occupied", request_id="req_1", body=body)
    assert exc.status == 409
    assert exc.conflicting_memory_id == "mem_1"
    assert exc.conflicting_path == "/a"
    assert "req_1" in str(exc)
