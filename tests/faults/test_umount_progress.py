"""``memfs umount`` shows how many files are left to upload while a slow final flush runs, on a
terminal only."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from support.mounts import MountedStore, memfs

pytestmark = pytest.mark.fuse

FILES = 3


def _mount_with_pending_saves(make: Callable[..., MountedStore]) -> MountedStore:
    """A mount holding FILES saves that only the final flush uploads (``--update-delay 60``)."""
    mounted = make("--update-delay", "60", memories={f"/f{n}.md": "old\n" for n in range(FILES)})
    for n in range(FILES):
        (mounted.path / f"f{n}.md").write_text(f"{n}\n")
    return mounted


def _umount_on_a_terminal(mounted: MountedStore) -> tuple[int, str]:
    """Run ``memfs umount`` with its stderr on a pseudo-terminal; its exit code and output."""
    main, side = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memfs", "umount", str(mounted.path)],
        env=mounted.env,
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
    code, output = _umount_on_a_terminal(on_terminal)
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
