"""Operating a mount: the API named by ``--base-url``, one-line messages for an ambiguous store
name and a dead mount point, and the per-user state directory (rotating logs, removed with a
clean unmount)."""

from __future__ import annotations

import os
import signal
import stat
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import anthropic

from kit.mounts import MountedStore, daemon_alive, memfs
from kit.waiting import wait_for
from memfs.mount.statedir import state_path


def test_mount_takes_base_url_and_never_puts_it_in_argv(
    mount_factory: Callable[..., MountedStore], server: object
) -> None:
    mounted = mount_factory(mount=False)
    url = mounted.env["ANTHROPIC_BASE_URL"]
    env = dict(mounted.env)
    del env["ANTHROPIC_BASE_URL"]
    mounted.env = env
    bad = memfs("mount", mounted.store_id, str(mounted.path), "--base-url", "ftp://x", env=env)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert bad.stderr.startswith("memfs mount: invalid --base-url 'ftp://x': ")
    result = mounted.mount("--base-url", url)
    assert result.returncode == 0, result.stderr
    assert mounted.pid is not None
    cmdline = Path(f"/proc/{mounted.pid}/cmdline").read_bytes().split(b"\0")
    assert url.encode() not in cmdline
    (mounted.path / "via-flag.md").write_text("x\n")
    mounted.settle()
    assert mounted.content("/via-flag.md") == "x\n"


def test_an_ambiguous_store_name_lists_the_matches(
    mount_factory: Callable[..., MountedStore], sdk: anthropic.Anthropic
) -> None:
    name = f"twin-{uuid.uuid4().hex[:8]}"
    ids = sorted(sdk.beta.memory_stores.create(name=name).id for _ in range(2))
    mounted = mount_factory(mount=False)
    result = memfs("mount", name, str(mounted.path), env=mounted.env)
    assert result.returncode == 1
    assert result.stderr == (
        f"memfs mount: 2 memory stores are named {name!r} ({', '.join(ids)}); use an id\n"
    ) or result.stderr == (
        f"memfs mount: 2 memory stores are named {name!r} ({', '.join(reversed(ids))}); use an id\n"
    )
    assert not os.path.ismount(mounted.path)


def test_a_dead_mount_point_says_to_run_umount(
    mount_factory: Callable[..., MountedStore],
) -> None:
    mounted = mount_factory()
    assert mounted.pid is not None
    os.kill(mounted.pid, signal.SIGKILL)
    wait_for(lambda: not daemon_alive(mounted.pid or 0))
    again = mounted.mount()
    assert again.returncode == 1
    assert again.stderr == (
        f"memfs mount: {mounted.path} is still mounted by a memfs daemon that is gone "
        f"(transport endpoint is not connected); run: memfs umount {mounted.path}\n"
    )
    status = memfs("status", str(mounted.path), env=mounted.env)
    assert status.returncode == 1 and status.stderr == (
        f"memfs status: the daemon of {mounted.path} (pid {mounted.pid}) is gone; "
        f"run: memfs umount {mounted.path}\n"
    )
    detached = memfs("umount", str(mounted.path), env=mounted.env)
    assert detached.returncode == 1 and detached.stderr.count("\n") == 1
    assert detached.stderr.startswith(f"memfs umount: unmounted {mounted.path}, whose daemon")
    assert not os.path.ismount(mounted.path) and os.listdir(mounted.path) == []
    assert not state_path(str(mounted.path), "status").exists()
    result = mounted.mount()
    assert result.returncode == 0, result.stderr


def test_a_clean_umount_removes_the_mounts_state_and_log(
    mount_factory: Callable[..., MountedStore],
) -> None:
    mounted = mount_factory(mount=False)
    point = str(mounted.path)
    result = memfs("mount", mounted.store_id, point, env=mounted.env)  # the default log
    assert result.returncode == 0, result.stderr
    log_file = state_path(point, "log")
    status = memfs("status", point, "--json", env=mounted.env)
    assert f'"log_file": "{log_file}"' in status.stdout
    info = log_file.stat()
    assert stat.S_IMODE(info.st_mode) == 0o600 and "mounted store" in log_file.read_text()
    (mounted.path / "a.md").write_text("a\n")
    assert memfs("umount", point, env=mounted.env).returncode == 0
    leftovers = [p.name for p in state_path(point, "x").parent.glob(log_file.stem + ".*")]
    assert leftovers == []
    assert mounted.content("/a.md") == "a\n"


def test_mount_prunes_what_mounts_gone_a_week_ago_left(
    mount_factory: Callable[..., MountedStore],
) -> None:
    directory = state_path("/", "log").parent
    digest = uuid.uuid4().hex[:16]
    old = [directory / f"{digest}.{suffix}" for suffix in ("log", "log.1", "status", "pid")]
    old.append(directory / f".{digest}.status.k2_x9q.tmp")  # a write cut short left it
    fresh = directory / f"{uuid.uuid4().hex[:16]}.log"
    session_log = directory / f"session-x-{digest}.log"  # a session's: never ours to prune
    week_ago = time.time() - 8 * 24 * 3600
    for path in [*old, session_log]:
        path.write_text("999999999\n")  # as a pid file: a process that does not exist
        os.utime(path, (week_ago, week_ago))
    fresh.write_text("")
    try:
        mounted = mount_factory(mount=False)
        result = memfs("mount", mounted.store_id, str(mounted.path), env=mounted.env)
        assert result.returncode == 0, result.stderr
        assert [p for p in old if p.exists()] == []
        assert fresh.exists() and session_log.exists()
    finally:
        for path in (fresh, session_log):
            path.unlink(missing_ok=True)
