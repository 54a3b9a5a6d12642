"""Directories and files that only the user running memfs may change.

A mount reads back what it finds in its state and cache directories: a pid file that
``memfs umount`` signals, journal records that it uploads with the user's key. Anything another
local user could have put there (a directory they own or can write to, a record they planted, a
symbolic link) is refused, with one line saying which path and why (``NotPrivateError``), never
used. ``private_dir`` makes or checks a directory, ``check_private_file`` a file before it is
read, ``create_private_file`` makes a file (a log) that only its owner can read,
``write_private_file`` replaces one (a report) atomically.

This module must not know what the paths are for: callers name them (``what``) and say why
they matter (``why``), and turn the error into their own.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)


class NotPrivateError(Exception):
    """A path is not ours alone; the message is one line for a person."""


def _check(path: Path, info: os.stat_result, what: str, why: str) -> None:
    if info.st_uid != os.getuid():
        raise NotPrivateError(f"the {what} {path} is owned by uid {info.st_uid}, not us{why}")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise NotPrivateError(f"the {what} {path} is writable by other users{why}")


def private_dir(
    path: Path, what: str, *, why: str = "", create: bool = True, tighten: bool = True
) -> None:
    """Create ``path`` 0700 (its parents as usual), or refuse it unless it is a directory of
    ours that nobody else can write to. ``tighten``: an existing one of ours becomes 0700 (a
    directory the user named may be left as it is). ``why`` ends each message (", …")."""
    if create:
        try:
            path.mkdir(parents=True, mode=0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            raise NotPrivateError(f"cannot create the {what} {path}: {exc.strerror}") from None
    try:
        info = path.lstat()
    except OSError as exc:
        raise NotPrivateError(f"cannot use the {what} {path}: {exc.strerror}") from None
    if stat.S_ISLNK(info.st_mode):
        raise NotPrivateError(f"the {what} {path} is a symbolic link{why}")
    if not stat.S_ISDIR(info.st_mode):
        raise NotPrivateError(f"the {what} {path} is not a directory")
    _check(path, info, what, why)
    if tighten and stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)  # ours: what is in it is nobody else's business


def check_private_file(path: Path, what: str, *, why: str = "") -> None:
    """Refuse ``path`` unless it is a regular file (not a link) of ours that only we can
    change."""
    try:
        info = path.lstat()
    except OSError as exc:
        raise NotPrivateError(f"cannot use the {what} {path}: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise NotPrivateError(f"the {what} {path} is not a regular file{why}")
    _check(path, info, what, why)


def create_private_file(path: Path, what: str) -> None:
    """Make sure ``path`` exists as a file only we can read and write (0600), for appending.

    An existing file of ours is made 0600; one that is not ours, or not a regular file, is
    refused (a log planted as a link would make us write through it)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise NotPrivateError(f"cannot open the {what} {path}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotPrivateError(f"the {what} {path} is not a regular file")
        if info.st_uid != os.getuid():
            raise NotPrivateError(f"the {what} {path} is owned by uid {info.st_uid}, not us")
        if stat.S_IMODE(info.st_mode) != 0o600:
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def write_private_file(path: Path, data: bytes) -> None:
    """Replace ``path`` atomically by a file holding ``data`` that only we can read (0600):
    a reader sees the old file or the whole new one, never a part."""
    temp = path.with_name(path.name + ".tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an earlier temp file of other modes is made ours alone
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    os.replace(temp, path)
