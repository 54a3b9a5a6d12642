"""``memfs status`` finds what runs: every mount of this user without an argument, the mount
holding a path inside it, and figures as of the moment it is asked."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from kit.mounts import MountedStore, memfs
from kit.waiting import wait_for
from memfs.mount.statedir import state_path

pytestmark = pytest.mark.fuse


def test_status_without_argument_lists_every_mount(
    mount_factory: Callable[..., MountedStore],
) -> None:
    first = mount_factory(memories={"/a.md": "alpha\n"})
    second = mount_factory()
    listed = memfs("status", env=first.env)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    for mounted in (first, second):
        (line,) = [line for line in lines if f" {mounted.path} " in line]
        assert line.startswith("mount ") and mounted.store_id in line and ": ok;" in line
    as_json = json.loads(memfs("status", "--json", env=first.env).stdout)
    ours = {doc["mountpoint"]: doc for doc in as_json if doc["kind"] == "mount"}
    assert ours[str(first.path)]["store_id"] == first.store_id
    assert ours[str(second.path)]["store_id"] == second.store_id


def test_status_of_a_path_inside_a_mount_reports_that_mount(mount: MountedStore) -> None:
    (mount.path / "notes").mkdir()
    (mount.path / "notes" / "a.md").write_text("alpha\n")
    inside = memfs("status", str(mount.path / "notes" / "a.md"), "--json", env=mount.env)
    assert inside.returncode == 0, inside.stderr
    assert json.loads(inside.stdout)["mountpoint"] == str(mount.path)


def test_status_figures_are_current_when_printed(
    mount_factory: Callable[..., MountedStore],
) -> None:
    mounted = mount_factory(memories={"/a.md": "alpha\n"})
    status_file = state_path(str(mounted.path), "status")
    # just after the daemon wrote its status file, so that the next write is a second away
    written = status_file.stat().st_mtime_ns
    wait_for(lambda: status_file.stat().st_mtime_ns != written, timeout=5)
    before = json.loads(status_file.read_text())["requests"]["total"]
    assert (mounted.path / "a.md").read_text() == "alpha\n"  # not cached: one more request
    doc = mounted.status()
    assert doc["requests"]["total"] > before


def test_a_store_mounted_twice_gets_a_warning(
    mount_factory: Callable[..., MountedStore],
) -> None:
    first = mount_factory()
    other = mount_factory()  # another store: no warning
    second = mount_factory(store_id=first.store_id, mount=False)
    again = second.mount()
    assert again.returncode == 0, again.stderr  # a warning, not a refusal
    (line,) = again.stderr.splitlines()
    assert line.startswith("memfs mount: warning: store ") and first.store_id in line
    assert f"also mounted at {first.path};" in line and str(other.path) not in line
    third = mount_factory(mount=False)
    alone = third.mount()
    assert alone.returncode == 0 and alone.stderr == ""
