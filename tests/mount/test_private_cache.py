"""A write-back journal that another local user could have planted is never replayed.

The mount uploads journal records with the mounting user's key; so a cache directory, store
directory or record that is not the user's own, or that others can write to, refuses the mount
with one line saying which path and why, and nothing is uploaded.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from kit.journals import journal_home, journal_records
from kit.mounts import MountedStore
from kit.waiting import wait_for

NOBODY = 65534
WHY = ": a change planted there would be uploaded with your key"


def plant(cache: Path, mounted: MountedStore) -> Path:
    """A journal record as a crashed mount leaves it: create /planted.md holding 'forged'."""
    slot = journal_home(cache, mounted.store_id, mounted.env["ANTHROPIC_BASE_URL"]) / "journal-0"
    slot.mkdir(parents=True, mode=0o700)
    header = {
        "name": "planted",
        "op": "put",
        "path": "/planted.md",
        "memory_id": None,
        "remote_path": None,
        "base_sha": None,
        "written_at": "2026-01-01T00:00:00+00:00",
        "has_data": True,
    }
    record = slot / "planted.rec"
    record.write_bytes(json.dumps(header).encode() + b"\nforged\n")
    record.chmod(0o600)
    return record


@pytest.mark.parametrize(
    "planted_by",
    ["group-writable cache", "other user's store dir", "other user's record", "other user's kept"],
)
def test_a_planted_journal_is_refused_and_nothing_is_uploaded(
    mount_factory: Callable[..., MountedStore], tmp_path: Path, planted_by: str
) -> None:
    if planted_by != "group-writable cache" and os.getuid() != 0:
        pytest.skip("only root can give a file to another user")
    m = mount_factory(mount=False)
    cache = tmp_path / "cache"
    record = plant(cache, m)
    store_dir = record.parent.parent
    if planted_by == "group-writable cache":
        cache.chmod(0o770)
        expected = f"the cache directory {cache} is writable by other users{WHY}"
    elif planted_by == "other user's store dir":
        os.chown(store_dir, NOBODY, NOBODY)
        expected = f"the journal directory {store_dir} is owned by uid {NOBODY}, not us{WHY}"
    elif planted_by == "other user's record":
        os.chown(record, NOBODY, NOBODY)
        expected = f"the journal record {record} is owned by uid {NOBODY}, not us{WHY}"
    else:  # where refused content is copied: theirs to read
        kept = store_dir / "kept"
        kept.mkdir(mode=0o700)
        os.chown(kept, NOBODY, NOBODY)
        expected = (
            f"the directory of refused files {kept} is owned by uid {NOBODY}, not us: refused "
            "content copied there would be theirs to read"
        )

    result = m.mount("--cache-dir", str(cache))
    assert result.returncode == 1 and not os.path.ismount(m.path)
    assert result.stderr.splitlines() == [f"memfs mount: write-back journal: {expected}"]
    # the daemon has exited (mount waits for its answer): nothing can upload any more
    assert m.paths() == set()
    assert journal_records(cache) == 1  # left for the user to look at (and the next mount)

    if planted_by == "other user's record":
        # the control: the same record, made ours, is replayed (the check above would see it)
        os.chown(record, os.getuid(), os.getgid())
        assert m.mount("--cache-dir", str(cache)).returncode == 0
        wait_for(lambda: m.content("/planted.md") == "forged\n")
        assert m.umount().returncode == 0
