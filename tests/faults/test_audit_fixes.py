"""Audit fixes that need a server fault: one final flush per stop, the last error in the report.

Real mounts (``memfs mount`` subprocesses) on a private server with the fault middleware.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

from kit.mounts import MountedStore, memfs
from kit.waiting import wait_for

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


def test_report_shows_the_last_error_of_an_unreachable_server(
    faulty_server: Any, faulty_mount: Callable[..., MountedStore]
) -> None:
    mounted = faulty_mount("--update-delay", "30")
    (mounted.path / "kept.md").write_text("precious\n")
    faulty_server.set_faults("outage=1")
    result = memfs("umount", str(mounted.path), env=mounted.env, timeout=90)
    assert result.returncode == 1
    [line] = [line for line in result.stderr.splitlines() if "kept.md" in line]
    assert "not uploaded yet" not in line, result.stderr
    assert "Error" in line, result.stderr  # e.g. "ApiConnectionError: ..." or a 5xx
