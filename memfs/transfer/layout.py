"""The tree format of ``memfs export`` and ``memfs import``: how a store's memories lie in a
directory, and memfs's own files beside them. Both commands follow this module and nothing else.

The contract (format 1):

- Each memory is one file at its path below DIR: the memory ``/notes/a.md`` is the file
  ``DIR/notes/a.md``, whose bytes are exactly the memory's content (UTF-8). Directories exist
  only as the files need them (a store has no empty directories).
- memfs's own files live in ``DIR/.memfs/``:
  - ``store.json``: what was exported (``format`` 1, ``api`` ``memory_stores`` or
    ``databricks``, ``store_id``, ``name``, ``description``, and for Databricks ``actor_id`` and
    ``session_id``). Informational: an import does not require it.
  - ``descriptions.json`` (Databricks only; absent for Memory Stores): ``{path: description}``
    of the entries that have a description, keys sorted, one entry per line, so that a diff of
    two exports shows one line per changed description.
  - Other files in it belong to the command that wrote them (``memfs export`` keeps its record
    of the files it wrote there); an import ignores them.
- Reserved names, never written as files and never read as memories: a first segment
  ``.memfs``, and a segment ``.git`` anywhere (a memory ``/.git/hooks/post-commit`` must not
  become a hook on the exporter's machine, nor ``/a/.git/config`` the configuration of a
  repository that ``git`` finds when someone works in ``DIR/a``). The comparison folds case and
  ignores what file systems ignore (trailing dots and spaces on Windows, default-ignorable
  characters on macOS): ``/.GIT/x`` and ``/.Git./x`` are reserved too. An export reports such a
  memory ("not exported: reserved name"); an import never reads those directories.

Memory paths come from a server, and a server (or an agent writing through it) is not trusted
here: ``file_path`` refuses anything that could name a file outside DIR or that no file system
can hold (``UnsafePathError``, with the reason), whatever the API is supposed to allow;
``exported_file`` adds the API's own rules (``memfs.contract.paths``): what an export writes. Nor is
DIR trusted when a command reads back what it wrote there (an export's record of its files): whoever
can write DIR can plant those records, so each path read back passes ``check_tree_file``, the
same rules, before it is used.

This module only maps paths and reads and writes the bytes of memfs's own files; it touches no
file system and no store: the commands do, each in its own safe way.
"""

from __future__ import annotations

import json
import logging
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from memfs.contract import databricks_limits
from memfs.contract.paths import PathError, validate_path

log = logging.getLogger(__name__)

FORMAT = 1
META_DIR = ".memfs"  # memfs's own files, below DIR
STORE_FILE = "store.json"
DESCRIPTIONS_FILE = "descriptions.json"
GIT_DIR = ".git"

API_MEMORY_STORES = "memory_stores"
API_DATABRICKS = "databricks"

NAME_MAX = 255  # bytes of one file name (Linux, macOS, Windows alike)
PATH_MAX = 4096  # bytes of a whole path on Linux: DIR's own length comes on top

RESERVED_REASON = "reserved name"


class UnsafePathError(ValueError):
    """A memory path that must not become a file name; the message is the one-line reason."""


class FormatError(ValueError):
    """One of memfs's own files is not what this format says; the message says what."""


def _folded(segment: str) -> str:
    """``segment`` as a case-folding file system may see it: case folded, default-ignorable
    characters dropped (HFS+ ignores them), trailing dots and spaces dropped (Windows does)."""
    kept = "".join(ch for ch in segment if unicodedata.category(ch) != "Cf")
    return kept.casefold().rstrip(". ")


def is_reserved(memory_path: str) -> bool:
    """Whether the memory at ``memory_path`` (``/a/b``) falls in a reserved name: a first
    segment ``.memfs``, or a ``.git`` segment anywhere (case folded, see the module)."""
    segments = [_folded(s) for s in memory_path.strip("/").split("/")]
    return segments[0] == META_DIR or GIT_DIR in segments


def is_reserved_relative(relative: str) -> bool:
    """``is_reserved`` for a path relative to DIR (``a/b``), as an import walks the tree."""
    return is_reserved("/" + relative)


def file_path(memory_path: str) -> str:
    """The file of the memory ``memory_path`` relative to DIR (``/notes/a.md`` ->
    ``notes/a.md``). ``UnsafePathError`` when it must not become a file: not absolute, an empty,
    ``.`` or ``..`` segment, a NUL, a name or path longer than file systems take, or a reserved
    name (``RESERVED_REASON``)."""
    if not isinstance(memory_path, str) or not memory_path.startswith("/"):
        raise UnsafePathError("not an absolute path")
    if "\0" in memory_path:
        raise UnsafePathError("path contains a NUL character")
    relative = memory_path[1:]
    for segment in relative.split("/"):
        if segment in ("", ".", ".."):
            raise UnsafePathError(f"path has an empty, '.' or '..' segment ({memory_path!r})")
        if len(segment.encode("utf-8", "surrogatepass")) > NAME_MAX:
            raise UnsafePathError(f"a path segment is longer than {NAME_MAX} bytes")
    if len(relative.encode("utf-8", "surrogatepass")) >= PATH_MAX:
        raise UnsafePathError(f"path is longer than {PATH_MAX - 1} bytes")
    if is_reserved(memory_path):
        raise UnsafePathError(RESERVED_REASON)
    return relative


def exported_file(memory_path: str) -> str:
    """``file_path``, for a path the API's rules (``memfs.contract.paths.validate_path``: no control
    character, NFC, at most 20 segments...) allow too: the files an export writes, and the only
    ones it reads back as its own. ``UnsafePathError`` with the reason otherwise."""
    try:
        validate_path(memory_path)
    except PathError as exc:
        raise UnsafePathError(str(exc)) from None
    except UnicodeError:  # a lone surrogate (JSON may hold one): no file name is made of it
        raise UnsafePathError("path is not UTF-8") from None
    return file_path(memory_path)


def unsafe(memory_path: str) -> str | None:
    """Why the memory ``memory_path`` is not exported (``exported_file``'s reason; None: it
    is)."""
    try:
        exported_file(memory_path)
    except UnsafePathError as exc:
        return str(exc)
    return None


# memfs's own files an export writes below DIR (beside the memories' files)
OWN_FILES = frozenset({f"{META_DIR}/{STORE_FILE}", f"{META_DIR}/{DESCRIPTIONS_FILE}"})


def check_tree_file(relative: object) -> str:
    """``relative`` if it is a file an export writes below DIR (``a/b``, as its records name
    them): one of ``OWN_FILES`` or a memory's file (``exported_file``); else ``UnsafePathError``
    with the reason. For every path read back from DIR, where anyone who can write DIR may have
    planted it (``../../etc/x``...)."""
    if not isinstance(relative, str):
        raise UnsafePathError("not a string")
    if relative in OWN_FILES:
        return relative
    return exported_file("/" + relative)


def memory_path(relative: str) -> str:
    """The memory a file relative to DIR stands for (``notes/a.md`` -> ``/notes/a.md``).
    ``UnsafePathError`` for what ``file_path`` would refuse (the API checks the rest)."""
    path = "/" + str(PurePosixPath(relative)) if relative else "/"
    if path != "/" + relative:  # a doubled or trailing '/', './', or no name at all
        raise UnsafePathError(f"not a normal relative path ({relative!r})")
    file_path(path)
    return path


@dataclass(frozen=True)
class StoreInfo:
    """``.memfs/store.json``: which store a tree was exported from."""

    api: str  # API_MEMORY_STORES or API_DATABRICKS
    store_id: str
    name: str = ""
    description: str = ""
    actor_id: str | None = None  # Databricks
    session_id: str | None = None  # Databricks; None: the session-less entries

    def to_bytes(self) -> bytes:
        data: dict[str, Any] = {
            "format": FORMAT,
            "api": self.api,
            "store_id": self.store_id,
            "name": self.name,
            "description": self.description,
        }
        if self.api == API_DATABRICKS:
            data["actor_id"] = self.actor_id
            data["session_id"] = self.session_id
        return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> StoreInfo:
        """Read ``store.json``; ``FormatError`` if it is not one (or of a newer format)."""
        obj = _json_object(data, STORE_FILE)
        if obj.get("format") != FORMAT:
            raise FormatError(f"{STORE_FILE}: format {obj.get('format')!r}, expected {FORMAT}")
        api = obj.get("api")
        if api not in (API_MEMORY_STORES, API_DATABRICKS):
            raise FormatError(f"{STORE_FILE}: unknown api {api!r}")
        fields = {}
        for key in ("store_id", "name", "description", "actor_id", "session_id"):
            value = obj.get(key)
            if value is not None and not isinstance(value, str):
                raise FormatError(f"{STORE_FILE}: {key} is not a string")
            fields[key] = value
        if not fields["store_id"]:
            raise FormatError(f"{STORE_FILE}: no store_id")
        return cls(
            api=api,
            store_id=str(fields["store_id"]),
            name=fields["name"] or "",
            description=fields["description"] or "",
            actor_id=fields["actor_id"],
            session_id=fields["session_id"],
        )


def dump_descriptions(descriptions: Mapping[str, str]) -> bytes:
    """``descriptions.json`` for ``{memory path: description}``: deterministic (keys sorted),
    one entry per line, empty descriptions left out (an entry without one)."""
    lines = [
        f"  {json.dumps(path, ensure_ascii=False)}: {json.dumps(text, ensure_ascii=False)}"
        for path, text in sorted(descriptions.items())
        if text
    ]
    body = ",\n".join(lines)
    return ("{\n" + body + "\n}\n" if lines else "{}\n").encode("utf-8")


# descriptions.json: at most one entry per entry a store can hold, each refused or kept alone
MAX_DESCRIPTION_ENTRIES = databricks_limits.MAX_ENTRIES_PER_STORE
# and a value (refused) nested at most this deep: a planted file cannot exhaust the stack
MAX_DESCRIPTION_NESTING = 32

_SPACE = re.compile(rb"[ \t\n\r]*")
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_SCALAR = re.compile(rb"-?[0-9][0-9.eE+-]*|true|false|null")


@dataclass
class Descriptions:
    """``descriptions.json`` as read: the descriptions (path -> text), and each entry refused
    with its one-line reason: (the memory path whose description it is, reason), or (None,
    reason) for an entry whose key is no memory path."""

    entries: dict[str, str] = field(default_factory=dict)
    refused: list[tuple[str | None, str]] = field(default_factory=list)


def load_descriptions(data: bytes | bytearray) -> Descriptions:
    """Read ``descriptions.json`` (``{path: text}``) entry by entry, never as one JSON value:
    an entry whose key is not a memory path or whose value is not text (a number, an array, a
    lone surrogate...) is refused alone and the others kept; ``FormatError`` if the file is not
    a JSON object, has more than ``MAX_DESCRIPTION_ENTRIES`` entries or a value nested deeper
    than ``MAX_DESCRIPTION_NESTING``. Only one string is decoded at a time: the memory it takes
    is the descriptions', not a parse tree of the file."""
    reader = _JsonReader(data)
    found = Descriptions()
    reader.expect(b"{")
    if reader.peek() == b"}":
        reader.pos += 1
    else:
        while True:
            key = reader.string()
            reader.expect(b":")
            value: bytes | None = None  # None: not a string
            if reader.peek() == b'"':
                value = reader.string()
            else:
                reader.skip_value()
            if len(found.entries) + len(found.refused) >= MAX_DESCRIPTION_ENTRIES:
                raise FormatError(
                    f"{DESCRIPTIONS_FILE}: more than {MAX_DESCRIPTION_ENTRIES} entries"
                )
            _description_entry(key, value, found)
            if reader.peek() == b"}":
                reader.pos += 1
                break
            reader.expect(b",")
    if reader.peek() != b"":
        raise reader.error("nothing after the object")
    return found


def _description_entry(key: bytes, value: bytes | None, found: Descriptions) -> None:
    """One entry of ``descriptions.json`` (its key and value as JSON, None: not a string) into
    ``found``."""
    path = _json_text(key)
    if path is None:
        found.refused.append((None, "an entry whose path is not UTF-8 text"))
        return
    try:
        exported_file(path)  # the API's rules, and a file a tree can hold
    except UnsafePathError as exc:
        found.refused.append((None, f"the entry {path!r}: not a memory path ({exc})"))
        return
    text = None if value is None else _json_text(value)
    if text is None:
        what = "not text" if value is None else "not valid UTF-8 text"
        found.refused.append((path, f"its description in {DESCRIPTIONS_FILE} is {what}"))
        return
    found.entries[path] = text


def _json_text(token: bytes) -> str | None:
    """The text of a JSON string token, if it is valid and UTF-8 (no lone surrogate)."""
    try:
        text = json.loads(token.decode("utf-8"))  # never another encoding json.loads guesses
        text.encode("utf-8")
    except (ValueError, UnicodeError):
        return None
    return text if isinstance(text, str) else None


class _JsonReader:
    """The tokens of a JSON text, read from ``pos`` on (only what ``load_descriptions``
    needs)."""

    def __init__(self, data: bytes | bytearray) -> None:
        self.data = data
        self.pos = 0

    def error(self, what: str) -> FormatError:
        return FormatError(
            f"{DESCRIPTIONS_FILE}: not a JSON object of texts ({what} at byte {self.pos})"
        )

    def peek(self) -> bytes | bytearray:
        """The next byte that is not white space (b"": the end)."""
        self.pos = _SPACE.match(self.data, self.pos).end()  # type: ignore[union-attr]
        return self.data[self.pos : self.pos + 1]

    def expect(self, token: bytes) -> None:
        if self.peek() != token:
            raise self.error(f"{token.decode()!r} expected")
        self.pos += 1

    def string(self) -> bytes:
        self.peek()
        match = _STRING.match(self.data, self.pos)
        if match is None:
            raise self.error("a string expected")
        self.pos = match.end()
        return bytes(match.group())

    def skip_value(self) -> None:
        """Pass over a value that is not a string (checked only as far as needed to find its
        end, nested at most ``MAX_DESCRIPTION_NESTING`` deep)."""
        depth = 0
        while True:
            token = self.peek()
            if token == b'"':
                self.string()
            elif token in (b"[", b"{"):
                depth += 1
                if depth > MAX_DESCRIPTION_NESTING:
                    raise self.error(f"a value nested deeper than {MAX_DESCRIPTION_NESTING}")
                self.pos += 1
                continue
            elif token in (b"]", b"}") and depth > 0:
                depth -= 1
                self.pos += 1
            elif token in (b",", b":") and depth > 0:
                self.pos += 1
                continue
            else:
                match = _SCALAR.match(self.data, self.pos)
                if match is None:
                    raise self.error("a value expected")
                self.pos = match.end()
            if depth == 0:
                return


def _json_object(data: bytes, name: str) -> dict[str, Any]:
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"{name}: not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise FormatError(f"{name}: not a JSON object")
    return obj
