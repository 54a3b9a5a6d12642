"""Directories and files that only the user running memfs may change, and the one way memfs
writes a file where another user might have planted something.

A mount reads back what it finds in its state and cache directories: a pid file that
``memfs umount`` signals, journal records that it uploads with the user's key. Anything another
local user could have put there (a directory they own or can write to, a record they planted, a
symbolic link) is refused, with one line saying which path and why (``NotPrivateError``), never
used. ``private_dir`` makes or checks a directory, ``check_private_file`` a file before it is
read.

Every file memfs writes (as root, often) goes through this module too, so that it never writes
through a link another user planted (docs/sandbox.md, "Files memfs writes as root"):

- the directory is reached without following a symbolic link that another user owns
  (``_open_directory``; links of root or of ours are followed) and then used by descriptor, so
  a component swapped afterwards changes nothing;
- a directory that other users can write to without the sticky bit is refused: they could swap
  the file under us;
- a whole file (``replace_file``: a prompt, a report, a status, a state file) is written to a
  new temporary file (``O_CREAT | O_EXCL | O_NOFOLLOW`` in the directory's descriptor, an
  unguessable name) and renamed over the target: a link planted at the target is replaced,
  never followed, and nothing is ever opened at a predictable name;
- a new file that must not replace anything (``create_file``: kept and orphaned copies) is
  opened ``O_CREAT | O_EXCL | O_NOFOLLOW``;
- a log (``open_append``) is opened ``O_APPEND | O_NOFOLLOW | O_NONBLOCK``, never truncated,
  and refused unless it is a regular file of ours with one name (a hard link planted at its
  name would have us append to, and chmod, the file it names).

Where the platform lacks a call (``memfs.host.portable``; docs/security.md, "Platforms without
FUSE"): the temporary file is created by its descriptor-relative name (``openat``), so no
``/proc`` is needed (macOS); without descriptor-relative calls and uids (Windows) the directory
is reached by path, each component ``lstat``ed to be no link, ownership is left to the ACLs,
and a link planted at a name is still never opened (``O_EXCL``) nor written through.

This module must not know what the paths are for: callers name them (``what``) and say why
they matter (``why``), and turn the error into their own.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import stat
from pathlib import Path

from memfs.host.portable import CLOEXEC, NOFOLLOW, user_id

log = logging.getLogger(__name__)


class NotPrivateError(OSError):
    """A path is not ours alone, or not safe to write; the message is one line for a person.

    An ``OSError``: a writer that copes with a failed write (a status written again next
    second, a copy not kept) copes with a refused one alike."""


def _check(path: Path, info: os.stat_result, what: str, why: str) -> None:
    uid = user_id()
    if uid is None:  # Windows: no owner to compare, and its mode bits say only "read-only"
        return
    if info.st_uid != uid:
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


# Descriptor-relative calls (openat, mkdirat, renameat...): every POSIX system; not Windows,
# where a directory is a path (``Directory``: an open descriptor, or a checked path).
_AT_CALLS = os.open in os.supports_dir_fd and hasattr(os, "O_DIRECTORY")
_DIRECTORY_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | CLOEXEC
Directory = int | str
_MAX_LINKS = 40  # as the kernel's ELOOP limit


def _trusted_link(info: os.stat_result) -> bool:
    """A link root or we made: no other user could have planted it."""
    return info.st_uid in (0, user_id())


def _open_directory(path: Path, what: str, *, create_mode: int | None) -> int:
    """A descriptor of the directory of ``path``, reached one component at a time
    (``O_NOFOLLOW``) from ``/``; a symbolic link on the way is followed only if root or we own
    it. ``create_mode``: make missing directories with this mode (else one is refused)."""
    todo = list(reversed(Path(os.path.abspath(path)).parent.parts[1:]))
    fd = os.open("/", _DIRECTORY_FLAGS)
    here = "/"  # for messages: where the walk is
    links = 0
    try:
        while todo:
            name = todo.pop()
            if name in ("", "."):
                continue
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                if create_mode is None:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, create_mode, dir_fd=fd)
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                link = os.path.join(here, name)
                if not _trusted_link(info):
                    raise NotPrivateError(
                        f"the {what} {path} is reached through {link}, a symbolic link of uid "
                        f"{info.st_uid}: memfs never follows a link another user could have made"
                    )
                links += 1
                if links > _MAX_LINKS:
                    raise NotPrivateError(f"cannot use the {what} {path}: too many links")
                target = os.readlink(name, dir_fd=fd)
                if target.startswith("/"):
                    os.close(fd)
                    fd = os.open("/", _DIRECTORY_FLAGS)
                    here = "/"
                todo.extend(reversed(Path(target).parts[1 if target.startswith("/") else 0 :]))
                continue
            inner = os.open(name, _DIRECTORY_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = inner
            here = os.path.normpath(os.path.join(here, name))
    except NotPrivateError:
        os.close(fd)
        raise
    except OSError as exc:
        os.close(fd)
        raise NotPrivateError(f"cannot use the {what} {path}: {exc.strerror}") from None
    return fd


def _open_parent(path: Path, what: str, *, create_mode: int | None) -> Directory:
    """The directory of ``path`` as ``_open_directory`` reaches it, refused if users other
    than its owner may write to it without the sticky bit (they could swap our file)."""
    if not _AT_CALLS:
        return _parent_by_path(path, what, create_mode=create_mode)
    fd = _open_directory(path, what, create_mode=create_mode)
    info = os.fstat(fd)
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not info.st_mode & stat.S_ISVTX:
        os.close(fd)
        raise NotPrivateError(
            f"the {what} {path} is in a directory other users can write to (mode "
            f"{stat.S_IMODE(info.st_mode):04o}, no sticky bit): put it in a directory only its "
            "owner can write to"
        )
    return fd


def _parent_by_path(path: Path, what: str, *, create_mode: int | None) -> str:
    """Windows (no descriptor-relative calls): the directory of ``path``, each component
    checked to be a directory and no link (a symbolic link or a junction), missing ones made
    with ``create_mode`` (None: refused)."""
    parent = Path(os.path.abspath(path)).parent
    current = Path(parent.anchor)
    for part in parent.parts[1:]:
        current = current / part
        try:
            try:
                info = os.lstat(current)
            except FileNotFoundError:
                if create_mode is None:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(current, create_mode)
                info = os.lstat(current)
        except OSError as exc:
            raise NotPrivateError(f"cannot use the {what} {path}: {exc.strerror}") from None
        junction = getattr(os.path, "isjunction", lambda _: False)(current)
        if stat.S_ISLNK(info.st_mode) or junction:
            raise NotPrivateError(
                f"the {what} {path} is reached through {current}, a link: memfs never follows one"
            )
        if not stat.S_ISDIR(info.st_mode):
            raise NotPrivateError(f"cannot use the {what} {path}: {current} is not a directory")
    return str(parent)


def _open_in(directory: Directory, name: str, flags: int, mode: int) -> int:
    if isinstance(directory, int):
        return os.open(name, flags, mode, dir_fd=directory)
    return os.open(os.path.join(directory, name), flags, mode)


def _rename_in(directory: Directory, source: str, target: str) -> None:
    if isinstance(directory, int):
        os.rename(source, target, src_dir_fd=directory, dst_dir_fd=directory)
    else:
        os.replace(os.path.join(directory, source), os.path.join(directory, target))


def _unlink_in(directory: Directory, name: str) -> None:
    if isinstance(directory, int):
        os.unlink(name, dir_fd=directory)
    else:
        os.unlink(os.path.join(directory, name))


def _close(directory: Directory) -> None:
    if isinstance(directory, int):
        os.close(directory)


def _new_temp(directory: Directory, name: str) -> tuple[int, str]:
    """A new file ``.<name>.<random>.tmp`` in ``directory``, 0600, opened ``O_CREAT | O_EXCL
    | O_NOFOLLOW`` (as ``tempfile.mkstemp``, but by descriptor: no ``/proc`` needed)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | NOFOLLOW | CLOEXEC | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        temp = f".{name}.{secrets.token_hex(4)}.tmp"
        try:
            return _open_in(directory, temp, flags, 0o600), temp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {name}")


def check_directory_of(path: Path, what: str, *, create_mode: int | None = None) -> None:
    """Refuse now (``NotPrivateError``) the directory that ``replace_file``, ``create_file``
    or ``open_append`` would refuse for ``path`` later: a check before anything starts."""
    _close(_open_parent(path, what, create_mode=create_mode))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _check_own_file(fd: int, path: Path, what: str) -> None:
    """Refuse what ``fd`` opened unless it is a regular file of ours with one name."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise NotPrivateError(f"the {what} {path} is not a regular file")
    uid = user_id()
    if uid is not None and info.st_uid != uid:
        raise NotPrivateError(f"the {what} {path} is owned by uid {info.st_uid}, not us")
    if info.st_nlink != 1:
        raise NotPrivateError(
            f"the {what} {path} has {info.st_nlink} names (a hard link): memfs never writes to "
            "a file another name reaches"
        )


def open_append(path: Path, what: str, *, create_mode: int | None = None) -> int:
    """A descriptor of ``path`` for appending (a log), created 0600 if missing; an existing
    one is made 0600. Refused (``NotPrivateError``) as the module docstring says: never a
    link, another user's file, a file with two names, or a directory others could swap it in.
    ``create_mode``: for missing directories above it (None: refuse them)."""
    directory = _open_parent(path, what, create_mode=create_mode)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | NOFOLLOW | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = _open_in(directory, path.name, flags | CLOEXEC, 0o600)  # NONBLOCK: a planted FIFO
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a link
            raise NotPrivateError(
                f"the {what} {path} is a symbolic link: memfs never writes through one"
            ) from None
        raise NotPrivateError(f"cannot open the {what} {path}: {exc.strerror}") from None
    finally:
        _close(directory)
    try:
        _check_own_file(fd, path, what)
        if not _AT_CALLS:
            return fd  # Windows: no FIFOs to fear, no mode bits beyond read-only
        os.set_blocking(fd, True)
        if stat.S_IMODE(os.fstat(fd).st_mode) != 0o600:
            os.fchmod(fd, 0o600)
    except BaseException:
        os.close(fd)
        raise
    return fd


def create_private_file(path: Path, what: str) -> None:
    """Make sure ``path`` exists as a log only we can read and write (0600), as
    ``open_append`` opens it (``NotPrivateError`` otherwise)."""
    os.close(open_append(path, what))


def replace_file(
    path: Path,
    data: bytes,
    what: str,
    *,
    mode: int = 0o600,
    durable: bool = False,
    create_mode: int | None = None,
) -> None:
    """Replace ``path`` atomically by a file of ``mode`` holding ``data``: a reader sees the
    old file or the whole new one, never a part, and a link planted at ``path`` is replaced,
    never written through. ``durable``: on disk (file and directory synced) when this returns.
    ``create_mode``: make missing directories above it with this mode (None: refuse them).
    ``NotPrivateError`` if the directory is refused; ``OSError`` if the write fails."""
    directory = _open_parent(path, what, create_mode=create_mode)
    try:
        # made and renamed in the directory we walked to (its descriptor): whatever happens
        # to the path meanwhile, the file lands there
        fd, name = _new_temp(directory, path.name)
        try:
            try:
                if _AT_CALLS:
                    os.fchmod(fd, mode)
                _write_all(fd, data)
                if durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
            _rename_in(directory, name, path.name)
        except BaseException:
            with contextlib.suppress(OSError):
                _unlink_in(directory, name)
            raise
        if durable and isinstance(directory, int):
            os.fsync(directory)
    finally:
        _close(directory)


def create_file(path: Path, data: bytes, what: str, *, create_mode: int | None = 0o700) -> None:
    """Write ``data`` to the new file ``path`` (0600), durably, never over anything already
    there (``FileExistsError``): a copy handed to the user. ``NotPrivateError`` if the directory
    is refused; ``OSError`` if the write fails."""
    directory = _open_parent(path, what, create_mode=create_mode)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | CLOEXEC
        fd = _open_in(directory, path.name, flags | getattr(os, "O_BINARY", 0), 0o600)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
    finally:
        _close(directory)
