"""``memfs sync`` of a read-only store (nothing uploaded, local changes undone and kept) and of
a Databricks store (one actor's entries, both ways)."""

from __future__ import annotations

import json
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kit.databricks import ACTOR, Workspace, databricks_env
from kit.servers import ServerProcess
from kit.synced import SyncedDir
from kit.waiting import wait_for

Factory = Callable[..., SyncedDir]


def test_a_read_only_sync_never_uploads_and_keeps_undone_text(sync_factory: Factory) -> None:
    synced = sync_factory("--read-only", memories={"/rule.md": "the rule\n"})
    rule = synced.local("/rule.md")
    assert stat.S_IMODE(rule.stat().st_mode) == 0o444  # no write permission
    rule.chmod(0o644)
    rule.write_text("changed here\n")
    synced.local("/added.md").write_text("added here\n")
    synced.wait_local("/rule.md", "the rule\n")  # the store's version put back
    synced.put("/later.md", "remote, later\n")
    synced.wait_local("/later.md", "remote, later\n")  # remote changes keep arriving
    assert synced.content("/rule.md") == "the rule\n"
    assert synced.paths() == {"/rule.md", "/later.md"}
    put_back = wait_for(lambda: synced.status()["sync"]["put_back"])
    assert Path(put_back["/rule.md"]).read_text() == "changed here\n"  # kept outside DIR
    assert not Path(put_back["/rule.md"]).is_relative_to(synced.path)
    assert synced.status()["read_only"] is True


@pytest.fixture
def workspace(server: ServerProcess) -> Iterator[Workspace]:
    with Workspace(server) as space:
        yield space


def test_a_databricks_store_syncs_an_actors_entries(
    server: ServerProcess, workspace: Workspace, tmp_path: Path, sdk: Any
) -> None:
    store = workspace.create_store()
    workspace.put(store, "/prefs/tone.md", "be brief\n", description="how to write")
    workspace.put(store, "/other.md", "not mine\n", actor="someone-else")
    synced = SyncedDir(
        path=tmp_path / "dbx",
        store_id=store,
        store_name=store,
        sdk=sdk,
        env=databricks_env(server, tmp_path),
        log_file=tmp_path / "dbx.log",
        extra_args=["--api", "databricks", "--actor", ACTOR, "--cache-dir", str(tmp_path / "c")],
    )
    try:
        result = synced.start()
        assert result.returncode == 0, result.stderr + synced.log()
        assert synced.local("/prefs/tone.md").read_text() == "be brief\n"
        assert not synced.local("/other.md").exists()  # another actor's entry
        synced.local("/prefs/tone.md").write_text("be brief and kind\n")
        wait_for(lambda: workspace.content(store, "/prefs/tone.md") == "be brief and kind\n")
        synced.local("/notes.md").write_text("a new entry\n")
        wait_for(lambda: workspace.content(store, "/notes.md") == "a new entry\n")
        entry = workspace.entries(store)[(None, "/prefs/tone.md")]
        workspace.patch(store, entry, "changed in the workspace\n")
        synced.wait_local("/prefs/tone.md", "changed in the workspace\n")
        # descriptions, as memfs export keeps them: DIR/.memfs/descriptions.json, both ways
        described = synced.local("/.memfs/descriptions.json")
        assert json.loads(described.read_text()) == {"/prefs/tone.md": "how to write"}
        described.write_text(json.dumps({"/prefs/tone.md": "how to write, kindly"}))

        def description() -> str | None:
            found = workspace.entries(store)[(None, "/prefs/tone.md")]
            return found.get("description")

        wait_for(lambda: description() == "how to write, kindly")
        assert synced.stop().returncode == 0
    finally:
        synced.cleanup()
    assert "Traceback" not in synced.log()
    assert server.api_key not in synced.log()  # the token never in a log
