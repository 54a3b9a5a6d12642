"""A mount ended by a signal during an outage: its final flush retries until the server is back
(within its 30 s), and what was changed on the mount while that flush ran is uploaded too."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from kit.journals import journal_records
from kit.mounts import MountedStore, daemon_alive
from kit.waiting import wait_for

from .helpers import FaultyServer

pytestmark = pytest.mark.fuse


def test_a_signal_flush_outlasts_an_outage_and_takes_what_changed_meanwhile(
    faulty_server: FaultyServer, faulty_mount: Callable[..., MountedStore], tmp_path: Path
) -> None:
    m = faulty_mount("--grace", "600", memories={"/a.md": "A\n", "/b.md": "B\n", "/c.md": "C\n"})
    pid = m.pid
    assert pid is not None
    assert sorted(os.listdir(m.path)) == ["a.md", "b.md", "c.md"]  # known: no lookup later
    os.unlink(m.path / "a.md")
    faulty_server.set_faults("outage=1")
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: "failed (attempt 1), retrying" in m.log(), timeout=20)  # client gave up
    # the flush tries again, and the mount still serves meanwhile
    os.rename(m.path / "b.md", m.path / "b2.md")
    os.unlink(m.path / "c.md")
    assert journal_records(tmp_path / "cache") == 3
    faulty_server.set_faults("none")
    wait_for(lambda: not daemon_alive(pid), timeout=40)
    assert m.paths() == {"/b2.md"}
    assert journal_records(tmp_path / "cache") == 0
