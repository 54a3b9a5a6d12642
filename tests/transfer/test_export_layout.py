"""The tree format (``memfs.transfer.layout``): paths, reserved names, memfs's own files."""

from __future__ import annotations

import json

import pytest

from memfs.transfer import layout


@pytest.mark.parametrize(
    ("memory", "relative"),
    [("/a", "a"), ("/notes/a.md", "notes/a.md"), ("/é/\u00e9 x.md", "é/\u00e9 x.md")],
)
def test_paths_map_both_ways(memory: str, relative: str) -> None:
    assert layout.file_path(memory) == relative
    assert layout.memory_path(relative) == memory


@pytest.mark.parametrize(
    ("memory", "reason"),
    [
        ("a", "not an absolute path"),
        ("/", "empty"),
        ("/a//b", "empty"),
        ("/a/", "empty"),
        ("/a/./b", "'.'"),
        ("/../etc/passwd", "'..'"),
        ("/a/../../b", "'..'"),
        ("/a\0b", "NUL"),
        ("/" + "x" * 256, "longer than 255 bytes"),
        ("/" + "/".join(["x" * 200] * 21), "longer than 4095 bytes"),
        ("/.git/hooks/post-commit", "reserved name"),
        ("/.GIT/config", "reserved name"),
        ("/.Git./config", "reserved name"),  # Windows drops the trailing dot
        ("/.g\u200cit/config", "reserved name"),  # HFS+ ignores the joiner
        ("/deep/.git/config", "reserved name"),  # a repository git finds below DIR
        ("/.memfs/store.json", "reserved name"),
        ("/.MemFS/x", "reserved name"),
    ],
)
def test_unsafe_paths_are_refused_with_a_reason(memory: str, reason: str) -> None:
    with pytest.raises(layout.UnsafePathError, match=reason.replace(".", r"\.")):
        layout.file_path(memory)


def test_reserved_names() -> None:
    assert layout.is_reserved("/.git")
    assert layout.is_reserved("/a/.GIT/b")
    assert layout.is_reserved("/.memfs/descriptions.json")
    assert not layout.is_reserved("/a/.memfs/x")  # only DIR's own .memfs is memfs's
    assert not layout.is_reserved("/.gitignore")
    assert not layout.is_reserved("/git/x")
    assert layout.is_reserved_relative(".git/hooks/pre-commit")
    assert not layout.is_reserved_relative("notes/a.md")


@pytest.mark.parametrize("relative", ["", "a//b", "a/", "./a", "a/./b", "a/../b", "/a", ".git/x"])
def test_memory_path_refuses_odd_relative_paths(relative: str) -> None:
    with pytest.raises(layout.UnsafePathError):
        layout.memory_path(relative)


def test_descriptions_are_deterministic_one_per_line() -> None:
    data = layout.dump_descriptions({"/b": "second\nline", "/a": "first ✓", "/c": ""})
    assert data == layout.dump_descriptions({"/a": "first ✓", "/b": "second\nline"})
    lines = data.decode().splitlines()
    assert lines == ["{", '  "/a": "first ✓",', '  "/b": "second\\nline"', "}"]
    assert layout.load_descriptions(data).entries == {"/a": "first ✓", "/b": "second\nline"}
    assert layout.dump_descriptions({}) == b"{}\n"
    assert layout.load_descriptions(b"{}\n") == layout.Descriptions()


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"[1]", "not a JSON object"),
        (b"{", "a string expected"),
        (b'{"/a": "x",}', "a string expected"),
        (b'{"/a": "x"} {}', "nothing after the object"),
        (b'{"/a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested deeper than 32"),
    ],
)
def test_a_file_that_is_no_json_object_is_a_format_error(data: bytes, fragment: str) -> None:
    with pytest.raises(layout.FormatError, match=fragment):
        layout.load_descriptions(data)


def test_each_bad_description_entry_is_refused_alone() -> None:
    data = (
        b'{"/a": "\\ud800", "/b": 1, "/c": [[1, {"x": [2]}]], "../x": "d", "/d": "kept",'
        b' "/e": "\x01", "/f": "\xff", "/.git/x": "d"}'
    )
    found = layout.load_descriptions(data)
    assert found.entries == {"/d": "kept"}
    not_text = "its description in descriptions.json is not text"
    bad_text = "its description in descriptions.json is not valid UTF-8 text"
    assert found.refused == [
        ("/a", bad_text),
        ("/b", not_text),
        ("/c", not_text),
        (None, "the entry '../x': not a memory path (path must start with '/')"),
        ("/e", bad_text),
        ("/f", bad_text),
        (None, "the entry '/.git/x': not a memory path (reserved name)"),
    ]


def test_store_info_round_trips() -> None:
    ms = layout.StoreInfo(layout.API_MEMORY_STORES, "memstore_1", "Notes", "what for")
    assert json.loads(ms.to_bytes()) == {
        "format": 1,
        "api": "memory_stores",
        "store_id": "memstore_1",
        "name": "Notes",
        "description": "what for",
    }
    assert layout.StoreInfo.from_bytes(ms.to_bytes()) == ms
    db = layout.StoreInfo(layout.API_DATABRICKS, "my-store", actor_id="ann", session_id=None)
    assert json.loads(db.to_bytes())["actor_id"] == "ann"
    assert layout.StoreInfo.from_bytes(db.to_bytes()) == db
    with pytest.raises(layout.FormatError, match="format 2"):
        layout.StoreInfo.from_bytes(b'{"format": 2, "api": "databricks", "store_id": "x"}')
    with pytest.raises(layout.FormatError, match="unknown api"):
        layout.StoreInfo.from_bytes(b'{"format": 1, "api": "s3", "store_id": "x"}')
