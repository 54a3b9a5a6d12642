"""Path rules shared by the server and the filesystem."""

from __future__ import annotations

import re

import pytest

from memfs.contract import paths


@pytest.mark.parametrize(
    "path",
    ["/a", "/notes/todo.md", "/a/b/c/d.txt", "/" + "x" * 1023, "/" + "/".join("s" * 20), "/é.md"],
)
def test_valid_paths(path: str) -> None:
    assert paths.validate_path(path) == path


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ("a", "start with '/'"),
        ("/", "empty"),
        ("/a//b", "empty"),
        ("/a/", "empty"),
        ("/a/./b", "'.'"),
        ("/a/../b", "'..'"),
        ("/a\x00b", "U+0000"),
        ("/a\nb", "U+000A"),
        ("/a\u200bb", "U+200B"),
        ("/a\u2028b", "U+2028"),
        ("/a\u2029b", "U+2029"),  # paragraph separator: would split the name in a listing
        ("/e\u0301.md", "Normalization Form C"),
        ("/" + "x" * 1024, "1024 bytes"),
        ("/" + "/".join("s" * 21), "20 segments"),
    ],
)
def test_invalid_paths(path: str, fragment: str) -> None:
    with pytest.raises(paths.PathError, match=re.escape(fragment)):
        paths.validate_path(path)


def test_too_long_is_its_own_class() -> None:
    with pytest.raises(paths.PathTooLongError):
        paths.validate_path("/" + "é" * 512)  # 1,024 bytes of é plus the slash


def test_a_file_name_cannot_smuggle_a_slash() -> None:
    """A name given to create or rename in one directory cannot reach into another."""
    paths.check_segment("notes.md")
    for bad in ("a/b", "/", "a/"):
        with pytest.raises(paths.PathError, match="'/'"):
            paths.check_segment(bad)


def test_prefix_rules() -> None:
    assert paths.validate_prefix("/") == "/"
    assert paths.validate_prefix("/notes/") == "/notes/"
    for bad in ("/notes", "notes/", "//", "/a//"):
        with pytest.raises(paths.PathError):
            paths.validate_prefix(bad)


def test_join_split_and_ancestors() -> None:
    assert paths.join("/", "a") == "/a"
    assert paths.join("/a", "b") == "/a/b"
    assert paths.split("/a/b/c") == ("/a/b", "c")
    assert paths.split("/c") == ("/", "c")
    assert paths.ancestors("/a/b/c") == ["/a", "/a/b"]
    assert paths.ancestors("/c") == []
    assert paths.ancestors("/X/aX/X") == ["/X", "/X/aX"]  # names are not trimmed
    assert paths.as_prefix("/") == "/"
    assert paths.as_prefix("/a") == "/a/"
    assert paths.is_below("/a/b", "/a")
    assert not paths.is_below("/ab", "/a")
    assert not paths.is_below("/a", "/a")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Demo Memory", "demo-memory"),
        ("  Team -- Notes!! ", "team-notes"),
        ("user_42/prefs", "user-42-prefs"),
        ("ALLCAPS", "allcaps"),
    ],
)
def test_slug(name: str, expected: str) -> None:
    # (mutmut's strip("XX-XX") survives: after lower() no "X" is left to strip)
    assert paths.slug(name) == expected


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("a", "path must start with '/'"),
        ("/a//b", "a path segment cannot be empty"),
        ("/a/../b", "a path segment cannot be '..'"),
        ("/a\u200bb", "path contains a control or format character U+200B"),
        ("/e\u0301", "path is not in Unicode Normalization Form C"),
        ("/" + "x" * 1024, "path is longer than 1024 bytes"),
        ("/" + "/".join("s" * 21), "path has more than 20 segments"),
        ("/a", None),
    ],
)
def test_each_refusal_says_which_rule_in_one_line(path: str, message: str | None) -> None:
    """The message is the body of the server's 400 and of the mount's log line: it names the
    rule broken, whole."""
    assert paths.is_valid_path(path) is (message is None)
    if message is not None:
        with pytest.raises(paths.PathError) as refused:
            paths.validate_path(path)
        assert str(refused.value) == message


def test_segment_and_prefix_refusals_say_which_rule() -> None:
    with pytest.raises(paths.PathError) as refused:
        paths.check_segment("a/b")
    assert str(refused.value) == "a path segment cannot contain '/'"
    with pytest.raises(paths.PathError) as refused:
        paths.validate_prefix("/a")
    assert str(refused.value) == "path_prefix must start and end with '/'"


@pytest.mark.parametrize("value", [None, 42, b"/a"])
def test_a_path_that_is_not_a_string_is_refused(value: object) -> None:
    """JSON can carry anything where a path belongs: it is a PathError (a 400), not a crash."""
    with pytest.raises(paths.PathError, match="start with '/'"):
        paths.validate_path(value)  # type: ignore[arg-type]
    assert not paths.is_valid_path(value)  # type: ignore[arg-type]


def test_parent_and_basename() -> None:
    assert (paths.parent("/a/b/c"), paths.basename("/a/b/c")) == ("/a/b", "c")
    assert (paths.parent("/c"), paths.basename("/c")) == ("/", "c")


def test_prefix_of_a_nested_directory_is_validated_whole() -> None:
    assert paths.validate_prefix("/a/b/") == "/a/b/"
    for bad in ("/a/./", "/a/\x00/", "/" + "/".join("s" * 21) + "/"):
        with pytest.raises(paths.PathError):
            paths.validate_prefix(bad)
