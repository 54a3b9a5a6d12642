"""The unmount report: a JSON document the daemon leaves (0600) and ``memfs umount [--json]``
prints, built from what ``memfs status`` shows, so the two agree (docs/semantics.md,
"Processes")."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kit.mounts import MountedStore, memfs
from kit.waiting import wait_for
from memfs.mount.daemon import state_path

pytestmark = pytest.mark.fuse


def _refuse_a_file(m: MountedStore) -> dict[str, Any]:
    """Write a file that is not UTF-8 (EILSEQ at close: refused, kept); the status then."""
    with pytest.raises(OSError) as refused, open(m.path / "bin.md", "wb") as stream:
        stream.write(b"\xff\xfe not text\n")
    assert refused.value.errno == errno.EILSEQ
    status: dict[str, Any] = wait_for(lambda: (s := m.status())["refused"]["files"] and s)
    return status


def test_umount_json_lists_what_status_listed_and_exits_1(mount: MountedStore) -> None:
    (mount.path / "fine.md").write_text("uploaded at unmount\n")
    status = _refuse_a_file(mount)
    result = memfs("umount", "--json", str(mount.path), env=mount.env)
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["store_id"] == mount.store_id and report["store_name"] == mount.store_name
    assert report["mountpoint"] == str(mount.path)
    assert report["pending"] == [] and report["conflicts"] == [] and report["errors"] == []
    assert report["store_gone"] is None and report["orphaned"] is None
    [refused] = report["refused"]
    assert [refused["path"]] == status["refused"]["files"] == ["/bin.md"]
    assert refused["why"] == "not UTF-8 text (EILSEQ)"
    assert Path(refused["copy"]).read_bytes() == b"\xff\xfe not text\n"
    assert mount.content("/fine.md") == "uploaded at unmount\n"
    assert not state_path(str(mount.path), "report.json").exists()  # read once


def test_clean_umount_json_is_an_empty_report(mount: MountedStore) -> None:
    (mount.path / "fine.md").write_text("uploaded at unmount\n")
    result = memfs("umount", "--json", str(mount.path), env=mount.env)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["type"] == "memfs_unmount_report"
    assert not any(report[key] for key in ("pending", "refused", "conflicts", "errors"))
    assert mount.content("/fine.md") == "uploaded at unmount\n"


def test_a_daemon_unmounted_by_fusermount_leaves_its_report(mount: MountedStore) -> None:
    _refuse_a_file(mount)
    assert mount.pid is not None
    subprocess.run(["fusermount3", "-u", str(mount.path)], check=True, capture_output=True)
    report_file = state_path(str(mount.path), "report.json")
    wait_for(report_file.exists, timeout=20)
    assert stat.S_IMODE(os.stat(report_file).st_mode) == 0o600
    # `memfs umount` of the mount point, unmounted already, still shows what went wrong
    result = memfs("umount", str(mount.path), env=mount.env)
    assert result.returncode == 1
    assert "is not mounted" in result.stderr
    assert "1 file(s) refused by the store; never uploaded:" in result.stderr
    assert "refused /bin.md: not UTF-8 text (EILSEQ); never uploaded, a copy is in" in result.stderr
    assert not report_file.exists()
