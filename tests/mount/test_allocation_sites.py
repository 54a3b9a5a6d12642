"""``MEMFS_DEBUG_MEMORY_FILE`` (memfs.mount.memory.AllocationSites): the daemon, often root,
writes the tracemalloc sites through ``memfs.host.private``: a link planted at the name is replaced,
never followed; a directory others could swap the file in is refused, logged once, and the
mount goes on."""

from __future__ import annotations

import logging
import os
import stat
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from memfs.mount.memory import AllocationSites


@pytest.fixture
def tracing() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


def test_a_link_planted_at_the_name_is_replaced_not_followed(tmp_path: Path, tracing: None) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    sites_file = tmp_path / "sites.txt"
    sites_file.symlink_to(victim)
    AllocationSites(str(sites_file)).write()
    assert victim.read_text() == "precious\n"
    assert not sites_file.is_symlink()
    assert sites_file.read_text().startswith("traced: ")
    assert stat.S_IMODE(sites_file.stat().st_mode) == 0o600


async def test_a_directory_others_can_write_is_refused_and_the_task_ends(
    tmp_path: Path,
    tracing: None,
    autojump_clock: trio.abc.Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # no sticky bit: another user could swap the file
    sites = AllocationSites(str(shared / "sites.txt"), interval=1.0)
    with caplog.at_level(logging.WARNING, logger="memfs.mount.memory"):
        with trio.fail_after(5):
            await sites.run()  # returns (does not raise): a debugging aid never stops a mount
    assert os.listdir(shared) == []
    assert [r.getMessage() for r in caplog.records] == [
        f"MEMFS_DEBUG_MEMORY_FILE: the allocation sites file {shared}/sites.txt is in a "
        "directory other users can write to (mode 0777, no sticky bit): put it in a directory "
        "only its owner can write to; not written again"
    ]
