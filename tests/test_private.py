"""``memfs.mount.logfile``: the daemon's rotating log stays private and bounded."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from memfs.mount.logfile import PrivateRotatingFileHandler


def test_rotating_log_is_bounded_and_every_part_is_private(tmp_path: Path) -> None:
    path = tmp_path / "daemon.log"
    old_umask = os.umask(0o022)  # what a new part would get from a plain RotatingFileHandler
    handler = PrivateRotatingFileHandler(path, "log file", max_bytes=1000, backups=2)
    logger = logging.getLogger("memfs.test.rotation")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        for n in range(200):
            logger.warning("line %03d %s", n, "x" * 40)
    finally:
        logger.removeHandler(handler)
        handler.close()
        os.umask(old_umask)
    parts = sorted(p.name for p in tmp_path.iterdir())
    assert parts == ["daemon.log", "daemon.log.1", "daemon.log.2"]
    for part in tmp_path.iterdir():
        assert stat.S_IMODE(part.stat().st_mode) == 0o600, part
        assert part.stat().st_size <= 1000
    assert "line 199" in path.read_text()
