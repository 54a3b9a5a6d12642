"""The server's MCP backends (``memfs.server.*.mcp_backend``) on a real storage, in process (no
HTTP): what the HTTP tests cannot reach cheaply."""

from __future__ import annotations

from pathlib import Path

from memfs.mcp.backend import StoreInfo
from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.databricks.mcp_backend import DatabricksBackend
from memfs.server.databricks.storage import SOURCE_AGENT, NewEntry
from memfs.server.memory_stores.mcp_backend import PAGE

INFO = StoreInfo("databricks", "s", False, False, True, False)


async def test_a_databricks_read_finds_its_session_past_the_first_page(tmp_path: Path) -> None:
    """One path in more sessions than a page holds: each session's backend reads its own."""
    storage = await SqliteStorage.open(tmp_path / "memfs.db")
    try:
        dbx = storage.databricks
        await dbx.create_store("many", description=None, creator="apikey_x")
        sessions = [f"s{n:04d}" for n in range(PAGE + 5)]
        for session in sessions:
            entry = NewEntry(None, "a", session, "/same.md", session, None, SOURCE_AGENT)
            await dbx.create_entry("many", entry)
        for session in (sessions[0], sessions[-1]):
            found = await DatabricksBackend(dbx, "many", "a", session, INFO).read("/same.md")
            assert found is not None and found.content == session
        assert await DatabricksBackend(dbx, "many", "a", None, INFO).read("/same.md") is None
    finally:
        await storage.aclose()
