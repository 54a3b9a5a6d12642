"""A running session found without ``--root``: ``memfs session status`` and ``stop`` act on the
one that runs, name each when several do; and a detached session says where it logs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kit.mounts import MountedStore

from .helpers import (
    Api,
    mounts_under,
    run_memfs,
    slug_of,
    stop_and_unmount,
    unique,
    write_config,
)

pytestmark = pytest.mark.fuse


def _start(tmp_path: Path, root: Path, env: dict[str, str], store_id: str) -> str:
    """Start a detached session of one store at ``root``; its stderr."""
    config = write_config(
        tmp_path / f"{root.name}.json", [{"type": "memory_store", "memory_store_id": store_id}]
    )
    done = run_memfs(["session", "--config", str(config), "--root", str(root), "--detach"], env)
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_status_and_stop_find_the_running_session_without_root(
    tmp_path: Path, root: Path, session_env: dict[str, str], api: Api
) -> None:
    other = tmp_path / "other"
    try:
        _start(tmp_path, root, session_env, api.create_store(unique("Notes"))["id"])
        _start(tmp_path, other, session_env, api.create_store(unique("Wiki"))["id"])
        several = run_memfs(["session", "status"], session_env)
        assert several.returncode == 1
        assert "2 sessions run" in several.stderr and "name one with --root" in several.stderr
        assert str(root) in several.stderr and str(other) in several.stderr

        stopped = run_memfs(["session", "stop", "--root", str(other)], session_env, timeout=90)
        assert stopped.returncode == 0, stopped.stderr
        one = run_memfs(["session", "status", "--json"], session_env)
        assert one.returncode == 0, one.stderr
        assert json.loads(one.stdout)["root"] == str(root)

        last = run_memfs(["session", "stop"], session_env, timeout=90)
        assert last.returncode == 0, last.stderr
        assert f"unmounted under {root}" in last.stdout
        assert mounts_under(root) == []
    finally:
        stop_and_unmount(other, session_env)


def test_a_session_config_takes_store_names(
    tmp_path: Path, root: Path, session_env: dict[str, str], api: Api
) -> None:
    store = api.create_store(unique("Team Notes"))
    api.create_memory(store["id"], "/a.md", "alpha\n")
    _start(tmp_path, root, session_env, store["name"])
    assert (root / slug_of(store["name"]) / "a.md").read_text() == "alpha\n"
    state = json.loads(run_memfs(["session", "status", "--json"], session_env).stdout)
    assert [mount["memory_store_id"] for mount in state["mounts"]] == [store["id"]]


def test_a_detached_session_names_its_log_file(
    tmp_path: Path, root: Path, session_env: dict[str, str], api: Api
) -> None:
    _start(tmp_path, root, session_env, api.create_store(unique("Notes"))["id"])
    state = json.loads(
        run_memfs(["session", "status", "--root", str(root), "--json"], session_env).stdout
    )
    log_file = state["log_file"]
    assert log_file and Path(log_file).stat().st_size > 0  # it writes there
    text = run_memfs(["session", "status", "--root", str(root)], session_env).stdout
    assert f"log      {log_file}" in text
    mount = run_memfs(["status", str(root), "--json"], session_env)
    assert mount.returncode == 0, mount.stderr
    assert json.loads(mount.stdout)["log_file"] == log_file
    listed = run_memfs(["status"], session_env).stdout.splitlines()
    (line,) = [line for line in listed if f" {root} " in line]
    assert line.startswith(f"session {state['session_id']} {root}  1 stores")
    as_json = json.loads(run_memfs(["status", "--json"], session_env).stdout)
    (ours,) = [doc for doc in as_json if doc["mountpoint"] == str(root)]
    assert ours["kind"] == "session" and ours["session_id"] == state["session_id"]


def test_a_store_mounted_already_gets_a_warning_at_the_session(
    tmp_path: Path,
    root: Path,
    session_env: dict[str, str],
    mount_factory: Callable[..., MountedStore],
) -> None:
    mounted = mount_factory()
    stderr = _start(tmp_path, root, session_env, mounted.store_id)
    warnings = [line for line in stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and mounted.store_id in warnings[0]
    assert warnings[0].startswith("memfs session: warning: store ")
    assert f"also mounted at {mounted.path};" in warnings[0]
