"""Fixes of an audit of the mount, each checked on a real mount.

Oversized writes leave nothing behind, refused files are kept and reported, errors go to the
writer only, the state directory is ours, journals and lock files do not pile up, and
``/.versions`` entries expire quickly.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from mount.conftest import MountedStore, wait_for


def test_clean_umount_leaves_no_journal_or_lock_files(
    mount_factory: Callable[..., MountedStore], tmp_path: Path
) -> None:
    cache = tmp_path / "journals"
    m = mount_factory("--cache-dir", str(cache))
    (m.path / "a.md").write_text("a\n")
    m.settle()
    store_dir = cache / m.store_id
    assert store_dir.is_dir()
    assert len(list(store_dir.glob("journal-*.lock"))) <= 2  # the slot in use (and a probe)
    assert m.umount().returncode == 0
    assert list(store_dir.iterdir()) == []
    # the fixtures keep journals out of ~/.cache
    assert m.env["XDG_CACHE_HOME"].startswith(str(tmp_path))


def test_versions_entries_expire_after_a_second(mount_factory: Callable[..., MountedStore]) -> None:
    m = mount_factory(memories={"/plan.md": "v1"})
    for content in ("v2 secret", "v3"):
        (m.path / "plan.md").write_text(content)
        m.settle()
    history = m.path / ".versions" / "history" / "plan.md"
    modified = sorted(os.listdir(history))[1]
    assert "-modified-" in modified
    assert (history / modified).read_text() == "v2 secret"  # the kernel now holds the entry
    middle = m.versions()[1]  # newest first: v3, v2, v1
    m.sdk.beta.memory_stores.memory_versions.redact(middle.id, memory_store_id=m.store_id)
    wait_for(lambda: modified + "-redacted" in os.listdir(history), timeout=4.0)
    # the old name disappears once its entry expires: 1 s, not the mount's 10 s
    wait_for(lambda: not os.path.lexists(history / modified), timeout=3.0)
