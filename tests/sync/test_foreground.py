"""``memfs sync`` in the foreground on a terminal: its status line, and Ctrl-C (SIGINT) that
uploads what is pending and exits 0."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import signal
import subprocess
import sys
import time
from collections.abc import Callable

from kit.mounts import daemon_alive, memfs
from kit.synced import SyncedDir
from kit.waiting import wait_for

Factory = Callable[..., SyncedDir]


def test_foreground_status_line_and_sigint(sync_factory: Factory) -> None:
    synced = sync_factory(start=False, memories={"/a.md": "a\n"})
    leader, follower = pty.openpty()
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memfs",
            "sync",
            synced.store_id,
            str(synced.path),
            *synced.extra_args,
        ],
        env=synced.env,
        stdin=follower,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    output = b""
    try:

        def line_shown() -> bool:
            nonlocal output
            with contextlib.suppress(OSError):
                output += os.read(leader, 65536)
            return b"memfs sync " in output and b"files" in output

        os.set_blocking(leader, False)
        wait_for(line_shown, timeout=20)
        synced.local("/typed.md").write_text("written, then Ctrl-C\n")
        child.send_signal(signal.SIGINT)
        status = child.wait(timeout=40)
        with contextlib.suppress(OSError):
            output += os.read(leader, 65536)
        assert status == 0, output.decode(errors="replace")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        os.close(leader)
    assert synced.content("/typed.md") == "written, then Ctrl-C\n"
    assert time.time() > 0


def test_umount_of_a_synced_directory_stops_its_sync(sync_factory: Factory) -> None:
    synced = sync_factory()
    synced.local("/before-umount.md").write_text("saved by the stop\n")
    result = memfs("umount", str(synced.path), "--json", env=synced.env)
    assert result.returncode == 0, result.stderr
    assert "synced directory" in result.stderr
    assert json.loads(result.stdout)["pending"] == []
    assert synced.content("/before-umount.md") == "saved by the stop\n"
    wait_for(lambda: not daemon_alive(synced.pid or 0))
