"""Reading a tree for ``memfs import``: which files of DIR can be memories, their hashes, and
why the others cannot; and reading one of them again, unchanged, when it is uploaded.

The tree is read the way ``memfs.transfer.layout`` lays it out, and as hostile: DIR may be an
old export, a download or another user's directory, and memfs may run as root. So:

- every directory below DIR and every file is opened by descriptor relative to its parent,
  ``O_NOFOLLOW``: a symbolic link (to ``/etc/shadow``, to another user's home) is reported,
  never followed, and a component swapped for a link between the walk and the upload fails the
  open instead of being followed (``open_file``);
- a file is opened ``O_NONBLOCK`` and checked to be regular by ``fstat`` on that descriptor (a
  FIFO planted in its place does not hang the import); sockets and devices are reported;
- a file larger than the store's limit is refused from its size, never read whole;
- a file that changes while it is read (size, mtime or ctime moved, or fewer bytes than its
  size) is refused: its content is unknown;
- the top-level ``.memfs`` and every ``.git`` directory (``layout.is_reserved``) are never
  read as memories; ``.memfs/descriptions.json`` is read as descriptions.

Nothing here knows a store: the walk gives each file's memory path, SHA-256 and size (contents
are not kept, so a tree of any size is read in bounded memory) and each refusal with its
reason; ``memfs.transfer.import_plan`` compares them with the store.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field

from memfs.contract import databricks_limits
from memfs.contract.paths import MAX_PATH_BYTES, MAX_SEGMENTS, PathError, validate_file_path
from memfs.transfer import layout

log = logging.getLogger(__name__)

# A descriptions.json larger than this is refused unread: what a store can hold fits (100,000
# entries of a 1 KiB path and a 4 KiB description, Databricks' limits); a planted huge file must
# not fill memory (the file is held once, its entries read one by one: layout.load_descriptions).
MAX_DESCRIPTIONS_BYTES = layout.MAX_DESCRIPTION_ENTRIES * (
    MAX_PATH_BYTES + databricks_limits.MAX_DESCRIPTION_BYTES + 16
)

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class UnreadableError(Exception):
    """A file that cannot be a memory; the message is the one-line reason."""


@dataclass(frozen=True)
class Limits:
    """What the target store accepts in a content (its ``Capabilities``)."""

    max_content_bytes: int
    refused_characters: str = ""


@dataclass(frozen=True)
class TreeFile:
    """A file of DIR that can be a memory: its path below DIR, the memory's path, and what its
    content was when it was read (the upload reads it again and checks it is still that)."""

    relative: str
    path: str
    sha256: str
    size: int


@dataclass(frozen=True)
class Refusal:
    """Something of DIR that cannot be a memory. ``name`` is its memory path when it has a valid
    one, else its path below DIR with a leading ``/`` (escaped for printing by the caller)."""

    name: str
    reason: str


@dataclass
class Tree:
    """What the walk found: files in path order, refusals, and the descriptions of
    ``.memfs/descriptions.json`` (None: the tree has none)."""

    files: list[TreeFile] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    descriptions: dict[str, str] | None = None


def read_tree(root_fd: int, limits: Limits) -> Tree:
    """Walk DIR, open as ``root_fd`` (by the caller, who keeps it for the uploads' reads: a
    link given as DIR itself is followed, the user named it)."""
    tree = Tree()
    _walk(root_fd, "", tree, limits)  # scandir reads a duplicate: root_fd stays usable
    descriptions = _descriptions(root_fd, tree)
    if descriptions is not None:
        tree.descriptions = descriptions.entries
        _refuse_descriptions(descriptions.refused, tree)
    tree.files.sort(key=lambda f: f.path)
    tree.refused.sort(key=lambda r: r.name)
    return tree


def _walk(dir_fd: int, prefix: str, tree: Tree, limits: Limits) -> None:
    """Every file below the directory ``dir_fd`` (``prefix``: its path below DIR, ``a/b/``).
    Depth-first, one descriptor open per level, and at most ``MAX_SEGMENTS`` levels: no memory
    path is deeper, so a deeper directory is refused unread (a hostile tree cannot exhaust
    descriptors or the stack)."""
    try:
        with os.scandir(dir_fd) as listing:
            entries = sorted(listing, key=lambda e: e.name)
    except OSError as exc:  # the directory cannot be listed: everything below it is unknown
        tree.refused.append(Refusal(_name_of(prefix.rstrip("/")), _reason(exc)))
        return
    for entry in entries:
        relative = prefix + entry.name
        if layout.is_reserved_relative(relative):
            continue  # memfs's own (.memfs) or a repository (.git): never memories
        try:
            if entry.is_symlink():
                raise UnreadableError("a symbolic link (not followed)")
            if entry.is_dir(follow_symlinks=False):
                _walk_below(dir_fd, entry.name, relative, tree, limits)
                continue
            if not entry.is_file(follow_symlinks=False):  # never opened: a device
                raise UnreadableError("not a regular file")
            path = _memory_path(relative)
            sha, size = _hash(dir_fd, entry.name, limits)
        except UnreadableError as exc:
            tree.refused.append(Refusal(_name_of(relative), str(exc)))
            continue
        tree.files.append(TreeFile(relative, path, sha, size))


def _walk_below(dir_fd: int, name: str, relative: str, tree: Tree, limits: Limits) -> None:
    if relative.count("/") + 1 >= MAX_SEGMENTS:
        raise UnreadableError(f"a directory {MAX_SEGMENTS} levels deep: no memory path is deeper")
    child = _open_directory(dir_fd, name)
    try:
        _walk(child, relative + "/", tree, limits)
    finally:
        os.close(child)


def _open_directory(dir_fd: int, name: str) -> int:
    try:
        return os.open(name, _DIRECTORY_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        reason = _reason(exc)
        # O_DIRECTORY | O_NOFOLLOW on a link is ENOTDIR: say what it is
        with contextlib.suppress(OSError):
            if stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode):
                reason = _reason(OSError(errno.ELOOP, "a symbolic link"))
        raise UnreadableError(reason) from None


def _memory_path(relative: str) -> str:
    """The memory path of a file below DIR, or ``UnreadableError`` saying why it cannot be one."""
    try:
        relative.encode("utf-8")
    except UnicodeEncodeError:  # a name of bytes that are not UTF-8 (os.fsdecode kept them)
        raise UnreadableError("the file name is not UTF-8") from None
    try:
        path = layout.memory_path(relative)
        return validate_file_path(path)
    except (layout.UnsafePathError, PathError) as exc:
        raise UnreadableError(f"not a memory path: {exc}") from None


def _name_of(relative: str) -> str:
    return "/" + relative


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "a symbolic link (not followed)"
    return f"cannot be read: {exc.strerror or exc}"


@contextlib.contextmanager
def _opened(dir_fd: int, name: str) -> Iterator[int]:
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise UnreadableError(_reason(exc)) from None
    try:
        yield fd
    finally:
        os.close(fd)


def read_content(dir_fd: int, name: str, limits: Limits) -> bytes:
    """The bytes of the file ``name`` in ``dir_fd``, if they can be a memory's content; else
    ``UnreadableError`` with the reason."""
    with _opened(dir_fd, name) as fd:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode):
            raise UnreadableError("not a regular file")
        if before.st_size > limits.max_content_bytes:
            raise UnreadableError(
                f"{before.st_size} bytes, over the store's limit of {limits.max_content_bytes}"
            )
        data = _read_at_most(fd, limits.max_content_bytes + 1)
        after = os.fstat(fd)
    if _changed(before, after) or len(data) != after.st_size:
        raise UnreadableError("changed while it was read")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UnreadableError("not UTF-8 text") from None
    for character in limits.refused_characters:
        if character in text:
            raise UnreadableError(f"contains U+{ord(character):04X}, which the store refuses")
    return data


def _hash(dir_fd: int, name: str, limits: Limits) -> tuple[str, int]:
    data = read_content(dir_fd, name, limits)
    return hashlib.sha256(data).hexdigest(), len(data)


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _changed(before: os.stat_result, after: os.stat_result) -> bool:
    return (before.st_size, before.st_mtime_ns, before.st_ctime_ns) != (
        after.st_size,
        after.st_mtime_ns,
        after.st_ctime_ns,
    )


def open_file(root_fd: int, relative: str, limits: Limits, sha256: str) -> bytes:
    """The content of the file ``relative`` below ``root_fd`` as the walk saw it (``sha256``),
    read again for its upload, each component opened without following a link; else
    ``UnreadableError`` (it changed since: its new content was never compared with the store)."""
    *directories, name = relative.split("/")
    fds: list[int] = []
    try:
        dir_fd = root_fd
        for directory in directories:
            dir_fd = _open_directory(dir_fd, directory)
            fds.append(dir_fd)
        data = read_content(dir_fd, name, limits)
    finally:
        for fd in fds:
            os.close(fd)
    if hashlib.sha256(data).hexdigest() != sha256:
        raise UnreadableError("changed during the import (run it again)")
    return data


_DESCRIPTIONS_SHOWN = f"/{layout.META_DIR}/{layout.DESCRIPTIONS_FILE}"


def _refuse_descriptions(refused: list[tuple[str | None, str]], tree: Tree) -> None:
    """One refusal per entry of ``descriptions.json`` refused; a file whose description was
    refused is not imported (what the description should be is unknown)."""
    unknown = set()
    for path, reason in refused:
        tree.refused.append(Refusal(path or _DESCRIPTIONS_SHOWN, reason))
        if path is not None:
            unknown.add(path)
    if unknown:
        tree.files = [file for file in tree.files if file.path not in unknown]


def _descriptions(root_fd: int, tree: Tree) -> layout.Descriptions | None:
    """``.memfs/descriptions.json`` below ``root_fd``, or None when the tree has none (a
    malformed one is a refusal: the tree's memories are imported without descriptions)."""
    shown = _DESCRIPTIONS_SHOWN
    try:
        meta_fd = os.open(layout.META_DIR, _DIRECTORY_FLAGS, dir_fd=root_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        tree.refused.append(Refusal(f"/{layout.META_DIR}", _reason(exc)))
        return None
    try:
        fd = os.open(layout.DESCRIPTIONS_FILE, _FILE_FLAGS, dir_fd=meta_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        tree.refused.append(Refusal(shown, _reason(exc)))
        return None
    finally:
        os.close(meta_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            tree.refused.append(Refusal(shown, "not a regular file"))
            return None
        if info.st_size > MAX_DESCRIPTIONS_BYTES:
            tree.refused.append(
                Refusal(
                    shown, f"larger than any store's descriptions ({MAX_DESCRIPTIONS_BYTES} bytes)"
                )
            )
            return None
        # read into one buffer of its size (chunks joined would hold it twice)
        data = bytearray(info.st_size + 1)
        size = 0
        while size < len(data) and (count := os.readv(fd, [memoryview(data)[size:]])):
            size += count
        if size > info.st_size:  # grown since fstat: not what was checked
            raise layout.FormatError(f"{layout.DESCRIPTIONS_FILE}: grew while it was read")
        del data[size:]
        return layout.load_descriptions(data)
    except layout.FormatError as exc:
        tree.refused.append(Refusal(shown, str(exc)))
        return None
    finally:
        os.close(fd)
