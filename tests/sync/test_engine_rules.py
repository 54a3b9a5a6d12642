"""The sync engine's three-way rule, row by row, in process: a core over a ``FakeStore`` (the
store-API seam's test double), DIR a temporary directory, one pass at a time. Fast and exact
where the end-to-end tests (``test_both_ways``, ``test_conflicts``) wait on a real server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kit.fake_store import FakeStore
from memfs.core.build import build_core
from memfs.core.model.config import VfsConfig
from memfs.sync.basis import Basis
from memfs.sync.engine import SyncEngine
from memfs.sync.localdir import SYNC_LOCAL_NAMES, LocalDir

# listings never trusted past a pass (no change feed here): each pass sees the store as it is;
# no grace for deletes and no delay for uploads (the flush at the end of each step runs them)
CONFIG = VfsConfig(listing_ttl=0.0, grace=0.0, local_names=SYNC_LOCAL_NAMES)


class Synced:
    """A store, DIR, and the engine between them."""

    def __init__(self, store: FakeStore, directory: Path, state: Path, read_only: bool) -> None:
        self.store = store
        self.dir = directory
        config = VfsConfig(
            listing_ttl=0.0, grace=0.0, local_names=SYNC_LOCAL_NAMES, read_only=read_only
        )
        self.core = build_core(store, config)
        self.basis = Basis(state / "basis.json")
        self.engine = SyncEngine(
            self.core,
            LocalDir(directory),
            self.basis,
            max_bytes=store.capabilities.max_content_bytes,
            kept_dir=state / "kept",
        )

    async def step(self) -> None:
        """A full comparison, then every upload it queued."""
        self.engine.rescan_soon()
        await self.engine.sync_pass()
        assert await self.core.flush_all() == []

    def local(self, path: str) -> Path:
        return self.dir / path.lstrip("/")


@pytest.fixture
async def synced(tmp_path: Path) -> AsyncIterator[Synced]:
    store = FakeStore()
    store.seed("/a.md", "v1\n")
    store.seed("/d/b.md", "bee\n")
    (tmp_path / "dir").mkdir()
    (tmp_path / "state").mkdir(mode=0o700)
    (tmp_path / "state" / "kept").mkdir(mode=0o700)
    yield Synced(store, tmp_path / "dir", tmp_path / "state", read_only=False)


async def first(synced: Synced) -> None:
    await synced.step()
    assert synced.local("/a.md").read_text() == "v1\n"
    assert synced.local("/d/b.md").read_text() == "bee\n"


async def test_changed_here_only_is_uploaded_to_the_same_memory(synced: Synced) -> None:
    await first(synced)
    memory_id = synced.store.head("/a.md").id
    synced.local("/a.md").write_text("v2 here\n")
    await synced.step()
    assert synced.store.contents()["/a.md"] == "v2 here\n"
    assert synced.store.head("/a.md").id == memory_id


async def test_changed_in_the_store_only_is_written_here(synced: Synced) -> None:
    await first(synced)
    synced.store.edit(synced.store.head("/a.md").id, content="v2 there\n")
    await synced.step()
    assert synced.local("/a.md").read_text() == "v2 there\n"


async def test_changed_on_both_sides_keeps_the_stores_and_copies_the_local(
    synced: Synced,
) -> None:
    await first(synced)
    synced.store.edit(synced.store.head("/a.md").id, content="v2 there\n")
    synced.local("/a.md").write_text("v2 here\n")
    await synced.step()
    contents = synced.store.contents()
    assert contents["/a.md"] == "v2 there\n"
    copies = {p: c for p, c in contents.items() if ".conflict-" in p}
    assert list(copies.values()) == ["v2 here\n"]
    await synced.step()  # the copy comes back into DIR
    (copy,) = copies
    assert synced.local(copy).read_text() == "v2 here\n"
    assert synced.local("/a.md").read_text() == "v2 there\n"


async def test_deleted_here_and_changed_there_comes_back(synced: Synced) -> None:
    await first(synced)
    synced.store.edit(synced.store.head("/a.md").id, content="v2 there\n")
    synced.local("/a.md").unlink()
    await synced.step()
    assert synced.store.contents()["/a.md"] == "v2 there\n"
    assert synced.local("/a.md").read_text() == "v2 there\n"


async def test_changed_here_and_deleted_there_is_uploaded_again(synced: Synced) -> None:
    await first(synced)
    synced.store.remove(synced.store.head("/a.md").id)
    synced.local("/a.md").write_text("still needed\n")
    await synced.step()
    assert synced.store.contents()["/a.md"] == "still needed\n"


async def test_deleted_here_is_deleted_there_and_the_reverse(synced: Synced) -> None:
    await first(synced)
    synced.local("/a.md").unlink()
    synced.store.remove(synced.store.head("/d/b.md").id)
    await synced.step()
    assert synced.store.contents() == {}
    assert not synced.local("/d/b.md").exists()
    assert not synced.local("/d").exists()  # emptied: gone, as a store's directory goes


async def test_a_rename_here_keeps_the_memory(synced: Synced) -> None:
    await first(synced)
    memory_id = synced.store.head("/d/b.md").id
    (synced.dir / "e").mkdir()
    synced.local("/d/b.md").rename(synced.local("/e/b2.md"))
    await synced.step()
    assert synced.store.contents() == {"/a.md": "v1\n", "/e/b2.md": "bee\n"}
    assert synced.store.head("/e/b2.md").id == memory_id
    assert synced.engine.stats.renames == 1


async def test_new_on_both_sides_with_different_text_is_a_conflict_not_an_overwrite(
    synced: Synced,
) -> None:
    synced.local("/a.md").write_text("made here first\n")  # DIR not empty at the first sync
    await synced.step()
    contents = synced.store.contents()
    assert contents["/a.md"] == "v1\n"
    assert [c for p, c in contents.items() if ".conflict-" in p] == ["made here first\n"]


async def test_a_refused_file_stays_and_nothing_follows_from_it(synced: Synced) -> None:
    await first(synced)
    synced.local("/a.md").write_bytes(b"\xff\xfe binary now")
    await synced.step()
    await synced.step()  # and again: the refused file is left alone, here and there
    assert synced.store.contents()["/a.md"] == "v1\n"
    assert synced.local("/a.md").read_bytes() == b"\xff\xfe binary now"
    assert "/a.md" in synced.engine.stats.not_synced
    synced.local("/a.md").write_text("text again\n")
    await synced.step()
    assert synced.store.contents()["/a.md"] == "text again\n"
    assert "/a.md" not in synced.engine.stats.not_synced


async def test_unchanged_files_are_not_read_again(synced: Synced) -> None:
    await first(synced)
    reads_before = synced.store.calls["read"]
    await synced.step()
    await synced.step()
    assert synced.store.calls["read"] == reads_before
    assert synced.engine.stats.uploads == 0 and synced.engine.stats.downloads == 2


async def test_a_read_only_store_puts_its_version_back(tmp_path: Path) -> None:
    store = FakeStore()
    store.seed("/rule.md", "the rule\n")
    (tmp_path / "dir").mkdir()
    (tmp_path / "state").mkdir(mode=0o700)
    (tmp_path / "state" / "kept").mkdir(mode=0o700)
    synced = Synced(store, tmp_path / "dir", tmp_path / "state", read_only=True)
    await synced.step()
    rule = synced.local("/rule.md")
    rule.chmod(0o644)
    rule.write_text("changed here\n")
    await synced.step()
    assert rule.read_text() == "the rule\n"
    assert store.contents() == {"/rule.md": "the rule\n"}
    kept = Path(synced.engine.stats.put_back["/rule.md"])
    assert kept.read_text() == "changed here\n"


async def test_a_full_comparison_says_how_long_it_took(synced: Synced) -> None:
    await first(synced)
    took = synced.engine.stats.last_rescan_seconds
    assert took is not None and 0 <= took < 5
    synced.engine.stats.last_rescan_seconds = None
    synced.engine.mark_local([synced.local("/a.md")])
    await synced.engine.sync_pass()  # a pass of one path is no full comparison
    assert synced.engine.stats.last_rescan_seconds is None
    await synced.step()
    assert synced.engine.stats.last_rescan_seconds is not None


async def test_a_first_copy_fetches_the_store_in_bulk(tmp_path: Path) -> None:
    store = FakeStore()
    for d in range(3):
        for n in range(25):  # 25 a directory: two pages of 20 each
            store.seed(f"/d{d}/m{n}.md", f"memory {d}/{n}\n")
    store.seed("/top.md", "top\n")
    (tmp_path / "dir").mkdir()
    (tmp_path / "state").mkdir(mode=0o700)
    synced = Synced(store, tmp_path / "dir", tmp_path / "state", read_only=False)
    await synced.step()
    assert synced.local("/d2/m24.md").read_text() == "memory 2/24\n"
    assert store.calls["read"] == 0  # no memory fetched alone
    assert store.calls["list_subtree_page"] == 6  # each directory's sub-tree: 2 pages
    # the root's page (its file's content with it), then the walk's 4 listings: here no listing
    # is trusted past a pass (CONFIG); a change feed vouches for them in a real sync
    assert store.calls["list_directory_page"] == 5
