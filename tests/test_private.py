"""``memfs.host.private``: how memfs writes where another user may plant something; and
``memfs.mount.logfile``: the daemon's rotating log stays private and bounded."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from memfs.host.private import NotPrivateError, create_file, open_append, replace_file
from memfs.mount.logfile import PrivateRotatingFileHandler

NOBODY = 65534


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


def test_a_directory_reached_through_another_users_link_is_refused(tmp_path: Path) -> None:
    """A link in the path that another user owns could point anywhere: never followed (a link
    of ours, or root's, is: /var/run -> /run)."""
    if os.getuid() != 0:
        pytest.skip("only root can give a link to another user")
    real = tmp_path / "real"
    real.mkdir()
    theirs, ours = tmp_path / "theirs", tmp_path / "ours"
    os.symlink(real, theirs)
    os.lchown(theirs, NOBODY, NOBODY)
    os.symlink("real", ours)
    with pytest.raises(NotPrivateError) as refused:
        replace_file(theirs / "prompt.md", b"x", "prompt file")
    assert str(refused.value) == (
        f"the prompt file {theirs}/prompt.md is reached through {theirs}, a symbolic link of "
        f"uid {NOBODY}: memfs never follows a link another user could have made"
    )
    replace_file(ours / "deeper" / "prompt.md", b"y", "prompt file", create_mode=0o755)
    assert (real / "deeper" / "prompt.md").read_bytes() == b"y"
    assert os.listdir(real) == ["deeper"]


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o1777])
def test_a_directory_others_can_write_needs_the_sticky_bit(tmp_path: Path, mode: int) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    writers = (
        lambda: replace_file(shared / "a", b"1", "file"),
        lambda: create_file(shared / "b", b"2", "copy"),
        lambda: os.close(open_append(shared / "c", "log")),
    )
    for write in writers:
        if mode & 0o1000:
            write()
        else:
            with pytest.raises(NotPrivateError, match="other users can write to"):
                write()
    assert len(os.listdir(shared)) == (3 if mode & 0o1000 else 0)


def test_a_log_that_is_not_a_plain_file_of_ours_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # no reader: opening it for writing without O_NONBLOCK would hang
    with pytest.raises(NotPrivateError, match="cannot open the log"):
        open_append(fifo, "log")
    if os.getuid() == 0:
        theirs = tmp_path / "theirs.log"
        theirs.write_text("")
        os.chown(theirs, NOBODY, NOBODY)
        with pytest.raises(NotPrivateError, match=f"owned by uid {NOBODY}, not us"):
            open_append(theirs, "log")
