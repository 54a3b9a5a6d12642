"""The workspace a journal belongs to, on its own: one name per server, never a credential in it,
and a journal directory that records another workspace is refused, not used.

No mount and no server (``tests/mount/test_journal_workspaces.py`` has the real ones).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memfs.writeback.journal import Journal, JournalError, Record
from memfs.writeback.workspace import WORKSPACE_FILE, WorkspaceId, normalise_base_url

STORE = "agent-memory"


@pytest.mark.parametrize(
    ("given", "normalised"),
    [
        ("https://API.Example.COM", "https://api.example.com"),
        ("https://api.example.com:443/", "https://api.example.com"),
        ("HTTP://h:80//", "http://h"),
        ("http://h:8080", "http://h:8080"),
        ("https://h:80", "https://h:80"),
        ("https://user:secret@h/a//b/./c/../", "https://h/a/b"),
        ("https://h./x?token=secret#frag", "https://h/x"),
        ("http://[::1]:8700/", "http://[::1]:8700"),
    ],
)
def test_a_base_url_has_one_name_without_credentials(given: str, normalised: str) -> None:
    assert normalise_base_url(given) == normalised


def test_a_journal_directory_names_its_workspace_and_records_it(tmp_path: Path) -> None:
    secret = WorkspaceId.of("databricks", "https://me:s3cret@Dev.Example.com:443/")
    journal = Journal.open(tmp_path, STORE, secret)
    journal.close()
    home = tmp_path / STORE / secret.directory_name(STORE)
    assert home.name.startswith("workspace-dev.example.com-")
    recorded = json.loads((home / WORKSPACE_FILE).read_text())
    assert recorded == {"api": "databricks", "base_url": "https://dev.example.com", "store": STORE}
    assert (home / WORKSPACE_FILE).stat().st_mode & 0o077 == 0
    assert "s3cret" not in str(list(tmp_path.rglob("*"))) + (home / WORKSPACE_FILE).read_text()
    names = {
        WorkspaceId.of(api, url).directory_name(STORE)
        for api, url in [
            ("databricks", "https://dev.example.com"),
            ("databricks", "https://prod.example.com"),
            ("memory-stores", "https://dev.example.com"),
            ("databricks", "https://dev.example.com:8443"),
        ]
    }
    assert len(names) == 4


def test_a_journal_directory_recording_another_workspace_is_refused(tmp_path: Path) -> None:
    dev = WorkspaceId.of("databricks", "https://dev.example.com")
    journal = Journal.open(tmp_path, STORE, dev)
    journal.put(Record(name="r", op="delete", memory_id="m", written_at="1"))
    journal.close()
    home = tmp_path / STORE / dev.directory_name(STORE)
    document = json.loads((home / WORKSPACE_FILE).read_text())
    (home / WORKSPACE_FILE).write_text(json.dumps(document | {"base_url": "https://prod.x"}))
    with pytest.raises(JournalError, match=r"records the store .agent-memory. of https://prod\.x"):
        Journal.open(tmp_path, STORE, dev)
    [waiting] = Journal.not_replayed(tmp_path, STORE, WorkspaceId.of("databricks", "https://b"))
    assert (waiting.directory, waiting.records) == (home, 1)
    assert waiting.workspace == WorkspaceId("databricks", "https://prod.x")
