"""Writing an export's files into DIR without ever following a link planted in it, and making DIR
equal to what is exported (``sync_tree``).

DIR is the user's, but what is inside it may be an old export, edited, or planted by someone
(an agent's memory, another program): every file below DIR is reached one component at a time
from a descriptor of DIR (``openat`` with ``O_NOFOLLOW | O_DIRECTORY``), so a symbolic link
anywhere below DIR is never followed, a ``..``, ``.`` or empty component is never walked
(``OutsideError``: whatever path it is given, nothing outside DIR is opened, written or removed,
the directories a removal empties included), and a file is replaced by a new one renamed over
it (never written in place: a hard link planted at its name keeps its own bytes; a file that is
not there yet is created with ``O_EXCL``, never over anything). Anything that is not a regular
file where an exported file goes (a link, a directory, a FIFO, a device) is refused
with a one-line reason and left as it is (``InTheWayError``).

What is "ours": ``.memfs/exported.json`` (``MANIFEST``) records the files the last export wrote
and their git blob ids; ``.memfs/written-ahead.jsonl`` (``AHEAD_LOG``) the files an export
created before its manifest was written (``export_ahead``: a line each, written before the
file), read as part of the manifest by the next sync and removed once the manifest is written,
so even a killed export's files are ours to tidy. A run writes every exported file whose bytes
differ, and removes a file of the last export that is no longer exported only if its bytes are
still those it wrote: a file someone changed since is kept and reported, and a file it never
wrote is never touched. Those records are DIR's, so anyone who can write DIR can plant them:
each path read from them must be one an export writes (``layout.check_tree_file``), else it is
ignored and reported (``SyncReport.ignored``), before the descriptor walk refuses it again.

This module does no network and knows nothing of stores: it is given paths and bytes.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import secrets
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from memfs.transfer.layout import META_DIR, UnsafePathError, check_tree_file

log = logging.getLogger(__name__)

MANIFEST_NAME = "exported.json"
MANIFEST = f"{META_DIR}/{MANIFEST_NAME}"
AHEAD_LOG_NAME = "written-ahead.jsonl"
AHEAD_LOG = f"{META_DIR}/{AHEAD_LOG_NAME}"

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a FIFO
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


class InTheWayError(OSError):
    """Something other than a regular file of ours is where an exported file goes; the message
    is one line saying what and where."""


class OutsideError(OSError):
    """A path that does not name a file below DIR (a ``..``, ``.`` or empty component): never
    walked."""


def _names(relative: str) -> list[str]:
    """The components of ``relative``, each a name in its parent directory; ``OutsideError``
    if one could lead anywhere but down (``..``), or is no name (``.``, empty)."""
    names = relative.split("/")
    if any(name in ("", ".", "..") for name in names):
        raise OutsideError(errno.EINVAL, f"not a path below DIR: {relative!r}")
    return names


def blob_id(data: bytes) -> str:
    """The id git gives a file of these bytes (``git hash-object``); files compare by it."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


class Tree:
    """DIR, opened once (created if missing); every path is relative to it (``a/b``).
    ``with Tree(path) as tree:`` closes its descriptor."""

    def __init__(self, root: Path) -> None:
        self.root = root
        with contextlib.suppress(FileExistsError):
            root.mkdir(parents=True)
        # DIR itself is the user's choice (a link they made is theirs): opened as named
        self.fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._run = secrets.token_hex(4)  # temporary names: this run's, then a counter
        self._temps = 0

    def __enter__(self) -> Tree:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        os.close(self.fd)

    @contextlib.contextmanager
    def _parent(self, relative: str, *, create: bool) -> Iterator[int | None]:
        """The descriptor of the directory holding ``relative`` (None: missing and not
        ``create``d), reached from DIR's without following links nor going up."""
        *dirs, _ = _names(relative)
        fd = os.dup(self.fd)
        try:
            for i, name in enumerate(dirs):
                try:
                    inner = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        yield None
                        return
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(name, 0o777, dir_fd=fd)
                    inner = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        where = "/".join(dirs[: i + 1])
                        raise InTheWayError(
                            f"{_what_is(fd, name)} is in the way at {where}"
                        ) from None
                    raise
                os.close(fd)
                fd = inner
            yield fd
        finally:
            os.close(fd)

    def read(self, relative: str, *, limit: int | None = None) -> bytes | None:
        """The bytes of the regular file ``relative``, None if there is none;
        ``InTheWayError`` if something else is there or on the way, or if it is larger than
        ``limit`` bytes (then never read)."""
        with self._parent(relative, create=False) as parent:
            if parent is None:
                return None
            name = relative.rsplit("/", 1)[-1]
            try:
                fd = _open_file(parent, name, _READ_FLAGS, relative)
            except FileNotFoundError:
                return None
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    raise InTheWayError(f"{_what_is(parent, name)} is in the way at {relative}")
                too_large = InTheWayError(f"{relative} is larger than {limit} bytes")
                if limit is not None and info.st_size > limit:
                    raise too_large
                chunks = []
                size = 0
                while chunk := os.read(fd, 1 << 20):
                    chunks.append(chunk)
                    size += len(chunk)
                    if limit is not None and size > limit:  # grown since: stop reading
                        raise too_large
                return b"".join(chunks)
            finally:
                os.close(fd)

    def write(self, relative: str, data: bytes) -> None:
        """``relative`` holds ``data``: a new file renamed over the old one (a reader sees one
        or the other). ``InTheWayError`` if a link, directory or other non-regular file is
        there or on the way."""
        with self._parent(relative, create=True) as parent:
            assert parent is not None
            name = relative.rsplit("/", 1)[-1]
            try:
                info = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                info = None
            if info is not None and not stat.S_ISREG(info.st_mode):
                raise InTheWayError(f"{_what_is(parent, name)} is in the way at {relative}")
            if info is None:
                try:  # nothing to replace: the file itself, never over anything
                    self._fill(os.open(name, _NEW_FLAGS, 0o666, dir_fd=parent), name, parent, data)
                    return
                except FileExistsError:  # something appeared meanwhile: replace it below
                    pass
            temp = self._new_file(parent, data)
            try:
                os.rename(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=parent)
                raise

    def exists(self, relative: str) -> bool:
        """Whether anything (a file, a link, a directory...) is at ``relative``, or something
        other than a directory is on the way to it."""
        try:
            with self._parent(relative, create=False) as parent:
                if parent is None:
                    return False
                os.stat(relative.rsplit("/", 1)[-1], dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return False
        except OSError:
            return True
        return True

    def append(self, relative: str, data: bytes) -> None:
        """Add ``data`` at the end of the regular file ``relative`` (created if missing);
        ``InTheWayError`` if anything else is there or on the way, or a hard link (written in
        place, unlike the files ``write`` replaces: a planted link must not take the bytes)."""
        with self._parent(relative, create=True) as parent:
            assert parent is not None
            name = relative.rsplit("/", 1)[-1]
            fd = _open_file(parent, name, _APPEND_FLAGS, relative)
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
                    what = _what_is(parent, name) if info.st_nlink == 1 else "a hard link"
                    raise InTheWayError(f"{what} is in the way at {relative}")
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)

    def create(self, relative: str, data: bytes) -> bool:
        """A new file ``relative`` holding ``data``, if nothing is there yet (False: something
        is, or is in the way on the path, and nothing was written)."""
        try:
            with self._parent(relative, create=True) as parent:
                assert parent is not None
                name = relative.rsplit("/", 1)[-1]
                fd = os.open(name, _NEW_FLAGS, 0o666, dir_fd=parent)
                self._fill(fd, name, parent, data)
        except OSError:  # FileExistsError, InTheWayError, ELOOP...: left to ``sync_tree``
            return False
        return True

    def _new_file(self, parent: int, data: bytes) -> str:
        """A new file holding ``data`` in ``parent``, at a name nobody else uses; its name.
        ``O_EXCL | O_NOFOLLOW``: whatever is planted at that name is never opened (the name is
        taken, the next one tried). Not a random name: ext4 creates and renames files of
        random names four times slower (docs/benchmarks.md, "memfs export")."""
        while True:
            self._temps += 1
            temp = f".memfs-export-{self._run}-{self._temps}.tmp"
            try:
                fd = os.open(temp, _NEW_FLAGS, 0o666, dir_fd=parent)  # the umask decides
            except FileExistsError:
                continue
            self._fill(fd, temp, parent, data)
            return temp

    @staticmethod
    def _fill(fd: int, name: str, parent: int, data: bytes) -> None:
        """Write ``data`` to the new file ``fd`` (``name`` in ``parent``) and close it; on a
        failure the file is removed."""
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=parent)
            raise
        os.close(fd)

    def remove(self, relative: str) -> None:
        """Unlink the file ``relative`` and the directories above it it leaves empty."""
        with self._parent(relative, create=False) as parent:
            if parent is None:
                return
            with contextlib.suppress(FileNotFoundError):
                os.unlink(relative.rsplit("/", 1)[-1], dir_fd=parent)
        dirs = relative.split("/")[:-1]
        while dirs:
            with self._parent("/".join(dirs), create=False) as parent:
                if parent is None:
                    return
                try:
                    os.rmdir(dirs[-1], dir_fd=parent)
                except OSError:  # not empty (or not ours to remove): stop here
                    return
            dirs.pop()


def _open_file(parent: int, name: str, flags: int, relative: str) -> int:
    """``name`` in ``parent`` opened with ``flags`` (``O_NOFOLLOW`` among them); a link, a
    directory or a device there is ``InTheWayError``, other errors (``FileNotFoundError``...)
    as they are."""
    try:
        return os.open(name, flags, 0o666, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            raise InTheWayError(f"{_what_is(parent, name)} is in the way at {relative}") from None
        raise


def _what_is(parent: int, name: str) -> str:
    """ "a symbolic link", "a directory"... for a one-line reason."""
    try:
        mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    except OSError:
        return "something"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISREG(mode):
        return "a file"
    return "a special file"


@dataclass
class SyncReport:
    """What ``sync_tree`` did; ``files`` is the new manifest."""

    written: int = 0
    unchanged: int = 0
    removed: int = 0
    kept: list[tuple[str, str]] = field(default_factory=list)  # (path, why) not removed
    refused: list[tuple[str, str]] = field(default_factory=list)  # (path, why) not written
    # (record, path, why): entries of MANIFEST or AHEAD_LOG that name no file an export writes
    ignored: list[tuple[str, str, str]] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # path -> blob id


# MANIFEST and AHEAD_LOG larger than this are not read (then no file of an earlier export is
# removed): 100,000 files (a Databricks store's most) of 1 KiB paths fit; a planted huge one
# must not fill memory
MAX_RECORD_BYTES = 128 << 20


def read_manifest(tree: Tree) -> dict[str, str]:
    """The files the last export wrote (path -> blob id, as the file says: ``sync_tree``
    checks the paths); empty if none or unreadable (then nothing is ever removed)."""
    try:
        data = tree.read(MANIFEST, limit=MAX_RECORD_BYTES)
        obj = json.loads(data) if data is not None else {}
        files = obj.get("files", {}) if isinstance(obj, dict) else {}
        return {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}
    except (OSError, ValueError, AttributeError) as exc:
        log.warning(
            "%s/%s is unreadable (%s): no file of an earlier export is removed",
            tree.root,
            MANIFEST,
            exc,
        )
        return {}


def read_ahead_log(tree: Tree) -> dict[str, str]:
    """The files an export created ahead of its manifest (path -> blob id; module docstring);
    a line cut short by a kill, or not of this form, is skipped."""
    try:
        data = tree.read(AHEAD_LOG, limit=MAX_RECORD_BYTES)
    except OSError:
        return {}
    files: dict[str, str] = {}
    for line in (data or b"").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if (
            isinstance(entry, dict)
            and isinstance(entry.get("path"), str)
            and isinstance(entry.get("blob"), str)
        ):
            files[entry["path"]] = entry["blob"]
    return files


def ahead_log_lines(files: Mapping[str, str]) -> bytes:
    """``AHEAD_LOG``'s lines for these files (path -> blob id)."""
    return b"".join(
        json.dumps({"path": path, "blob": blob}, ensure_ascii=False).encode("utf-8") + b"\n"
        for path, blob in files.items()
    )


def write_manifest(tree: Tree, files: Mapping[str, str]) -> None:
    data = json.dumps(
        {"format": 1, "files": dict(sorted(files.items()))}, indent=1, ensure_ascii=False
    )
    tree.write(MANIFEST, data.encode("utf-8") + b"\n")


def sync_tree(
    tree: Tree,
    wanted: Mapping[str, str],
    content: Callable[[list[str]], Mapping[str, bytes]],
    *,
    on_file: Callable[[], None] | None = None,
) -> SyncReport:
    """Make the files of ``tree`` those of ``wanted`` (path -> blob id), the bytes of those
    that differ asked of ``content`` (one call with every path needed), and remove the files of
    the last export (its manifest) that are no longer wanted and unchanged since. The manifest
    is written last, with what is now on disk."""
    report = SyncReport()
    previous = _previous(tree, report)
    missing: list[str] = []
    for path, blob in wanted.items():
        try:
            on_disk = tree.read(path)
        except OSError as exc:
            report.refused.append((path, _reason(exc)))
            continue
        if on_disk is not None and blob_id(on_disk) == blob:
            report.unchanged += 1
            report.files[path] = blob
        else:
            missing.append(path)
    datas = content(missing) if missing else {}
    for path in missing:
        try:
            tree.write(path, datas[path])
        except OSError as exc:
            report.refused.append((path, _reason(exc)))
            continue
        report.written += 1
        report.files[path] = wanted[path]
        if on_file is not None:
            on_file()
    for path, blob in sorted(previous.items()):
        if path in wanted:
            continue
        try:
            on_disk = tree.read(path)
        except OSError as exc:
            report.kept.append((path, _reason(exc)))
            continue
        if on_disk is None:
            continue
        if blob_id(on_disk) != blob:
            report.kept.append((path, "changed since the last export"))
            report.files[path] = blob  # still ours to compare next time
            continue
        tree.remove(path)
        report.removed += 1
    write_manifest(tree, report.files)
    with contextlib.suppress(OSError):  # what it named is in the manifest now, or gone
        tree.remove(AHEAD_LOG)
    return report


def _previous(tree: Tree, report: SyncReport) -> dict[str, str]:
    """The files of earlier exports (path -> blob id): the manifest's, and those created ahead
    (the newest written at their paths), each path checked: one an export cannot have written
    (``../x``, ``.git/config``...: planted) is ignored, into ``report.ignored``."""
    previous: dict[str, str] = {}
    for record, files in ((MANIFEST, read_manifest(tree)), (AHEAD_LOG, read_ahead_log(tree))):
        for path, blob in files.items():
            try:
                check_tree_file(path)
            except UnsafePathError as exc:
                report.ignored.append((record, path, str(exc)))
                continue
            previous[path] = blob
    return previous


def _reason(exc: OSError) -> str:
    return str(exc) if isinstance(exc, InTheWayError) else (exc.strerror or str(exc))
