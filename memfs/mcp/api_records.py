"""The shared leaves' records (``memfs.contract.models``: memories, versions) and API errors
(``memfs.contract.errors``) as the MCP backend's (``memfs.mcp.backend``); errors one line each and
nothing secret (no URL, no key). One translation for both backends, the client's
(``store_backend``, over ``memfs.api``) and the reference server's (``memfs.server.*.mcp_backend``,
over its storage), which raise the same classes.

Must not import a client or the server: the shared leaves only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from memfs.contract.errors import (
    ApiConnectionError,
    ApiError,
    BadRequestError,
    ConflictError,
    FsError,
    NotFoundError,
    PathConflictError,
    PreconditionFailedError,
    RequestTooLargeError,
)
from memfs.contract.models import Memory, MemoryVersion
from memfs.mcp.backend import (
    BackendError,
    ChangedError,
    MissingError,
    RefusedError,
    StoredMemory,
    TakenError,
    UnavailableError,
    Version,
)

log = logging.getLogger(__name__)


@contextmanager
def translated() -> Iterator[None]:
    """Raise what the block raises as the backend's errors (most specific class first)."""
    try:
        yield
    except NotFoundError as exc:
        raise MissingError(first_line(exc)) from exc
    except PreconditionFailedError as exc:
        raise ChangedError(first_line(exc)) from exc
    except PathConflictError as exc:
        raise TakenError(first_line(exc)) from exc
    except ConflictError as exc:
        raise ChangedError(first_line(exc)) from exc
    except (BadRequestError, RequestTooLargeError) as exc:
        raise RefusedError(f"The store refused it: {first_line(exc)}") from exc
    except ApiConnectionError as exc:
        raise UnavailableError(f"The store did not answer: {exc}") from exc
    except ApiError as exc:
        if exc.status >= 500 or exc.status == 429:
            raise UnavailableError(f"The store is unavailable: {first_line(exc)}") from exc
        raise BackendError(f"The store answered: {exc}") from exc
    except FsError as exc:
        raise BackendError(str(exc) or type(exc).__name__) from exc


def first_line(exc: ApiError) -> str:
    return exc.message.splitlines()[0] if exc.message else str(exc)


def stored(memory: Memory, content: str | None = None) -> StoredMemory:
    """``memory`` as the tools see it (``content``: what was written, when the answer has none)."""
    text = memory.content if memory.content is not None else content
    return StoredMemory(
        id=memory.id,
        path=memory.path,
        content=text or "",
        sha256=memory.content_sha256,
        description=memory.description or "",
    )


def version_record(version: MemoryVersion) -> Version:
    """A version as ``memory_history`` shows it: who wrote it in words ("session sesn_…")."""
    author = ""
    if version.created_by is not None:
        author = f"{version.created_by.type.removesuffix('_actor')} {version.created_by.id}"
    return Version(
        id=version.id,
        memory_id=version.memory_id,
        path=version.path or "",
        operation=str(version.operation),
        created_at=version.created_at,
        author=author,
        size=version.content_size_bytes,
        content=version.content,
    )
