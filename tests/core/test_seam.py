"""The store-API seam (memfs.contract.store_api): an API plugs in by implementing the protocol, and
what it lacks is made up in its own adapter, not in the core (docs/architecture.md, "A second store
API"). Here: an API whose rename is a create and a delete (as Databricks Agent Memory's)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from trio.testing import MockClock

from kit.fake_store import FakeStore
from memfs.contract.errors import PreconditionFailedError
from memfs.contract.models import Memory
from memfs.contract.store_api import Capabilities
from memfs.core.model.inodes import ROOT_INODE

from .helpers import running_core


class MovesByCopy:
    """``FakeStore`` behind an adapter whose move makes a new memory (a new id)."""

    def __init__(self, inner: FakeStore) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def capabilities(self) -> Capabilities:
        return dataclasses.replace(self.inner.capabilities, rename_keeps_identity=False)

    async def update(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        path: str | None = None,
        expected_sha256: str | None = None,
    ) -> Memory:
        if path is None:
            return await self.inner.update(
                memory_id, content=content, expected_sha256=expected_sha256
            )
        old = await self.inner.read(memory_id)
        if expected_sha256 is not None and old.content_sha256 != expected_sha256:
            raise PreconditionFailedError(f"{memory_id} changed")
        moved = await self.inner.create(path, old.content or "" if content is None else content)
        await self.inner.delete(memory_id)
        return moved


async def test_a_move_that_makes_a_new_memory_binds_the_file_to_it(
    autojump_clock: MockClock, store: FakeStore, cache_dir: Path
) -> None:
    old = store.seed("/m.md", "one\n")
    async with running_core(MovesByCopy(store), cache_dir) as core:  # type: ignore[arg-type]
        node = core.vfs.parts.state.table.get(await core.ino("m.md"))
        await core.vfs.rename(ROOT_INODE, "m.md", ROOT_INODE, "n.md")
        await core.vfs.fsync_dir()
        moved = store.at("/n.md")
        assert moved is not None and moved.id != old.id
        # bound by the answer itself, not only once a listing shows the new memory
        assert node is not None and node.memory_id == moved.id
        assert (
            core.vfs.parts.state.table.by_id.get(moved.id) is node
            and old.id not in core.vfs.parts.state.table.by_id
        )
        # the next save updates the new memory: no 404, no re-created or conflicting copy
        await core.save("n.md", b"two\n")
        await core.vfs.fsync_dir()
        assert core.vfs.parts.durable.conflict_count == 0 and core.records() == []
    assert store.contents() == {"/n.md": "two\n"}
    assert store.head("/n.md").id == moved.id
