"""``memfs umount`` and ``memfs session stop`` show how many files are left to upload while a
slow final flush runs, on a terminal only."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kit.mounts import MountedStore, memfs

pytestmark = pytest.mark.fuse

FILES = 3


def _mount_with_pending_saves(make: Callable[..., MountedStore]) -> MountedStore:
    """A mount holding FILES saves that only the final flush uploads (``--update-delay 60``)."""
    mounted = make("--update-delay", "60", memories={f"/f{n}.md": "old\n" for n in range(FILES)})
    for n in range(FILES):
        (mounted.path / f"f{n}.md").write_text(f"{n}\n")
    return mounted


def _on_a_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run ``memfs ARGS`` with its stderr on a pseudo-terminal; its exit code and output."""
    main, side = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memfs", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=side,
    )
    os.close(side)
    output = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # EIO: the terminal's last writer is gone
            break
        if not chunk:
            break
        output += chunk
    os.close(main)
    return proc.wait(60), output.decode("utf-8", "replace")


def test_umount_shows_files_left_on_a_terminal_and_nothing_otherwise(
    faulty_server: Any, faulty_mount: Callable[..., MountedStore]
) -> None:
    on_terminal = _mount_with_pending_saves(faulty_mount)
    in_script = _mount_with_pending_saves(faulty_mount)
    faulty_server.set_faults("latency=2")  # each upload takes 2 s: the flush outlasts 1 s
    code, output = _on_a_terminal(["umount", str(on_terminal.path)], on_terminal.env)
    assert code == 0, output
    assert "\rmemfs umount: flushing, " in output and " file(s) left to upload" in output
    assert output.endswith("\r\x1b[K")  # the line is erased at the end
    quiet = memfs("umount", str(in_script.path), env=in_script.env)
    assert quiet.returncode == 0 and quiet.stderr == ""
    # its flush was as slow as the one that showed progress: the same saves waited for it
    assert f"flushing {FILES} pending uploads" in in_script.log()
    faulty_server.set_faults("none")
    for mounted in (on_terminal, in_script):
        assert mounted.content("/f2.md") == "2\n"


def test_session_stop_shows_files_left_on_a_terminal(
    faulty_server: Any, faulty_sdk: Any, tmp_path: Path
) -> None:
    store = faulty_sdk.beta.memory_stores.create(name=f"progress {uuid.uuid4().hex[:8]}")
    for n in range(FILES):
        faulty_sdk.beta.memory_stores.memories.create(store.id, path=f"/f{n}.md", content="old\n")
    env = faulty_server.client_env()
    env["MEMFS_STATE_DIR"] = str(tmp_path / "state")
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg-cache")
    config = tmp_path / "session.json"
    config.write_text(
        json.dumps({"resources": [{"type": "memory_store", "memory_store_id": store.id}]})
    )
    root = tmp_path / "memory"
    started = memfs("session", "--config", str(config), "--root", str(root), "--detach", env=env)
    try:
        assert started.returncode == 0, started.stderr
        (mount_point,) = [p for p in root.iterdir() if p.is_dir()]
        for n in range(FILES):
            (mount_point / f"f{n}.md").write_text(f"{n}\n")
        faulty_server.set_faults("latency=3")  # the uploads, due in 0.5 s, outlast the stop's 1 s
        code, output = _on_a_terminal(["session", "stop", "--root", str(root)], env)
        assert code == 0, output
        assert "\rmemfs session: flushing, " in output and " file(s) left to upload" in output
    finally:
        faulty_server.set_faults("none")
        if (tmp_path / "state").exists() and any((tmp_path / "state").glob("*.json")):
            memfs("session", "stop", "--root", str(root), env=env)
        mounts = Path("/proc/self/mounts").read_text().splitlines()
        for point in [line.split()[1] for line in mounts if str(root) in line]:
            subprocess.run(["fusermount3", "-uz", point], capture_output=True, check=False)
