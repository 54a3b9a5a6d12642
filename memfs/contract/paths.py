"""Memory paths: validation, joining, splitting, prefixes, and the mount slug of a store name.

The rules are the API's (``docs/memory-api.md``): a path starts with ``/``, has 1 to 20 non-empty
segments, none ``.`` or ``..``, no control or format characters (nor U+2028/U+2029), is NFC, and
is at most 1,024 UTF-8 bytes. The server and the filesystem both validate with this module, so a
name the filesystem accepts is a name the server accepts.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

MAX_PATH_BYTES = 1024
MAX_SEGMENTS = 20
MAX_NAME_BYTES = 255  # a single name component, as the kernel's NAME_MAX


class PathError(ValueError):
    """A path breaks a rule; the message says which."""


class PathTooLongError(PathError):
    pass


def _bad_character(ch: str) -> bool:
    # Cc = control, Cf = format; U+2028/U+2029 are Zl/Zp and are excluded explicitly.
    return unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")


def check_segment(name: str) -> None:
    """Raise PathError unless ``name`` can be one segment of a memory path."""
    if name == "":
        raise PathError("a path segment cannot be empty")
    if name in (".", ".."):
        raise PathError(f"a path segment cannot be {name!r}")
    if "/" in name:
        raise PathError("a path segment cannot contain '/'")
    for ch in name:
        if _bad_character(ch):
            raise PathError(f"path contains a control or format character U+{ord(ch):04X}")
    if unicodedata.normalize("NFC", name) != name:
        raise PathError("path is not in Unicode Normalization Form C")


def validate_path(path: str) -> str:
    """Return ``path`` if it is a valid memory path, else raise PathError."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise PathError("path must start with '/'")
    if len(path.encode("utf-8")) > MAX_PATH_BYTES:
        raise PathTooLongError(f"path is longer than {MAX_PATH_BYTES} bytes")
    segments = path[1:].split("/")
    if len(segments) > MAX_SEGMENTS:
        raise PathError(f"path has more than {MAX_SEGMENTS} segments")
    for segment in segments:
        check_segment(segment)
    return path


def validate_file_path(path: str) -> str:
    """``validate_path``, and no segment over ``MAX_NAME_BYTES``: a path a mount can create (a
    longer name is ENAMETOOLONG there). Databricks entries are created under these rules."""
    validate_path(path)
    for segment in path[1:].split("/"):
        if len(segment.encode("utf-8")) > MAX_NAME_BYTES:
            raise PathTooLongError(f"a path segment is longer than {MAX_NAME_BYTES} bytes")
    return path


def validate_prefix(prefix: str) -> str:
    """Return ``prefix`` if it is a valid ``path_prefix`` (``/`` or ``/a/b/``), else raise."""
    if not prefix.startswith("/") or not prefix.endswith("/"):
        raise PathError("path_prefix must start and end with '/'")
    if prefix != "/":
        validate_path(prefix[:-1])
    return prefix


def is_valid_path(path: str) -> bool:
    return _passes(validate_path, path)


def is_valid_file_path(path: str) -> bool:
    return _passes(validate_file_path, path)


def _passes(check: Callable[[str], str], path: str) -> bool:
    try:
        check(path)
    except PathError:
        return False
    return True


def join(parent: str, name: str) -> str:
    """Join a directory path (``/`` or ``/a/b``) and a name."""
    return ("" if parent == "/" else parent) + "/" + name


def split(path: str) -> tuple[str, str]:
    """``/a/b/c`` -> (``/a/b``, ``c``); ``/c`` -> (``/``, ``c``)."""
    head, _, name = path.rpartition("/")
    return (head or "/", name)


def parent(path: str) -> str:
    return split(path)[0]


def basename(path: str) -> str:
    return split(path)[1]


def as_prefix(directory: str) -> str:
    """The ``path_prefix`` that lists a directory: ``/`` -> ``/``, ``/a`` -> ``/a/``."""
    return directory if directory.endswith("/") else directory + "/"


def is_below(path: str, directory: str) -> bool:
    """True if ``path`` lies strictly below ``directory`` (whole segments)."""
    return path.startswith(as_prefix(directory)) and path != directory


def ancestors(path: str) -> list[str]:
    """Every directory above ``path``, nearest last, without ``/``: ``/a/b/c`` -> [/a, /a/b]."""
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


_SLUG_RUN = re.compile(r"[^a-z0-9]+")


def slug(name: str) -> str:
    """The mount directory name of a store: lowercase, non-alphanumeric runs become one hyphen.

    ``"Demo Memory"`` -> ``demo-memory``. Leading and trailing hyphens are dropped.
    """
    return _SLUG_RUN.sub("-", name.lower()).strip("-")


def shown(text: str) -> str:
    """``text`` (a name or path someone else chose) safe to print on one terminal line, and in
    tab-separated output: control, format and separator characters (newlines, escape sequences,
    tabs) and bytes that were not UTF-8 escaped (``\\x1b``, ``\\u200b``, ``\\udcff``)."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable() or (ch == " "):
            out.append(ch)
        elif ord(ch) < 0x100:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}")
    return "".join(out)
