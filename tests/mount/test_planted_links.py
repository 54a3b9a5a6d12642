"""A mount daemon never writes through a link planted where it writes (issue 20): its status
file and unmount report are written to a new temporary file and renamed (no predictable
``.tmp`` name opened with ``O_TRUNC``, which a hard link turns into a write to the file it
names), and a ``--log-file`` that is a link is refused with one line."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from kit.mounts import MountedStore, memfs
from kit.planted import plant, untouched, victim
from kit.waiting import wait_for
from memfs.mount.daemon import state_path

pytestmark = pytest.mark.fuse


def test_status_and_report_never_write_through_a_hard_link(
    mount_factory: Callable[..., MountedStore], tmp_path: Path
) -> None:
    m = mount_factory(mount=False)
    target = victim(tmp_path / "victim")
    # the names an earlier memfs wrote the status and the report to before renaming them
    planted = [state_path(str(m.path), suffix) for suffix in ("tmp", "report.json.tmp")]
    for name in planted:
        plant("hard link", name, target)
    try:
        assert m.mount().returncode == 0, m.log()
        (m.path / "note.md").write_text("hello\n")
        wait_for(lambda: m.status()["mountpoint"] == str(m.path))
        done = m.umount()
        assert done.returncode == 0, done.stderr
        assert untouched(target)
        assert m.content("/note.md") == "hello\n"
    finally:
        for name in planted:
            name.unlink(missing_ok=True)


@pytest.mark.parametrize("planted", ["symbolic link", "hard link"])
def test_a_mount_log_planted_as_a_link_is_refused(
    mount_factory: Callable[..., MountedStore], tmp_path: Path, planted: str
) -> None:
    m = mount_factory(mount=False)
    log_file = tmp_path / "planted.log"
    target = victim(tmp_path / "victim")
    why = plant(planted, log_file, target)
    done = memfs("mount", m.store_id, str(m.path), "--log-file", str(log_file), env=m.env)
    assert untouched(target)
    assert (done.returncode, done.stderr) == (1, f"memfs mount: the log file {log_file} {why}\n")
    assert not os.path.ismount(m.path)
