"""The stop report: what a session could not upload, each change once, with where it is kept.

The wording is tested on unmount reports as the daemon writes them (``memfs umount --json``); the
whole path on a real session whose server is down at stop.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from kit.journals import journal_home, journal_records
from memfs.session.teardown import stop_notes, stop_report

from .helpers import Api, force_unmount, run_memfs, slug_of, unique, write_config

JOURNAL = "/cache/memfs/memstore_x/journal-0"
FAILED = "final upload failed: POST /v1/memory_stores/{store}/memories: cannot reach it"


def report(**parts: Any) -> dict[str, Any]:
    """An unmount report (``memfs.status.unmount_report``) saying ``parts``."""
    empty: dict[str, Any] = {"pending": [], "refused": [], "conflicts": [], "errors": []}
    return {
        "type": "memfs_unmount_report",
        "store_id": "memstore_x",
        "store_gone": None,
        "orphaned": None,
        **empty,
        **parts,
    }


def pending(op: str, path: str) -> dict[str, str]:
    return {"op": op, "path": path, "why": "not uploaded yet", "kept_in": JOURNAL}


def test_each_change_is_reported_once_with_its_journal() -> None:
    told = report(
        errors=[FAILED, FAILED],  # e.g. two runs of one key failed alike
        pending=[pending("put", "/one.md"), pending("delete", "/two.md")],
    )
    problems = stop_report(Path("/r/notes"), told)
    assert problems == [
        f"/r/notes: {FAILED}",
        f"/r/notes: put /one.md: not uploaded yet (kept in {JOURNAL}, "
        "uploaded by the next mount of this store)",
        f"/r/notes: delete /two.md: not uploaded yet (kept in {JOURNAL}, "
        "uploaded by the next mount of this store)",
    ]


def test_files_open_at_the_end_are_notes_unless_their_content_is_not_kept() -> None:
    told = report(
        open_at_end=[
            {"path": "/log.md", "saved": "version", "where": None},
            {"path": "/.log.md.swp", "saved": "not kept", "where": "a local-only name"},
        ]
    )
    assert stop_notes(Path("/r/notes"), told) == [
        "/r/notes: /log.md: saved as a version of the store",
        "/r/notes: /.log.md.swp: not kept (a local-only name)",
    ]
    assert stop_report(Path("/r/notes"), told) == [
        "/r/notes: /.log.md.swp: not kept (a local-only name)"
    ]


def test_no_report_means_no_problems() -> None:
    assert stop_report(Path("/r/notes"), None) == []
    assert stop_report(Path("/r/notes"), report()) == []


@pytest.mark.fuse
def test_server_down_at_stop_reports_each_change_once_and_the_next_mount_uploads_it(
    tmp_path: Path, fresh_server: Any
) -> None:
    api = Api(fresh_server)
    store = api.create_store(unique("Outage"))
    api.create_memory(store["id"], "/old.md", "old\n")
    env = fresh_server.client_env()
    env["MEMFS_STATE_DIR"] = str(tmp_path / "state")
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    root = tmp_path / "memory"
    config = write_config(
        tmp_path / "session.json", [{"type": "memory_store", "memory_store_id": store["id"]}]
    )
    mount = root / slug_of(store["name"])
    try:
        done = run_memfs(["session", "--config", str(config), "--root", str(root), "--detach"], env)
        assert done.returncode == 0, done.stderr
        (mount / "old.md").write_text("changed while the server went away\n")
        (mount / "new.md").write_text("created while the server went away\n")
        fresh_server.stop()  # within the upload delay: neither change is uploaded
        started = time.monotonic()
        stopped = run_memfs(["session", "stop", "--root", str(root)], env, timeout=90)
        assert time.monotonic() - started < 60
    finally:
        force_unmount(root)
    assert stopped.returncode == 1, stopped.stderr
    lines = stopped.stderr.splitlines()
    cache = tmp_path / "cache" / "memfs"
    journal = journal_home(cache, store["id"], fresh_server.base_url) / "journal-0"
    for change in ("put /old.md", "put /new.md"):
        mine = [line for line in lines if f": {change}: " in line]
        assert len(mine) == 1, stopped.stderr  # once, not once per report or log copy
        assert f"(kept in {journal}, uploaded by the next mount of this store)" in mine[0]
    assert len(lines) == len(set(lines)), stopped.stderr
    assert "may be lost" not in stopped.stderr
    assert journal_records(cache) == 2
    assert not mount.exists()

    # The report's promise: the next mount of the store uploads what was kept.
    fresh_server.start()
    try:
        done = run_memfs(["session", "--config", str(config), "--root", str(root), "--detach"], env)
        assert done.returncode == 0, done.stderr
        stopped = run_memfs(["session", "stop", "--root", str(root)], env, timeout=90)
        assert stopped.returncode == 0, stopped.stderr
    finally:
        force_unmount(root)
    memories = api.memories(store["id"])
    assert memories["/old.md"]["content"] == "changed while the server went away\n"
    assert memories["/new.md"]["content"] == "created while the server went away\n"
    assert journal_records(cache) == 0
    assert os.listdir(tmp_path / "state") == [] or all(
        not name.endswith(".json") for name in os.listdir(tmp_path / "state")
    )


def test_refused_files_and_conflicts_are_reported_apart_from_the_journal() -> None:
    copy = "/cache/memfs/memstore_x/kept/big.md"
    told = report(
        pending=[pending("put", "/one.md")],
        refused=[
            {
                "path": "/big.md",
                "why": "a write over 102,400 bytes was refused (EFBIG)",
                "copy": copy,
            }
        ],
        conflicts=[{"path": "/c.md", "saved_as": "/c.conflict-1.md", "at": "2026-12-01T10:00:00Z"}],
    )
    assert stop_report(Path("/r/notes"), told) == [
        f"/r/notes: put /one.md: not uploaded yet (kept in {JOURNAL}, "
        "uploaded by the next mount of this store)",
        "/r/notes: refused /big.md: a write over 102,400 bytes was refused (EFBIG); never "
        f"uploaded, a copy is in {copy}",
        "/r/notes: /c.md: changed on the server by another writer; the server's version stays, "
        "the local content is saved as /c.conflict-1.md",
    ]


def test_a_deleted_store_says_where_its_changes_went() -> None:
    told = report(
        store_gone={"since": "2026-12-01T10:00:00Z"},
        orphaned={"directory": "/cache/o", "files": ["/a.md -> /cache/o/a.md"]},
    )
    assert stop_report(Path("/r/notes"), told) == [
        "/r/notes: the memory store memstore_x no longer exists (deleted while mounted); 1 "
        "change(s) could never be uploaded and are not replayed; their content is handed over "
        "as plain files in /cache/o",
        "/r/notes: /a.md -> /cache/o/a.md",
    ]
