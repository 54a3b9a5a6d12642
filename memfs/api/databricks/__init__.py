"""The Databricks Agent Memory API behind the store-API seam (``memfs.contract.store_api``).

``client`` speaks the entry endpoints over the shared ``memfs.api.transport`` (Bearer token,
the Databricks error envelope mapped to ``memfs.contract.errors``, the one retry policy); ``store``
binds it to one (store, actor, session) as a ``StoreAPI`` and makes up what the API lacks
(preconditions, renames, directories, a change listing: ``changes``); ``config`` finds the
workspace and token with databricks-sdk. ``open_store`` is the one place a Databricks store is
opened, for ``memfs mount`` and ``memfs session`` alike.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import trio

from memfs.api.databricks.client import DatabricksClient
from memfs.api.databricks.config import resolve_workspace
from memfs.api.databricks.store import DATABRICKS, DatabricksStore

__all__ = ["DATABRICKS", "DatabricksStore", "OpenedStore", "open_store", "resolve_workspace"]


@dataclass(frozen=True)
class OpenedStore:
    """The two adapters a mount uses: ``quick`` for what a syscall waits on (short deadlines),
    ``uploads`` for background uploads (long ones). They share one listing diff."""

    quick: DatabricksStore
    uploads: DatabricksStore
    base_url: str  # the workspace's (its host): where the mount's journal belongs
    description: str = ""  # the store's own (what it is for), as the API gave it


@asynccontextmanager
async def open_store(
    store_id: str,
    actor_id: str,
    session_id: str | None = None,
    *,
    profile: str | None = None,
) -> AsyncIterator[OpenedStore]:
    """Open the store ``store_id`` for ``actor_id`` (and ``session_id``) with the workspace of
    ``resolve_workspace(profile)``. Raises ``ConfigError`` (no workspace or token),
    ``NotFoundError`` (no such store) and the other ``ApiError``s of the first request."""
    workspace = await trio.to_thread.run_sync(resolve_workspace, profile)  # the SDK blocks
    async with DatabricksClient(workspace.config) as client:
        if workspace.fresh_headers is not None:
            client.refresh_headers_with(workspace.fresh_headers)
        quick = client.with_options(timeout=10.0, max_retries=2, deadline=30.0)
        found = await quick.with_options(max_retries=1, deadline=10.0).get_store(store_id)
        store = DatabricksStore(quick, store_id, actor_id, session_id)
        yield OpenedStore(
            quick=store,
            uploads=store.with_client(client.with_options(timeout=60.0, max_retries=4)),
            base_url=workspace.config.base_url,
            description=str(found.get("description") or ""),
        )
