"""The attached stores as their APIs know them, retrieved before anything is mounted.

``fetch_stores`` asks the Memory Stores API (through the ``StoreClient`` it is handed),
``fetch_databricks_stores`` opens each Databricks store as its mount will
(``memfs.api.databricks.open_store``); ``fetch_all_stores`` runs the two side by side. They
answer by ``Attachment.store_key`` (None: no such store) and raise ``SessionError`` for failures
that are not one store's (credentials, network), each one line, each once.
``memfs.session.plan`` checks what they found.
"""

from __future__ import annotations

from datetime import UTC, datetime

import trio

from memfs.api import AmbiguousStoreError, StoreClient
from memfs.api.config import ConfigError
from memfs.contract.errors import (
    ApiConnectionError,
    ApiError,
    AuthenticationError,
    NotFoundError,
    PermissionDeniedError,
)
from memfs.contract.exit_codes import EXIT_USAGE, exit_code_for
from memfs.contract.models import MemoryStore
from memfs.session.config import Attachment, SessionError


async def fetch_stores(
    client: StoreClient, attachments: list[Attachment]
) -> dict[str, MemoryStore | None]:
    """Retrieve every attached Memory Stores store concurrently, by ``store_key`` (its id, or
    its name as every other command takes it: ``StoreClient.resolve_store``); an unknown store
    maps to None, a name that several stores share is a problem (Databricks stores:
    ``fetch_databricks_stores``).

    Authentication, permission and connection failures are not the config's fault: they raise
    SessionError with the reason, so the caller refuses the session as a whole.
    """
    found: dict[str, MemoryStore | None] = {}
    failures: list[tuple[str, int]] = []

    async def one(store_id: str) -> None:
        try:
            found[store_id] = await client.resolve_store(store_id)
        except AmbiguousStoreError as exc:
            failures.append((exc.message, EXIT_USAGE))  # the config's to fix: use an id
        except NotFoundError:
            found[store_id] = None
        except (ApiError, ApiConnectionError) as exc:
            service = f"the API at {client.config.shown_base_url}"
            failure = _failure(exc, f"memory store {store_id}", service)
            failures.append((failure, exit_code_for(exc)))

    async with trio.open_nursery() as nursery:
        for attachment in attachments:
            if not attachment.databricks:
                nursery.start_soon(one, attachment.memory_store_id)
    if failures:
        raise SessionError.of_kinds(sorted(set(failures)))
    return found


async def fetch_databricks_stores(
    attachments: list[Attachment], profile: str | None = None
) -> dict[str, MemoryStore | None]:
    """Open every attached Databricks store once, concurrently, as its mount will
    (``open_store``: the workspace of ``DATABRICKS_HOST``/``DATABRICKS_TOKEN`` or ``profile``);
    by ``store_key``, an unknown store maps to None. No workspace or credentials, and the
    failures that are not one store's, raise SessionError."""
    from memfs.api.databricks import open_store  # its SDK is needed only with Databricks stores

    found: dict[str, MemoryStore | None] = {}
    failures: list[tuple[str, int]] = []

    async def one(attachment: Attachment) -> None:
        store_id = attachment.memory_store_id
        assert attachment.actor_id is not None  # parse_config requires it
        try:
            async with open_store(store_id, attachment.actor_id, profile=profile) as opened:
                found[attachment.store_key] = databricks_store(store_id, opened.description)
        except NotFoundError:
            found[attachment.store_key] = None
        except ConfigError as exc:
            failures.append((str(exc), EXIT_USAGE))
        except (ApiError, ApiConnectionError) as exc:
            store = f"Databricks store {store_id}"
            failure = _failure(exc, store, "the Databricks workspace")
            failures.append((failure, exit_code_for(exc)))

    firsts = {a.store_key: a for a in reversed(attachments) if a.databricks}
    async with trio.open_nursery() as nursery:
        for attachment in firsts.values():
            nursery.start_soon(one, attachment)
    if failures:
        raise SessionError.of_kinds(sorted(set(failures)))
    return found


async def fetch_all_stores(
    client: StoreClient | None, attachments: list[Attachment], profile: str | None = None
) -> dict[str, MemoryStore | None]:
    """``fetch_stores`` (with ``client``: None when no store is a Memory Stores store) and
    ``fetch_databricks_stores`` side by side; one SessionError with the failures of both (the
    Memory Stores API's first)."""
    found: dict[str, MemoryStore | None] = {}
    problems: dict[bool, SessionError] = {}  # by API: databricks?

    async def one(databricks: bool) -> None:
        try:
            if databricks:
                found.update(await fetch_databricks_stores(attachments, profile))
            elif client is not None:
                found.update(await fetch_stores(client, attachments))
        except SessionError as exc:
            problems[databricks] = exc

    async with trio.open_nursery() as nursery:
        for databricks in {attachment.databricks for attachment in attachments}:
            nursery.start_soon(one, databricks)
    if problems:
        errors = [problems[databricks] for databricks in (False, True) if databricks in problems]
        raise SessionError.of_kinds([(line, e.code) for e in errors for line in e.problems])
    return found


def _failure(exc: ApiError | ApiConnectionError, store: str, service: str) -> str:
    """The one line of a failure to retrieve ``store`` ("memory store ID"), in the words of its
    API: the ``service`` that could not be reached; refused credentials in the client's words
    (where the key came from, the server that refused it)."""
    if isinstance(exc, AuthenticationError):  # the client's words name the key's source
        return exc.message
    if isinstance(exc, PermissionDeniedError):
        return f"{store} is not accessible with these credentials"
    if isinstance(exc, ApiConnectionError):
        return f"cannot reach {service}: {exc}"
    return f"cannot retrieve {store}: {exc}"


def databricks_store(store_id: str, description: str) -> MemoryStore:
    """A Databricks store as the plan and the prompt know stores: its id is its name (the
    API's ``display_name`` is a deprecated alias of it), it is never archived."""
    epoch = datetime.fromtimestamp(0, UTC)  # the plan needs no times
    return MemoryStore(
        id=store_id,
        name=store_id,
        description=description,
        metadata={},
        created_at=epoch,
        updated_at=epoch,
    )
