"""A core shows its door and nothing else: its public attributes are ``StoreCore``'s, and the
parts it is made of are reached through ``Vfs.parts`` only (issue 33: the core's tests reached
into 27 copies of them)."""

from __future__ import annotations

import dataclasses

from kit.fake_store import FakeStore
from memfs.core import StoreCore
from memfs.core.build import build_core
from memfs.core.ops.parts import CoreParts

from .helpers import CONFIG


def door_names() -> set[str]:
    """Every member of the door: its methods, properties and declared attributes."""
    names = {name for name in dir(StoreCore) if not name.startswith("_")}
    for role in StoreCore.__mro__:
        names.update(getattr(role, "__annotations__", {}))
    return names


def test_a_core_shows_the_door_and_its_parts_only_as_parts() -> None:
    vfs = build_core(FakeStore(), CONFIG)
    public = {name for name in vars(vfs) if not name.startswith("_")}
    assert public - door_names() == {"parts"}
    # the write-back queue, the journal, the caches...: in ``parts``, not beside them
    hidden = {field.name for field in dataclasses.fields(CoreParts)} - door_names()
    assert hidden and not hidden & public
    assert isinstance(vfs.parts, CoreParts)
