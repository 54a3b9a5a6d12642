"""Audit fixes that need a server fault: one final flush per stop, the last error in the report.

Real mounts (``memfs mount`` subprocesses) on a private server with the fault middleware.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from mount.conftest import MountedStore, memfs, wait_for

pytestmark = pytest.mark.fuse


def test_stop_during_outage_flushes_and_reports_once(
    faulty_server: Any, faulty_mount: Callable[..., MountedStore]
) -> None:
    mounted = faulty_mount("--update-delay", "30")
    (mounted.path / "kept.md").write_text("precious\n")
    faulty_server.set_faults("outage=1")
    result = memfs("umount", str(mounted.path), env=mounted.env, timeout=90)
    assert result.returncode == 1
    wait_for(lambda: not os.path.ismount(mounted.path), timeout=10)
    log = mounted.log()
    assert log.count("flushing 1 pending uploads") == 1, log
    assert log.count("change(s) not uploaded") == 1, log
