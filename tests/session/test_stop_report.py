"""The stop report: what a session could not upload, each change once, with where it is kept.

The parsing is tested on a daemon log as the daemon writes it (a report logged twice, its changes
on continuation lines); the whole path on a real session whose server is down at stop.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from memfs.session.supervisor import _errors_since, _umount_report, stop_report

from .helpers import Api, force_unmount, run_memfs, slug_of, unique, write_config

JOURNAL = "/cache/memfs/memstore_x/journal-0"
REPORT = f"2 change(s) not uploaded; kept in {JOURNAL} (replayed at next mount):"
FAILED = "final upload failed: POST /v1/memory_stores/{store}/memories: cannot reach it"


def daemon_log(times: int) -> str:
    block = (
        "2026-11-30 10:01:49,211 INFO memfs.daemon: flushing 2 pending uploads\n"
        f"2026-11-30 10:01:49,212 ERROR memfs.daemon: {FAILED}\n"
        f"2026-11-30 10:01:49,212 ERROR memfs.daemon: {REPORT}\n"
        "  put /one.md: not uploaded yet\n"
        "  delete /two.md: not uploaded yet\n"
        "2026-11-30 10:01:49,213 WARNING memfs.writeback: upload of 2 failed (attempt 1)\n"
    )
    return block * times


def test_each_change_is_reported_once_with_its_journal(tmp_path: Path) -> None:
    log_file = tmp_path / "mount.log"
    log_file.write_text("2026-11-30 10:00:00,000 ERROR memfs.daemon: before the offset\n")
    offset = log_file.stat().st_size
    with open(log_file, "a") as stream:
        stream.write(daemon_log(times=2))  # the daemon may flush and report twice
    umount_output = f"memfs umount: {REPORT}\n  put /one.md: not uploaded yet\n"
    messages = [_umount_report(umount_output) or "", *_errors_since(log_file, offset)]
    problems = stop_report(Path("/r/notes"), messages)
    assert problems == [
        f"/r/notes: {FAILED}",
        f"/r/notes: put /one.md: not uploaded yet (kept in {JOURNAL}, "
        "uploaded by the next mount of this store)",
        f"/r/notes: delete /two.md: not uploaded yet (kept in {JOURNAL}, "
        "uploaded by the next mount of this store)",
    ]


def test_no_report_means_no_problems(tmp_path: Path) -> None:
    assert _umount_report("") is None
    log_file = tmp_path / "mount.log"
    log_file.write_text("2026-11-30 10:01:49,211 INFO memfs.daemon: unmounted /r/notes\n")
    assert stop_report(Path("/r/notes"), _errors_since(log_file, 0)) == []


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
    journal = tmp_path / "cache" / "memfs" / store["id"] / "journal-0"
    for change in ("put /old.md", "put /new.md"):
        mine = [line for line in lines if f": {change}: " in line]
        assert len(mine) == 1, stopped.stderr  # once, not once per report or log copy
        assert f"(kept in {journal}, uploaded by the next mount of this store)" in mine[0]
    assert len(lines) == len(set(lines)), stopped.stderr
    assert "may be lost" not in stopped.stderr
    assert len(list(journal.glob("*.rec"))) == 2
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
    assert not list(journal.glob("*.rec"))
    assert os.listdir(tmp_path / "state") == [] or all(
        not name.endswith(".json") for name in os.listdir(tmp_path / "state")
    )


def test_refused_files_are_reported_apart_from_the_journal() -> None:
    copy = "/cache/memfs/memstore_x/kept/big.md"
    umount_output = (
        f"memfs umount: 1 change(s) not uploaded; kept in {JOURNAL} (replayed at next mount):\n"
        "  put /one.md: not uploaded yet\n"
        "1 file(s) refused by the store; never uploaded:\n"
        f"  refused /big.md: larger than 102,400 bytes; never uploaded, a copy is in {copy}\n"
    )
    report = _umount_report(umount_output)
    assert report is not None
    assert stop_report(Path("/r/notes"), [report]) == [
        f"/r/notes: put /one.md: not uploaded yet (kept in {JOURNAL}, "
        "uploaded by the next mount of this store)",
        "/r/notes: refused /big.md: larger than 102,400 bytes; never uploaded, a copy is in "
        f"{copy}",
    ]
