"""Acknowledged writes survive a killed daemon, lost answers and an outage at unmount.

Real mounts (``memfs mount`` subprocesses) on a private server with the fault middleware.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kit.journals import journal_home, journal_records
from kit.mounts import MountedStore, memfs
from kit.waiting import wait_for

pytestmark = pytest.mark.fuse


def journal_files(tmp_path: Path) -> int:
    return journal_records(tmp_path / "cache")


def test_kill_9_then_remount_replays_everything_once(
    faulty_mount: Callable[..., MountedStore], tmp_path: Path
) -> None:
    mounted = faulty_mount("--update-delay", "30", memories={"/old.md": "v1\n"})
    (mounted.path / "new.md").write_text("brand new\n")
    (mounted.path / "old.md").write_text("v2\n")
    (mounted.path / "sub").mkdir()
    (mounted.path / "sub" / "deep.md").write_text("deep\n")
    assert journal_files(tmp_path) == 3  # durable before close() returned
    mounted.kill()
    assert mounted.content("/old.md") == "v1\n"  # nothing was uploaded before the crash
    assert mounted.mount().returncode == 0
    assert mounted.content("/new.md") == "brand new\n"
    assert mounted.content("/old.md") == "v2\n"
    assert mounted.content("/sub/deep.md") == "deep\n"
    assert (mounted.path / "old.md").read_text() == "v2\n"
    old_id = mounted.memories()["/old.md"].id
    assert [v.operation for v in mounted.versions(old_id)] == ["modified", "created"]
    assert journal_files(tmp_path) == 0


def test_replayed_create_whose_answer_was_lost_is_not_duplicated(
    faulty_server: Any, faulty_mount: Callable[..., MountedStore], tmp_path: Path
) -> None:
    mounted = faulty_mount()
    faulty_server.set_faults("drop_after=0.5,methods=POST,seed=1")
    for n in range(8):
        (mounted.path / f"f{n}.md").write_text(f"file {n}\n")
    mounted.settle()  # fsync keeps retrying lost answers (up to 30 s): no EIO
    counts = faulty_server.faults()["counts"]
    faulty_server.set_faults("none")
    assert counts.get("drop_after", 0) > 0
    assert {p: mounted.content(p) for p in mounted.paths()} == {
        f"/f{n}.md": f"file {n}\n" for n in range(8)
    }
    assert len(mounted.versions()) == 8  # one "created" each, nothing repeated


def test_umount_during_outage_reports_and_next_mount_uploads(
    faulty_server: Any, faulty_mount: Callable[..., MountedStore], tmp_path: Path
) -> None:
    mounted = faulty_mount("--update-delay", "30")
    (mounted.path / "kept.md").write_text("precious\n")
    faulty_server.set_faults("outage=1")
    result = memfs("umount", str(mounted.path), env=mounted.env, timeout=90)
    assert result.returncode == 1
    assert "kept.md" in result.stderr and "not uploaded" in result.stderr
    assert str(tmp_path / "cache") in result.stderr
    wait_for(lambda: not os.path.ismount(mounted.path), timeout=10)
    faulty_server.set_faults("none")
    assert mounted.content("/kept.md") is None
    assert mounted.mount().returncode == 0
    assert mounted.content("/kept.md") == "precious\n"
    assert memfs("umount", str(mounted.path), env=mounted.env).returncode == 0


def test_conflict_keeps_both_sides(faulty_mount: Callable[..., MountedStore]) -> None:
    mounted = faulty_mount("--update-delay", "30", memories={"/n.md": "base\n"})
    assert (mounted.path / "n.md").read_text() == "base\n"
    with open(mounted.path / "n.md", "w") as handle:
        handle.write("local\n")
        handle.flush()
        mounted.put("/n.md", "remote\n")
        with pytest.raises(OSError) as caught:
            os.fsync(handle.fileno())
    import errno

    assert caught.value.errno == errno.ESTALE
    mounted.settle()
    contents = {p: mounted.content(p) for p in mounted.paths()}
    assert contents.pop("/n.md") == "remote\n"
    [(sibling, text)] = contents.items()
    assert sibling.startswith("/n.conflict-") and sibling.endswith(".md")
    assert text == "local\n"


def test_store_deleted_while_mounted_hands_pending_content_over(
    faulty_mount: Callable[..., MountedStore], tmp_path: Path
) -> None:
    """The store is deleted with changes pending: the mount says so once (log, status), stops
    trying, refuses changes with ENODEV, and umount hands the content over as plain files in a
    named directory (exit 1); nothing is left for a later mount to replay."""
    import errno

    mounted = faulty_mount("--update-delay", "30", memories={"/old.md": "v1\n"})
    (mounted.path / "old.md").write_text("v2\n")
    (mounted.path / "sub").mkdir()
    (mounted.path / "sub" / "new.md").write_text("brand new\n")
    assert journal_files(tmp_path) == 2
    writer = open(mounted.path / "old.md", "r+")  # noqa: SIM115 - closed below
    mounted.sdk.beta.memory_stores.delete(mounted.store_id)

    gone = wait_for(lambda: mounted.status()["store_gone"], timeout=15)  # the change feed notices
    assert gone["since"]
    assert "STORE GONE" in memfs("status", str(mounted.path), env=mounted.env).stdout
    with pytest.raises(OSError) as caught:
        open(mounted.path / "more.md", "w")  # noqa: SIM115
    assert caught.value.errno == errno.ENODEV
    with pytest.raises(OSError) as caught:
        os.fsync(writer.fileno())  # never 0 for content the server will never have
    assert caught.value.errno == errno.ENODEV
    with pytest.raises(OSError) as caught:
        writer.close()
    assert caught.value.errno == errno.ENODEV
    assert (mounted.path / "old.md").read_text() == "v2\n"  # what the mount holds stays readable

    result = memfs("umount", str(mounted.path), env=mounted.env, timeout=90)
    wait_for(lambda: not os.path.ismount(mounted.path), timeout=10)
    assert result.returncode == 1
    assert "no longer exists" in result.stderr and "replayed at next mount" not in result.stderr
    home = journal_home(tmp_path / "cache", mounted.store_id, mounted.env["ANTHROPIC_BASE_URL"])
    [handed] = home.glob("orphaned-*")
    assert str(handed) in result.stderr
    assert (handed / "old.md").read_text() == "v2\n"
    assert (handed / "sub" / "new.md").read_text() == "brand new\n"
    assert journal_files(tmp_path) == 0  # never replayed
    said = [line for line in mounted.log().splitlines() if "nothing can be uploaded any" in line]
    assert len(said) == 1, said  # the store's fate is told once (each failed upload names its file)
