"""Local scratch without FUSE (``memfs.mount.scratch.Scratch``): the budget, renames, links and
open files as tmpfs has them; the mount tests (test_several_stores) show the same through a
real mount."""

from __future__ import annotations

import os
import stat

import pytest

from memfs.contract.errors import (
    DirectoryNotEmptyError,
    ExistsError,
    InvalidArgumentError,
    NoSpaceError,
    NotPermittedError,
)
from memfs.contract.numbers import SLOT, NumberRange
from memfs.mount.options import StoreSpec, check_slugs
from memfs.mount.scratch import NODE_BYTES, RENAME_EXCHANGE, RENAME_NOREPLACE, Scratch
from memfs.mount.statedir import MountError

ME = (os.getuid(), os.getgid())


def scratch(budget: int = 64 * 1024) -> Scratch:
    return Scratch(NumberRange(1, SLOT), budget=budget, uid=ME[0], gid=ME[1])


def test_the_budget_bounds_what_scratch_holds_and_frees_with_the_last_reference() -> None:
    tree = scratch(budget=NODE_BYTES + 100)
    fh, node = tree.create(1, "f", 0o644, os.O_WRONLY, ME)
    assert tree.write(fh, 0, b"x" * 100) == 100
    with pytest.raises(NoSpaceError):
        tree.write(fh, 100, b"y")  # one byte over: nothing written
    assert bytes(node.data) == b"x" * 100 and tree.enospc == 1
    tree.unlink(1, "f")
    assert tree.used == NODE_BYTES + 100  # still open, still looked up: still held
    assert tree.read(fh, 0, 3) == b"xxx"
    tree.release(fh)
    tree.forget(node.ino, 1)
    assert tree.used == 0 and node.ino not in tree.nodes


def test_hard_links_count_and_keep_the_file() -> None:
    tree = scratch()
    fh, node = tree.create(1, "a", 0o600, os.O_WRONLY, ME)
    tree.write(fh, 0, b"data")
    tree.release(fh)
    directory = tree.make(1, "d", stat.S_IFDIR | 0o755, ME)
    tree.link(node.ino, directory.ino, "b")
    assert node.links == 2
    tree.unlink(1, "a")
    assert tree.lookup(directory.ino, "b") is node and bytes(node.data) == b"data"
    with pytest.raises(NotPermittedError):
        tree.link(directory.ino, 1, "dir-link")  # directories: never


def test_renames_as_on_tmpfs() -> None:
    tree = scratch()
    outer = tree.make(1, "outer", stat.S_IFDIR | 0o755, ME)
    inner = tree.make(outer.ino, "inner", stat.S_IFDIR | 0o755, ME)
    with pytest.raises(InvalidArgumentError):
        tree.rename(1, "outer", inner.ino, "moved", 0)  # into itself
    tree.make(1, "f", stat.S_IFREG | 0o644, ME)
    with pytest.raises(ExistsError):
        tree.rename(1, "f", 1, "outer", RENAME_NOREPLACE)
    tree.make(inner.ino, "g", stat.S_IFREG | 0o644, ME)
    tree.make(1, "empty", stat.S_IFDIR | 0o755, ME)
    with pytest.raises(DirectoryNotEmptyError):
        tree.rename(1, "empty", outer.ino, "inner", 0)  # over a directory that is not empty
    tree.rmdir(1, "empty")
    tree.rename(1, "f", outer.ino, "inner", RENAME_EXCHANGE)
    assert tree.lookup(1, "f") is inner and inner.parent is tree.root
    assert tree.root.links == 4 and outer.links == 2  # ., .., outer, inner: nlink follows
    tree.rename(1, "f", 1, "renamed", 0)
    assert tree.child(1, "f") is None and tree.lookup(1, "renamed") is inner


@pytest.mark.parametrize("slug", ["", ".", "..", "a/b", "a\nb", "tab\there", "x" * 256])
def test_a_slug_names_one_directory_at_the_root(slug: str) -> None:
    with pytest.raises(MountError):
        check_slugs([StoreSpec(slug=slug, store="memstore_x")])


def test_two_stores_never_share_a_slug() -> None:
    with pytest.raises(MountError, match="two stores are named 'a'"):
        check_slugs([StoreSpec(slug="a", store="s1"), StoreSpec(slug="a", store="s2")])
