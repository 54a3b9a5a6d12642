"""The git repository of ``memfs export --git``: running git safely, streaming commits into
``git fast-import``, and reading back what an earlier export committed.

Git runs as a tool, never as the user's git: a clean environment (``GIT_CONFIG_NOSYSTEM``,
``GIT_CONFIG_GLOBAL=/dev/null``, no pager, no prompt, ``GIT_DIR`` and ``GIT_WORK_TREE`` given,
so nothing is discovered from the working directory) and ``-c core.hooksPath=/dev/null -c
core.fsmonitor=false`` (no program configured in the repository runs). Only commands that run no
filter, hook or external program are used: ``init``, ``fast-import``, ``log``, ``ls-tree``,
``cat-file``, ``read-tree`` (the index only), ``rev-parse``. Paths reach git only inside the
fast-import stream (C-quoted), never as arguments, so a memory path never becomes an option.

A repository is used only if it is ours to use: ``DIR/.git`` a real directory (not a link, nor
a ``gitdir:`` file pointing elsewhere) of the user running memfs, whose branch is empty or holds
commits of ``memfs export`` of the same store (their ``Memfs-Store`` trailer).

The commits of one export (``FastImport``) are written to the branch at each ``checkpoint`` and
at ``done``: an export stopped in between leaves the branch at its last checkpoint, and fast-import
discards the rest, so what the branch holds is always a prefix of the history.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO

from memfs.contract.models import Actor
from memfs.transfer.export_tree import Tree
from memfs.transfer.layout import GIT_DIR, META_DIR, unsafe

BRANCH = "refs/heads/main"

# The trailers of every commit memfs export makes (the last paragraph of its message).
STORE = "Memfs-Store"
VERSION = "Memfs-Version"
MEMORY = "Memfs-Memory"
TIME = "Memfs-Time"
PATH = "Memfs-Path"  # the memory's path after this version; absent: not in the tree

_SAFE_CONFIG = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")

# Objects stored without zlib (level 0): fast-import writes three small objects per version (a
# commit and two trees, deltified), and compressing each one costs more than digesting it: 35-40%
# less of its CPU, a pack about 35% larger (8.2 MB against 6.1 MB for 10,000 versions); ``git
# repack -adF`` compresses it (docs/export-import.md)
_FAST_IMPORT_CONFIG = ("-c", "pack.compression=0")
_FAST_IMPORT_ARGS = ("--quiet", "--done", "--date-format=raw")

# fast-import's input pipe: 1 MiB (Linux's default 64 KiB makes each write of commits wait for
# git to digest the previous ones, so rendering and digesting would take turns)
_PIPE_BYTES = 1 << 20


class GitError(Exception):
    """Git failed, or the repository is not one memfs may use; one line for a person."""


@dataclass(frozen=True)
class Commit:
    """One commit of the history, as ``history`` reads it back: its id and trailers."""

    id: str
    trailers: dict[str, str]


@dataclass
class History:
    """What the branch already holds: where the next export starts."""

    head: str | None = None  # None: no commit yet
    commits: int = 0
    store_id: str | None = None
    exported: set[str] = field(default_factory=set)  # version ids
    paths: dict[str, str] = field(default_factory=dict)  # memory id -> path in the tree
    last_time: str | None = None  # Memfs-Time of the newest commit


class GitRepo:
    """``DIR/.git``, run with the clean environment of the module docstring."""

    def __init__(self, root: Path, *, git: str = "git") -> None:
        # absolute: git runs in DIR (``cwd``) and is given DIR's paths, which a relative DIR
        # would name again below itself (``exp/exp``)
        self.root = Path(os.path.abspath(root))
        self.git_dir = self.root / GIT_DIR
        self.git = git

    def env(self) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "GIT_DIR": str(self.git_dir),
            "GIT_WORK_TREE": str(self.root),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_PAGER": "cat",
            "GIT_NO_REPLACE_OBJECTS": "1",
            "LC_ALL": "C",
            "TZ": "UTC",
        }
        return env

    def command(self, *args: str) -> list[str]:
        return [self.git, *_SAFE_CONFIG, *args]

    def run(self, *args: str, input: bytes | None = None) -> bytes:
        try:
            done = subprocess.run(
                self.command(*args),
                input=input,
                env=self.env(),
                cwd=self.root,
                capture_output=True,
                check=False,
            )
        except OSError as exc:
            raise GitError(f"cannot run {self.git}: {exc.strerror}") from None
        if done.returncode != 0:
            raise GitError(f"git {args[0]} failed: {_last_line(done.stderr)}")
        return done.stdout

    def open(self, store_id: str, *, untracked: tuple[str, ...] = (f"/{META_DIR}/",)) -> History:
        """Create the repository if DIR has none (``untracked``: the patterns of memfs's own
        files that are never part of the history), check it is ours to use (module docstring),
        and read what it holds."""
        self.root.mkdir(parents=True, exist_ok=True)
        try:  # made here, so that git init fills our own directory (never one planted meanwhile)
            os.mkdir(self.git_dir, 0o777)
            created = True
        except FileExistsError:
            created = False
        info = os.lstat(self.git_dir)
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a directory"
            raise GitError(
                f"{self.git_dir} is {kind}: memfs export uses only a repository of its own"
            )
        if info.st_uid != os.getuid():
            raise GitError(f"{self.git_dir} is owned by uid {info.st_uid}, not us")
        if created:
            self._init(untracked)
            return History()
        history = self.history()
        if history.head is not None and history.store_id != store_id:
            whose = (
                f"store {history.store_id}"
                if history.store_id
                else "commits memfs export did not make"
            )
            raise GitError(
                f"{self.git_dir} holds {whose}, not store {store_id}: export into another DIR"
            )
        return history

    def _init(self, untracked: tuple[str, ...]) -> None:
        # no template: no sample hooks, nothing but what git needs
        self.run("init", "-q", "--template=", "--initial-branch=main", str(self.root))
        exclude = "".join(f"{pattern}\n" for pattern in untracked).encode()
        with Tree(self.root) as tree:  # no link followed
            tree.write(f"{GIT_DIR}/info/exclude", exclude)

    def head(self) -> str | None:
        try:
            out = self.run("rev-parse", "-q", "--verify", f"{BRANCH}^{{commit}}")
        except GitError:
            return None
        return out.decode().strip() or None

    def history(self) -> History:
        """Every commit of the branch, oldest first, read for what the next export needs."""
        history = History(head=self.head())
        if history.head is None:
            return history
        out = self.run("log", "-z", "--reverse", "--format=%H%n%B", BRANCH)
        for record in out.decode("utf-8", "replace").split("\0"):
            if not record.strip():
                continue
            commit = _parse_commit(record)
            history.commits += 1
            trailers = commit.trailers
            history.store_id = trailers.get(STORE, history.store_id)
            if VERSION in trailers:
                history.exported.add(trailers[VERSION])
            memory = trailers.get(MEMORY)
            if memory is not None:
                if PATH in trailers and unsafe(trailers[PATH]) is None:
                    history.paths[memory] = trailers[PATH]
                else:
                    history.paths.pop(memory, None)
            history.last_time = trailers.get(TIME, history.last_time)
        return history

    def tree_files(self) -> dict[str, str]:
        """The files of the branch's last commit: path -> blob id."""
        if self.head() is None:
            return {}
        out = self.run("ls-tree", "-r", "-z", "--full-tree", BRANCH)
        files = {}
        for entry in out.split(b"\0"):
            if not entry:
                continue
            meta, _, path = entry.partition(b"\t")
            _mode, kind, blob = meta.decode().split(" ")
            if kind == "blob":
                files[path.decode("utf-8", "surrogateescape")] = blob
        return files

    def blobs(self, ids: Iterable[str]) -> dict[str, bytes]:
        """The bytes of these blobs (one ``cat-file --batch``)."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        out = self.run("cat-file", "--batch", input="".join(f"{b}\n" for b in wanted).encode())
        found: dict[str, bytes] = {}
        pos = 0
        for blob in wanted:
            end = out.index(b"\n", pos)
            header = out[pos:end].decode().split(" ")
            if len(header) != 3 or header[1] != "blob":
                raise GitError(f"git cat-file: no blob {blob}")
            size = int(header[2])
            found[blob] = out[end + 1 : end + 1 + size]
            pos = end + 1 + size + 1
        return found

    def reset_index(self) -> None:
        """The index as the branch's last commit (the working tree is not touched), so that
        ``git status`` in DIR compares the files with it."""
        if self.head() is not None:
            self.run("read-tree", BRANCH)

    @contextlib.contextmanager
    def fast_import(self) -> Iterator[FastImport]:
        """A running ``git fast-import``; ``done()`` finishes it. Leaving the block otherwise
        (an error, a cancellation) stops it without ``done``: the branch stays at its last
        checkpoint."""
        with tempfile.TemporaryFile() as errors:
            # glibc's malloc hands memory back to the kernel after each of fast-import's many
            # small frees (two thirds of its time in brk(2) for 10,000 commits): a 16 MiB
            # pad keeps it (docs/benchmarks.md, "memfs export --git")
            env = {**self.env(), "MALLOC_TOP_PAD_": str(16 << 20)}
            try:
                proc = subprocess.Popen(
                    self.command(*_FAST_IMPORT_CONFIG, "fast-import", *_FAST_IMPORT_ARGS),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,  # answers ``progress``: a checkpoint is reached
                    stderr=errors,
                    env=env,
                    cwd=self.root,
                )
            except OSError as exc:
                raise GitError(f"cannot run {self.git}: {exc.strerror}") from None
            assert proc.stdin is not None and proc.stdout is not None
            with contextlib.suppress(OSError, AttributeError):  # not Linux, or over a limit
                fcntl.fcntl(proc.stdin.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
            stream = FastImport(proc.stdin, proc.stdout, self.head())
            try:
                yield stream
            except BaseException:
                proc.kill()
                proc.wait()
                raise
            try:
                if stream.finished:
                    proc.stdin.close()
                else:  # the caller left without done(): stop short of it
                    proc.kill()
            except BrokenPipeError:
                pass
            code = proc.wait()
            if stream.finished and code != 0:
                errors.seek(0)
                raise GitError(f"git fast-import failed: {_last_line(errors.read())}")


class FastImport:
    """The stream of one ``git fast-import`` run: blobs first (as they are listed), then the
    commits on ``BRANCH`` in history order."""

    def __init__(self, out: IO[bytes], answers: IO[bytes], head: str | None) -> None:
        self._out = out
        self._answers = answers
        self._parent = head  # the first commit's parent; fast-import chains the next ones
        self._marks = 0
        self.finished = False
        self.commits = 0
        self._write(b"feature done\n")

    def _write(self, data: bytes) -> None:
        try:
            self._out.write(data)
        except BrokenPipeError:
            raise GitError("git fast-import stopped reading its input") from None

    def blob(self, data: bytes) -> int:
        """Store ``data``; its mark for ``commit``."""
        self._marks += 1
        self._write(b"blob\nmark :%d\ndata %d\n" % (self._marks, len(data)) + data + b"\n")
        return self._marks

    def write_commits(self, rendered: list[bytes]) -> None:
        """Write commits made by ``render_commit``, in their order."""
        self._write(b"".join(rendered))
        self.commits += len(rendered)

    def render_commit(
        self,
        *,
        author: tuple[str, str],
        when: datetime,
        message: str,
        changes: list[tuple[str, str, int | None]],
    ) -> bytes:
        """The stream of one commit by ``author`` (name, e-mail) at ``when``, as author and
        committer (the same input makes the same commit id). ``changes``: ("M", path, mark),
        ("D", path, None) or ("deleteall", "", None), paths relative to DIR. Commits are
        rendered in history order (the first names the branch's head as its parent) and
        written later (``write_commits``)."""
        ident = b"%s <%s> %d +0000" % (
            _ident(author[0]).encode(),
            _ident(author[1]).encode(),
            int(when.timestamp()),
        )
        text = message.encode("utf-8")
        lines = [
            b"commit " + BRANCH.encode(),
            b"author " + ident,
            b"committer " + ident,
            b"data %d" % len(text),
        ]
        body = b"\n".join(lines) + b"\n" + text + b"\n"
        if self._parent is not None:
            body += b"from " + self._parent.encode() + b"\n"
            self._parent = None
        for op, path, mark in changes:
            if op == "M":
                body += b"M 100644 :%d %s\n" % (mark or 0, quote_path(path))
            elif op == "deleteall":  # the tree is what the M lines after it say
                body += b"deleteall\n"
            else:
                body += b"D %s\n" % quote_path(path)
        return body + b"\n"

    def checkpoint(self) -> None:
        """Write what is imported so far and move the branch to the last commit; returns
        once fast-import has (it answers the ``progress`` that follows the checkpoint)."""
        self._write(b"checkpoint\n\nprogress checkpoint\n\n")
        try:
            self._out.flush()
        except BrokenPipeError:
            raise GitError("git fast-import stopped reading its input") from None
        if not self._answers.readline():
            raise GitError("git fast-import stopped before its checkpoint")

    def done(self) -> None:
        self._write(b"done\n")
        self._out.flush()
        self.finished = True


def quote_path(path: str) -> bytes:
    """``path`` as a C-style quoted string of the fast-import language: never read as an
    option, a space-separated field or two lines."""
    out = bytearray(b'"')
    for byte in path.encode("utf-8", "surrogateescape"):
        if byte in (0x22, 0x5C):  # " and \
            out += b"\\" + bytes([byte])
        elif byte < 0x20 or byte == 0x7F:
            out += b"\\%03o" % byte
        else:
            out.append(byte)
    return bytes(out + b'"')


def _ident(text: str) -> str:
    """A name or e-mail git accepts in an ident line: no ``<``, ``>`` or control character."""
    cleaned = "".join(" " if ch in "<>" or ord(ch) < 0x20 or ord(ch) == 0x7F else ch for ch in text)
    return " ".join(cleaned.split()) or "unknown"


def _parse_commit(record: str) -> Commit:
    commit_id, _, message = record.lstrip("\n").partition("\n")
    trailers: dict[str, str] = {}
    paragraphs = message.strip("\n").split("\n\n")
    for line in paragraphs[-1].splitlines() if paragraphs else []:
        key, sep, value = line.partition(": ")
        if sep and key.startswith("Memfs-"):
            trailers[key] = value
    return Commit(commit_id.strip(), trailers)


def _last_line(data: bytes) -> str:
    lines = [line for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no message"


def author(actor: Actor | None) -> tuple[str, str]:
    """Who wrote a version, as a git author: the session or the API key (their ids: nothing
    else is known of them), with a stable e-mail address that reaches nobody."""
    if actor is None or not actor.id:
        return ("unknown", "unknown@memfs.invalid")
    kind = actor.type.removesuffix("_actor").replace("_", "-") or "actor"
    return (actor.id, address(actor.id, kind))


def address(identity: str, kind: str) -> str:
    """A stable address that reaches nobody: ``<id>@<kind>.memfs.invalid``."""
    local = "".join(
        ch if ch.isascii() and (ch.isalnum() or ch in "._-") else "_" for ch in identity
    )
    return f"{local}@{kind}.memfs.invalid"
