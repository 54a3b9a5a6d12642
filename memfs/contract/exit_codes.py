"""The exit status of every ``memfs`` command: one code per kind of fault, whichever command
meets it (``memfs mount`` and ``memfs stores list`` exit 5 for a refused key alike).

README's "Exit codes" table is this table in words; a command's ``--help`` may add what a code
means for it (``umount``: which files are open) but never gives a kind another code.
"""

from __future__ import annotations

from memfs.contract.errors import (
    ApiConnectionError,
    AuthenticationError,
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
)

EXIT_OK = 0
EXIT_ERROR = 1  # any other failure; for mount, sync, session, umount: not uploaded as meant
# not a fault: `memories diff --exit-code` found the versions different (git diff's 1), silently
EXIT_DIFFERENT = 1
EXIT_USAGE = 2  # bad arguments, a missing extra, no key or an unusable one (before any request)
EXIT_NOT_FOUND = 3  # no such store, memory or version
EXIT_CONFLICT = 4  # a path already taken, a precondition failed
EXIT_AUTH = 5  # the server refused the key (401) or what it may do (403)
EXIT_UNREACHABLE = 6  # the server could not be reached (refused, broken, timed out)
EXIT_BUSY = 7  # umount: files under the mount are open for writing; nothing was done


def exit_code_for(exc: BaseException) -> int:
    """The exit status of a command that ended on ``exc`` (an API error, or anything else)."""
    if isinstance(exc, NotFoundError):
        return EXIT_NOT_FOUND
    if isinstance(exc, ConflictError):
        return EXIT_CONFLICT
    if isinstance(exc, AuthenticationError | PermissionDeniedError):
        return EXIT_AUTH
    if isinstance(exc, ApiConnectionError):
        return EXIT_UNREACHABLE
    return EXIT_ERROR
