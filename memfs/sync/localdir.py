"""The local side of a sync: the directory DIR, read and written without following a link.

Everything in DIR is written by the user and by any program (an agent) the user runs there, so
every byte is untrusted: a name may be a symbolic link planted to make the sync write or read
outside DIR, a file may change while it is read. This module is the only code that touches DIR:

- it never follows a symbolic link: a scan uses ``lstat`` (``os.scandir`` without following),
  a file is opened ``O_NOFOLLOW`` where the platform has it, and every directory on the way to
  a file is checked to be a real directory of DIR (a link there means the name is left alone);
- a file is replaced atomically (a temporary file in the same directory, then a rename), and
  only if the file there is still the one the caller compared (``Seen``): a program that wrote
  meanwhile wins, and its text is looked at again;
- a rescan of unchanged files reads no content: ``Seen`` (size, mtime in nanoseconds, inode
  number) says whether a file moved since it was hashed.

It knows nothing of the store: paths are store paths (``/notes/a.md``), names rules come from
the caller (``LocalNames``).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import secrets
import stat
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from memfs.core import DEFAULT_LOCAL_DIRS, DEFAULT_PATTERNS, LocalNames
from memfs.mount.busy import sync_mount

log = logging.getLogger(__name__)

# Names that live only on this machine, besides the mount's (editors' swap, lock and backup
# files, ``.git/``): what macOS and Windows leave in every folder a person opens, and the
# sync's own temporary files (``TEMP_PREFIX``).
TEMP_PREFIX = ".memfs-sync-"
SYNC_PATTERNS: tuple[str, ...] = (
    ".DS_Store",
    "._*",  # AppleDouble files on non-HFS volumes
    "Thumbs.db",
    "desktop.ini",
    ".~*",  # Office lock files
    TEMP_PREFIX + "*",
)
SYNC_LOCAL_NAMES = LocalNames(
    patterns=DEFAULT_PATTERNS + SYNC_PATTERNS, local_dirs=(*DEFAULT_LOCAL_DIRS, ".memfs")
)
# DIR's marker (a local-only name): a random token the basis names, so that a directory made
# again in its place (``rm -rf DIR``) is never taken for the one whose files went missing
MARKER = "/.memfs/sync-id"
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# one sync of the file system per pass (``make_durable``) where the platform has one; else
# (Windows) each file written is fsynced before its rename
BATCH_SYNC = hasattr(os, "sync")  # absent on Windows: lstat is checked instead
BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation


@dataclass(frozen=True)
class Seen:
    """A local file as it was when last looked at: if all three are the same, its content is
    taken to be the same (as rsync, git and every sync tool do)."""

    size: int
    mtime_ns: int
    ino: int

    @classmethod
    def of(cls, info: os.stat_result) -> Seen:
        return cls(info.st_size, info.st_mtime_ns, info.st_ino)


@dataclass(frozen=True)
class Unusable:
    """A name in DIR that is not a regular file or directory (a link, a socket...): never
    uploaded, never replaced; listed in ``memfs status`` with ``why``."""

    why: str


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class LocalDir:
    """The directory DIR (module docstring)."""

    def __init__(self, root: Path, names: LocalNames = SYNC_LOCAL_NAMES) -> None:
        self.root = root
        self.names = names
        info = os.stat(root)
        # DIR itself, as it was at start: if it goes (an unmounted drive, ``rm -rf``) or is
        # replaced, what is missing there is not a deletion to send (``intact``)
        self._identity = (info.st_dev, info.st_ino)
        self.token: str | None = None  # of DIR's marker file, once the sync has marked it
        self.case_insensitive = _folds_case(root)

    def intact(self) -> bool:
        """True while DIR is the directory the sync started with (and its marker says so)."""
        try:
            info = os.stat(self.root)
        except OSError:
            return False
        if (info.st_dev, info.st_ino) != self._identity:
            return False
        return self.token is None or self.read_marker() == self.token

    def read_marker(self) -> str | None:
        """The token of DIR's marker file (``MARKER``: which directory a basis is of), or None;
        read without following a link, at most a line."""
        got = self.read(MARKER, 64)
        if got is None:
            return None
        text = got[0].decode("ascii", "replace").strip()
        return text if len(text) == 32 and text.isalnum() else None

    def write_marker(self, token: str) -> None:
        """Mark DIR with ``token`` (the basis is of this directory from now on)."""
        state = self.stat(MARKER)
        expect = state if isinstance(state, Seen) else None
        if self.write(MARKER, f"{token}\n".encode(), expect, read_only=False) is None:
            raise OSError(f"cannot write {self.local_path(MARKER)}")
        self.token = token

    def name_key(self, path: str) -> str:
        """The key under which this file system tells names apart (two store paths with one
        key cannot both live in DIR: macOS and Windows fold case)."""
        normal = unicodedata.normalize("NFC", path)
        return normal.casefold() if self.case_insensitive else normal

    def local_path(self, path: str) -> Path:
        """Where the store path ``path`` (``/a/b.md``) lives in DIR."""
        return self.root.joinpath(*path.strip("/").split("/"))

    def store_path(self, local: Path) -> str | None:
        """The store path of a file of DIR; None outside DIR."""
        try:
            relative = local.relative_to(self.root)
        except ValueError:
            return None
        parts = relative.parts
        return "/" + "/".join(parts) if parts else None

    def is_local_only(self, path: str) -> bool:
        return self.names.is_local(path)

    # -- looking ---------------------------------------------------------------------------

    def scan(self) -> tuple[dict[str, Seen], dict[str, Unusable], set[str]]:
        """Every file of DIR by store path (local-only names left out), the names that cannot
        be synced, and the directories; no content is read and no link followed."""
        files: dict[str, Seen] = {}
        unusable: dict[str, Unusable] = {}
        directories: set[str] = set()
        pending = [("", self.root)]
        while pending:
            prefix, directory = pending.pop()
            try:
                entries = list(os.scandir(directory))
            except OSError as exc:
                log.warning("cannot list %s: %s", directory, exc)
                continue
            for entry in entries:
                path = f"{prefix}/{entry.name}"
                if self.names.is_local(path):
                    continue
                try:
                    if entry.is_dir(follow_symlinks=False):
                        directories.add(path)
                        pending.append((path, Path(entry.path)))
                    elif entry.is_file(follow_symlinks=False):
                        files[path] = Seen.of(entry.stat(follow_symlinks=False))
                    else:
                        unusable[path] = Unusable(_kind_of(entry.path))
                except OSError:  # gone meanwhile: the next event says so
                    continue
        return files, unusable, directories

    def stat(self, path: str) -> Seen | Unusable | str | None:
        """The file at ``path``: its ``Seen``; ``"dir"`` for a directory; ``Unusable`` for
        anything else (or a path through a link); None when nothing is there."""
        if not self._parents_are_directories(path):
            return Unusable("a directory on its path is a link or not a directory")
        try:
            info = os.lstat(self.local_path(path))
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ENOTDIR:
                return None
            raise
        if stat.S_ISDIR(info.st_mode):
            return "dir"
        if stat.S_ISREG(info.st_mode):
            return Seen.of(info)
        return Unusable(_kind_of(str(self.local_path(path))))

    def read(self, path: str, limit: int) -> tuple[bytes, Seen] | None:
        """The content of the file at ``path`` and what it was when read (None: not a regular
        file of DIR any more). At most ``limit`` + 1 bytes are read: a longer file is refused
        by size anyway, and the sync never holds more."""
        if not self._parents_are_directories(path):
            return None
        try:
            fd = os.open(self.local_path(path), os.O_RDONLY | NOFOLLOW | BINARY)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return None
            if not NOFOLLOW and os.path.islink(self.local_path(path)):
                return None
            chunks = []
            left = limit + 1
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            after = os.fstat(fd)
        finally:
            os.close(fd)
        return b"".join(chunks), Seen.of(after)

    def _parents_are_directories(self, path: str) -> bool:
        """True if every directory on the way from DIR to ``path`` is a real directory (not a
        link): a name below a planted link is outside DIR."""
        current = self.root
        for part in path.strip("/").split("/")[:-1]:
            current = current / part
            try:
                if not stat.S_ISDIR(os.lstat(current).st_mode):
                    return False
            except OSError:
                return True  # missing: nothing below it either (the caller sees None)
        return True

    # -- writing ---------------------------------------------------------------------------

    def write(self, path: str, data: bytes, expect: Seen | None, *, read_only: bool) -> Seen | None:
        """Replace the file at ``path`` with ``data`` (atomically: a temporary file beside it,
        then a rename), if what is there is still ``expect`` (None: nothing). Returns the new
        file's ``Seen``, or None when the file changed meanwhile (the caller looks again)."""
        target = self.local_path(path)
        if not self._make_parents(path):
            return None
        if self.stat(path) != expect:
            return None
        temp = target.with_name(f"{TEMP_PREFIX}{secrets.token_hex(6)}.tmp")
        mode = 0o444 if read_only else 0o644
        if expect is not None and not read_only:  # a mode the user gave the file stays
            with contextlib.suppress(OSError):
                mode = stat.S_IMODE(os.lstat(target).st_mode) | stat.S_IRUSR | stat.S_IWUSR
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | BINARY, mode)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if not BATCH_SYNC:  # else one ``make_durable`` for the whole pass
                os.fsync(fd)
        finally:
            os.close(fd)
        try:
            # the last look: a program that wrote since the one above wins (a window of a few
            # microseconds remains, as for every tool that renames over a file)
            if self.stat(path) != expect:
                return None
            os.replace(temp, target)
            written = os.lstat(target)
        except OSError as exc:
            log.warning("cannot write %s: %s", target, exc)
            return None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temp)
        return Seen.of(written)

    def make_durable(self) -> None:
        """What was written into DIR since the last call reaches the disk, renames included:
        ``syncfs`` of DIR's file system on Linux, else ``sync`` (each file was fsynced as it was
        written where there is neither). Blocking: from a worker thread."""
        if sys.platform.startswith("linux") and sync_mount(str(self.root)):
            return
        if BATCH_SYNC:
            os.sync()

    def remove(self, path: str, expect: Seen) -> bool:
        """Remove the file at ``path`` if it is still ``expect``; then its directories that are
        left empty (up to DIR). False when it changed meanwhile."""
        if self.stat(path) != expect:
            return False
        target = self.local_path(path)
        if os.name == "nt":
            with contextlib.suppress(OSError):
                os.chmod(target, 0o644)  # a read-only file cannot be removed on Windows
        try:
            os.unlink(target)
        except FileNotFoundError:
            return True
        except OSError as exc:
            log.warning("cannot remove %s: %s", target, exc)
            return False
        self.prune_empty(path)
        return True

    def prune_empty(self, path: str) -> None:
        """Remove the directories of ``path`` that are empty now, innermost first (a directory
        of the store exists only while it holds a memory)."""
        parts = path.strip("/").split("/")[:-1]
        while parts:
            try:
                os.rmdir(self.root.joinpath(*parts))
            except OSError:
                return  # not empty (or a link, or gone): the ones above are not empty either
            parts.pop()

    def set_read_only(self, path: str, read_only: bool) -> None:
        """The file's write permission: none for a read-only store."""
        with contextlib.suppress(OSError):
            target = self.local_path(path)
            if not os.path.islink(target):
                os.chmod(target, 0o444 if read_only else 0o644)

    def _make_parents(self, path: str) -> bool:
        """Make the directories of ``path`` in DIR; False if one is a link or a file."""
        current = self.root
        for part in path.strip("/").split("/")[:-1]:
            current = current / part
            try:
                info = os.lstat(current)
            except FileNotFoundError:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(current, 0o755)
                info = os.lstat(current)
            if not stat.S_ISDIR(info.st_mode):
                return False
        return True


def _folds_case(directory: Path) -> bool:
    """True if ``directory``'s file system takes ``A`` and ``a`` for one name (macOS and
    Windows by default): a probe file made and looked up in the other case."""
    probe = directory / f"{TEMP_PREFIX}case-{secrets.token_hex(4)}.tmp"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o600)
    except OSError:
        return False
    os.close(fd)
    try:
        return os.path.lexists(directory / probe.name.upper())
    finally:
        with contextlib.suppress(OSError):
            os.unlink(probe)


def _kind_of(path: str) -> str:
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "gone"
    if stat.S_ISLNK(mode):
        return "a symbolic link (never followed)"
    return "not a regular file"
