"""Every way a mount ends uploads what is pending first, deferred renames and deletes included
(docs/semantics.md, "Processes"): ``memfs umount``, ``fusermount3 -u`` and ``-uz``, ``umount -l``,
a connection aborted through ``/sys/fs/fuse/connections``, SIGTERM and SIGINT. (A session stop
runs ``memfs umount``.)

Each test renames and deletes files inside a grace window far longer than the test, ends the
mount, waits for the daemon to exit and then checks the store and the journal.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.journals import journal_records
from support.mounts import MountedStore, daemon_alive, memfs
from support.waiting import wait_for

from memfs.mount.statedir import is_dead_mount, state_path

FUSECTL = Path("/sys/fs/fuse/connections")


@pytest.fixture(scope="module")
def fusectl() -> Iterator[Path]:
    """The fusectl directory, mounted for these tests if it is not and unmounted after them
    (root may; else the test is skipped)."""
    mounted_here = False
    if not os.path.ismount(FUSECTL):
        done = subprocess.run(
            ["mount", "-t", "fusectl", "none", str(FUSECTL)], capture_output=True, check=False
        )
        if done.returncode != 0:
            pytest.skip(f"fusectl is not mounted and cannot be: {done.stderr.strip()!r}")
        mounted_here = True
    try:
        yield FUSECTL
    finally:
        if mounted_here:
            subprocess.run(["umount", str(FUSECTL)], capture_output=True, check=False)


def abort_connection(m: MountedStore) -> None:
    """What the soak did to a mount: its kernel connection aborted from outside (fusectl)."""
    connection = FUSECTL / str(os.minor(os.stat(m.path).st_dev))
    (connection / "abort").write_text("1")


def run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


def send(signum: signal.Signals) -> Callable[[MountedStore], None]:
    def kill(m: MountedStore) -> None:
        assert m.pid is not None
        os.kill(m.pid, signum)

    return kill


ENDINGS: dict[str, Callable[[MountedStore], object]] = {
    "memfs umount": lambda m: memfs("umount", str(m.path), env=m.env),
    "fusermount3 -u": lambda m: run("fusermount3", "-u", str(m.path)),
    "fusermount3 -uz": lambda m: run("fusermount3", "-uz", str(m.path)),
    "umount -l": lambda m: run("umount", "-l", str(m.path)),
    "connection abort": abort_connection,
    "SIGTERM": send(signal.SIGTERM),
    "SIGINT": send(signal.SIGINT),
}


@pytest.mark.parametrize("ending", list(ENDINGS))
def test_every_ending_uploads_deferred_renames_and_deletes(
    mount_factory: Callable[..., MountedStore],
    tmp_path: Path,
    ending: str,
    request: pytest.FixtureRequest,
) -> None:
    if ending == "connection abort":
        request.getfixturevalue("fusectl")
    cache = tmp_path / "cache"
    m = mount_factory(
        "--grace",
        "600",
        "--cache-dir",
        str(cache),
        memories={"/gone.md": "G\n", "/old.md": "O\n", "/d/a.md": "A\n", "/d/b.md": "B\n"},
    )
    pid = m.pid
    assert pid is not None
    os.unlink(m.path / "gone.md")
    os.rename(m.path / "old.md", m.path / "new.md")
    os.rename(m.path / "d" / "a.md", m.path / "d" / "c.md")
    os.unlink(m.path / "d" / "b.md")
    (m.path / "made.md").write_text("M\n")
    assert journal_records(cache) == 5  # all of it waits: the grace window is ten minutes
    assert m.paths() == {"/gone.md", "/old.md", "/d/a.md", "/d/b.md"}
    ENDINGS[ending](m)
    wait_for(lambda: not daemon_alive(pid), timeout=40)
    assert m.paths() == {"/new.md", "/d/c.md", "/made.md"}
    assert m.content("/new.md") == "O\n" and m.content("/made.md") == "M\n"
    assert journal_records(cache) == 0
    assert "Traceback" not in m.log()
    # the report is left for `memfs umount` (consumed by it when that was the ending)
    report = state_path(str(m.path), "report.json")
    assert report.exists() != (ending == "memfs umount")
    if ending == "connection abort":
        # nobody can unmount an aborted connection but root or its owner: `memfs umount`
        # detaches it and prints the daemon's report (clean), not "its daemon had died"
        result = memfs("umount", str(m.path), env=m.env)
        assert result.returncode == 0, result.stderr
        assert not is_dead_mount(str(m.path)) and not os.path.ismount(m.path)
        assert not report.exists()
