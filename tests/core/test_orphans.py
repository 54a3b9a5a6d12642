"""Handing a deleted store's pending content over as plain files (memfs.core.fetch.orphans)."""

from __future__ import annotations

from pathlib import Path

from memfs.core.fetch.orphans import hand_over


def test_hand_over_writes_plain_files_inside_its_directory(tmp_path: Path) -> None:
    directory, lines = hand_over(
        tmp_path,
        [("/x", b"file"), ("/x/y", b"below"), ("/a/b.md", b"b"), ("/moved.md", None)],
        when="20261201T000000Z",
    )
    assert directory == tmp_path / "orphaned-20261201T000000Z"
    assert (directory / "x" / "y").read_bytes() == b"below"
    assert (directory / "x.file-clash").read_bytes() == b"file"  # the clash rule of the mount
    assert (directory / "a" / "b.md").read_bytes() == b"b"
    assert "/moved.md: no local content to hand over" in lines
    assert f"/a/b.md -> {directory / 'a' / 'b.md'}" in lines


def test_hand_over_never_writes_outside_or_over_a_file(tmp_path: Path) -> None:
    directory, _ = hand_over(tmp_path, [("/../../evil", b"e")], when="t")
    (written,) = directory.iterdir()
    assert written.parent == directory and written.read_bytes() == b"e"
    again, _ = hand_over(tmp_path, [("/a", b"1")], when="t")
    hand_over(tmp_path, [("/a", b"2")], when="t")  # same second: a new name, nothing lost
    assert sorted(p.read_bytes() for p in again.iterdir() if p.name.startswith("a")) == [b"1", b"2"]
