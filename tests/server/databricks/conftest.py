"""Fixtures of the Databricks Agent Memory tests: one real ``memfs server`` per module.

The official clients drive it unchanged: ``workspace`` is databricks-sdk's ``WorkspaceClient``
(PAT auth: the server's API key as the token), ``agentkit`` the AgentKit memory client on it,
and ``tests/server/databricks/test_cli.py`` runs the ``agentbricks`` CLI with the token in its
environment. ``store`` is a fresh store for one test, deleted in teardown.

``dbx_server`` runs on each backend in turn (``sqlite``: a file; ``postgres``: a database on the
session's throwaway cluster), one server per backend per module, so every test that uses it runs
on both. A test pins one backend with
``@pytest.mark.parametrize("dbx_server", ["postgres"], indirect=True)``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from databricks.sdk import WorkspaceClient
from databricks.sdk.errors import NotFound
from databricks.sdk.service.agentkit import ManagedMemoryStore
from databricks_agentkit import AgentKitClient

from kit.servers import ServerProcess, free_port

from .helpers import new_store_id, workspace_for


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def dbx_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    url = None
    if request.param == "postgres":
        url = request.getfixturevalue("pg_cluster").create_database("dbx")
    with ServerProcess(
        db=tmp_path_factory.mktemp("dbx") / "memfs.db", port=free_port(), db_url=url
    ) as proc:
        yield proc


@pytest.fixture(scope="module")
def workspace(dbx_server: ServerProcess) -> WorkspaceClient:
    return workspace_for(dbx_server)


@pytest.fixture(scope="module")
def agentkit(workspace: WorkspaceClient) -> AgentKitClient:
    return AgentKitClient(workspace_client=workspace)


@pytest.fixture
def store(workspace: WorkspaceClient) -> Iterator[str]:
    """A fresh store's resource name (``memory-stores/<id>``), deleted after the test."""
    store_id = new_store_id()
    created = workspace.agent_kit.create_memory_store(ManagedMemoryStore(), store_id)
    assert created.name == f"memory-stores/{store_id}"
    try:
        yield created.name
    finally:
        with contextlib.suppress(NotFound):
            workspace.agent_kit.delete_memory_store(created.name)
