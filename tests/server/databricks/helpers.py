"""What the Databricks Agent Memory tests import (fixtures live in conftest.py, never imported)."""

from __future__ import annotations

import uuid

from databricks.sdk import WorkspaceClient

from kit.servers import ServerProcess


def new_store_id() -> str:
    """A store name no other test uses (stores outlive a test only when it fails)."""
    return "t" + uuid.uuid4().hex[:12]


def workspace_for(server: ServerProcess, token: str | None = None) -> WorkspaceClient:
    """databricks-sdk's client of ``server``, with its API key as the token (or ``token``)."""
    return WorkspaceClient(host=server.base_url, token=token or server.api_key)
