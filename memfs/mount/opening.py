"""Opening a store for a mount: its API clients (``OpenStore``: short deadlines for what a
syscall waits on, long ones for uploads), the one-line errors a refused or unreachable store
gives, and its write-back journal on this workspace (opened, left alone when read-only, and
the other workspaces' journals it must not replay).

``memfs.mount.daemon`` opens each store of a mount with these, side by side.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from memfs.api import AmbiguousStoreError, StoreClient
from memfs.api.capabilities import server_extensions
from memfs.api.config import ClientConfig, ConfigError
from memfs.api.store import MemoryStoresAPI, capabilities_with
from memfs.contract.errors import (
    ApiConnectionError,
    ApiError,
    AuthenticationError,
    NotFoundError,
    PermissionDeniedError,
)
from memfs.contract.exit_codes import EXIT_USAGE, exit_code_for
from memfs.contract.store_api import StoreAPI
from memfs.host.private import NotPrivateError, private_dir
from memfs.mount.options import StoreSpec
from memfs.mount.statedir import MountError
from memfs.mount.status import JournalsOfStore
from memfs.writeback.journal import Journal, JournalError
from memfs.writeback.workspace import WorkspaceId

log = logging.getLogger(__name__)

DATABRICKS_API = "Databricks Agent Memory API"


@dataclass(frozen=True)
class OpenStore:
    """The mounted store, however it was opened: its two adapters (short deadlines for what a
    syscall waits on, long ones for uploads), names, and where its journal lives."""

    quick: StoreAPI
    uploads: StoreAPI
    name: str  # for log lines and ``memfs status``
    journal_key: str  # the journal's directory: one per (store, actor, session) on Databricks
    workspace: WorkspaceId  # the server: the journal's directory below the store's
    archived: bool = False

    @property
    def described(self) -> str:
        """The store in a log line: its name, and its id if that is not already in it."""
        store_id = self.quick.store_id
        return self.name if store_id in self.name else f"{self.name} ({store_id})"


def databricks_journal_key(store: str, actor: str, session: str | None) -> str:
    """One journal per mounted (store, actor, session): their paths are not each other's."""
    who = hashlib.sha256(f"{actor}\0{session or ''}".encode()).hexdigest()[:12]
    return f"databricks-{store}-{who}"


def describe_api_error(
    exc: BaseException, store: str, base_url: str, api: str = "Memory Stores API"
) -> str:
    if isinstance(exc, NotFoundError):
        if api == DATABRICKS_API:
            return f"memory store {store!r} not found"
        return exc.message  # with the names near it (memory_stores.store_not_found)
    if isinstance(exc, AmbiguousStoreError):
        return exc.message  # it names the matches
    if isinstance(exc, AuthenticationError | PermissionDeniedError):
        # the client's words name the key's source and the server (ClientConfig.refusal)
        return f"{exc.message} ({exc.status} {exc.error_type})"
    if isinstance(exc, ApiConnectionError):
        return f"cannot reach the {api} at {base_url}"
    if isinstance(exc, ApiError):
        return f"the API refused the request: {exc}"
    return str(exc)


@asynccontextmanager
async def open_store(opts: StoreSpec) -> AsyncIterator[OpenStore]:
    """The store ``opts`` names, opened (a ``MountError`` with a one-line message if it
    cannot be), for the lifetime of the mount."""
    if opts.api == "databricks":
        async with open_databricks(opts) as store:
            yield store
        return
    try:
        config = ClientConfig.from_env(
            api_key_file=opts.api_key_file, base_url=opts.base_url, session_id=opts.session_id
        )
    except ConfigError as exc:
        raise MountError(str(exc), EXIT_USAGE) from None
    async with StoreClient(config) as client:
        # syscalls wait on these clients: a long retry-after is an error, not a wait
        quick = client.with_options(timeout=5.0, max_retries=1, deadline=10.0)
        try:
            found = await quick.resolve_store(opts.store)
        except (ApiError, ApiConnectionError) as exc:
            raise MountError(
                describe_api_error(exc, opts.store, config.shown_base_url), exit_code_for(exc)
            ) from None
        # asked once: the limits, the change stream and search all come from this answer
        extensions = await server_extensions(quick)
        capabilities = capabilities_with(extensions)
        yield OpenStore(
            quick=MemoryStoresAPI(
                client.with_options(timeout=10.0, max_retries=2, deadline=30.0),
                found.id,
                capabilities,
                extensions,
            ),
            uploads=MemoryStoresAPI(
                client.with_options(timeout=60.0, max_retries=4), found.id, capabilities, extensions
            ),
            name=found.name,
            journal_key=found.id,
            workspace=WorkspaceId.of(opts.api, config.base_url),
            archived=found.archived,
        )


@asynccontextmanager
async def open_databricks(opts: StoreSpec) -> AsyncIterator[OpenStore]:
    from memfs.api.databricks import open_store

    assert opts.actor is not None, "the command line requires --actor"
    async with contextlib.AsyncExitStack() as stack:
        try:
            opened = await stack.enter_async_context(
                open_store(opts.store, opts.actor, opts.dbx_session, profile=opts.profile)
            )
        except ConfigError as exc:
            raise MountError(str(exc), EXIT_USAGE) from None
        except (ApiError, ApiConnectionError) as exc:
            raise MountError(
                describe_api_error(exc, opts.store, "the Databricks workspace", DATABRICKS_API),
                exit_code_for(exc),
            ) from None
        session = f", session {opts.dbx_session}" if opts.dbx_session else ""
        yield OpenStore(
            quick=opened.quick,
            uploads=opened.uploads,
            name=f"{opts.store} (actor {opts.actor}{session})",
            journal_key=databricks_journal_key(opts.store, opts.actor, opts.dbx_session),
            workspace=WorkspaceId.of(opts.api, opened.base_url),
        )


def open_journal(cache_dir: Path, store: OpenStore, spec: StoreSpec) -> tuple[Journal, Path]:
    """The journal of the store on this workspace, and this mount's directory of refused
    files beside it (one per journal slot: no other running mount writes there or removes
    what is in it)."""
    try:
        journal = Journal.open(
            cache_dir,
            store.journal_key,
            store.workspace,
            replay_legacy=spec.replay_legacy_journal,
        )
    except (JournalError, OSError) as exc:
        raise MountError(f"write-back journal: {exc}") from None
    kept = journal.directory.parent / "kept" / journal.directory.name
    try:
        for directory in (kept.parent, kept):
            if os.path.lexists(directory):
                why = ": refused content copied there would be theirs to read"
                private_dir(directory, "directory of refused files", why=why, create=False)
    except NotPrivateError as exc:
        journal.close()
        raise MountError(f"write-back journal: {exc}") from None
    log.info("write-back journal of %s in %s", store.workspace, journal.directory)
    return journal, kept


def leave_journal(cache_dir: Path, store: OpenStore) -> int:
    """Read-only: leave the journal as it is (records for the next read-write mount);
    returns how many records it holds."""
    directory, count = Journal.pending(cache_dir, store.journal_key, store.workspace)
    if count:
        log.warning(
            "read-only mount: %d write-back journal record(s) of an earlier mount in %s are "
            "left untouched (not uploaded); the next read-write mount of the store uploads "
            "them",
            count,
            directory,
        )
    else:
        log.info("read-only mount: no write-back journal (nothing is ever written)")
    return count


def journals_not_replayed(cache_dir: Path, store: OpenStore) -> JournalsOfStore:
    """The store's journals that this mount leaves alone (other workspaces', and one of an
    earlier memfs that recorded none), each said once in the log; for ``memfs status``."""
    waiting = Journal.not_replayed(cache_dir, store.journal_key, store.workspace)
    for journal in waiting:
        if journal.workspace is not None:
            log.warning(
                "%d write-back journal record(s) in %s were written for %s, not this "
                "mount's %s: not uploaded here; a mount of that workspace uploads them",
                journal.records,
                journal.directory,
                journal.workspace,
                store.workspace,
            )
        else:
            log.warning(
                "%d write-back journal record(s) in %s were written by an earlier memfs, "
                "which recorded no workspace: not uploaded; if they are for %s, mount with "
                "--replay-legacy-journal to upload them",
                journal.records,
                journal.directory,
                store.workspace,
            )
    return JournalsOfStore(store.workspace, waiting)
