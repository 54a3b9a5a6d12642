"""Every way a mount ends uploads what is pending first, deferred renames and deletes included
(docs/semantics.md, "Processes"): ``memfs umount``, ``fusermount3 -u`` and ``-uz``, ``umount -l``,
a connection aborted through ``/sys/fs/fuse/connections``, SIGTERM and SIGINT. (A session stop
runs ``memfs umount``.)

Each test renames and deletes files inside a grace window far longer than the test, ends the
mount, waits for the daemon to exit and then checks the store and the journal. Then a program
that wrote and never closed: every ending saves what it wrote (``memfs umount`` refuses such a
mount unless ``--force``), and what the store refuses is in a kept copy the report names.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kit.journals import journal_records
from kit.mounts import MountedStore, daemon_alive, memfs
from kit.waiting import wait_for
from kit.writers import HeldWriter
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
    if not os.path.ismount(FUSECTL):  # another test run on this machine unmounted it after use
        run("mount", "-t", "fusectl", "none", str(FUSECTL))
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


# -- a program still writing when the mount ends (docs/semantics.md, "Processes") -----------

HELD = b"written, never closed\n"
AFTER = b"and after the detach\n"


def lazily(*tool: str) -> Callable[[MountedStore, HeldWriter], None]:
    """A lazy unmount from outside, then the daemon is stopped (a shutdown's SIGTERM) while the
    program still holds its file: the kernel connection outlives the mount point until then,
    and what the program writes after the detach reaches the daemon too."""

    def end(m: MountedStore, writer: HeldWriter) -> None:
        assert m.pid is not None
        run(*tool, str(m.path))
        assert not os.path.ismount(m.path) and daemon_alive(m.pid)  # detached, still serving
        writer.write(0, AFTER)
        os.kill(m.pid, signal.SIGTERM)

    return end


HELD_ENDINGS: dict[str, Callable[[MountedStore, HeldWriter], object]] = {
    "memfs umount --force": lambda m, _: memfs("umount", "--force", str(m.path), env=m.env),
    "SIGTERM": lambda m, _: send(signal.SIGTERM)(m),
    "SIGINT": lambda m, _: send(signal.SIGINT)(m),
    "fusermount3 -uz": lazily("fusermount3", "-uz"),
    "umount -l": lazily("umount", "-l"),
    "connection abort": lambda m, _: abort_connection(m),
}


@pytest.mark.parametrize("ending", list(HELD_ENDINGS))
def test_every_ending_saves_what_a_program_wrote_and_never_closed(
    mount_factory: Callable[..., MountedStore], ending: str, request: pytest.FixtureRequest
) -> None:
    if ending == "connection abort":
        request.getfixturevalue("fusectl")
    m = mount_factory(memories={"/notes/log.md": "first\n"})
    pid = m.pid
    assert pid is not None
    files = [(m.path / "notes" / "busy.md", "new"), (m.path / "notes" / "log.md", "append")]
    with HeldWriter(files) as writer:
        writer.write(0, HELD)
        writer.write(1, b"second\n")
        HELD_ENDINGS[ending](m, writer)
        wait_for(lambda: not daemon_alive(pid), timeout=40)
        assert writer.close(0) == "close: Transport endpoint is not connected"
    if ending == "connection abort":  # its mount point stays dead until this detaches it
        assert memfs("umount", str(m.path), env=m.env).returncode == 0
    after = AFTER if ending in ("fusermount3 -uz", "umount -l") else b""
    assert m.content("/notes/busy.md") == (HELD + after).decode()
    assert m.content("/notes/log.md") == "first\nsecond\n"
    assert "Traceback" not in m.log()


def test_umount_refuses_a_mount_written_to_then_force_saves_it_and_says_so(
    mount_factory: Callable[..., MountedStore],
) -> None:
    m = mount_factory(memories={"/notes/mapped.md": "aaaa\n"})
    files = [(m.path / "notes" / "busy.md", "new"), (m.path / "notes" / "mapped.md", "rdwr")]
    # a process names itself: its name is printed escaped, never as terminal controls
    with HeldWriter(files, command="ed\x1b[2J\nx") as writer:
        writer.write(0, HELD)
        writer.map(1, b"bbbb\n")  # a dirty page in the kernel: only a syncfs hands it over
        refused = memfs("umount", str(m.path), env=m.env)
        assert refused.returncode == 7, refused.stderr
        assert refused.stderr.splitlines() == [
            f"memfs umount: 2 file(s) under {m.path} are open for writing; nothing was "
            "done. Close them, or unmount with --force (what they hold is saved first; "
            "their programs then get ENOTCONN):",
            f"  notes/busy.md: pid {writer.pid} (ed\\x1b[2J\\x0ax)",
            f"  notes/mapped.md: pid {writer.pid} (ed\\x1b[2J\\x0ax)",
        ]
        assert os.path.ismount(m.path)
        wait_for(lambda: m.status()["open_for_writing"] == ["/notes/busy.md", "/notes/mapped.md"])
        shown = memfs("status", str(m.path), env=m.env).stdout
        assert "  open for writing: /notes/busy.md\n" in shown
        writer.write(0, b"still served\n")

        forced = memfs("umount", "--force", str(m.path), env=m.env)
        assert forced.returncode == 0, forced.stderr
        assert forced.stderr.splitlines()[1:] == [
            "  /notes/busy.md: saved as a version of the store",
            "  /notes/mapped.md: saved as a version of the store",
        ]
        assert not os.path.ismount(m.path)
    assert m.content("/notes/busy.md") == (HELD + b"still served\n").decode()
    assert m.content("/notes/mapped.md") == "bbbb\n"


def test_force_keeps_a_copy_of_what_the_store_refuses_and_names_it(
    mount_factory: Callable[..., MountedStore], tmp_path: Path
) -> None:
    m = mount_factory("--cache-dir", str(tmp_path / "cache"))
    with HeldWriter([(m.path / "latin1.md", "new")]) as writer:
        writer.write(0, b"caf\xe9\n")  # not UTF-8: the store cannot hold it
        result = memfs("umount", "--force", "--json", str(m.path), env=m.env)
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    [saved] = report["open_at_end"]
    assert saved["path"] == "/latin1.md" and saved["saved"] == "kept copy"
    assert Path(saved["where"]).read_bytes() == b"caf\xe9\n"
    assert [r["copy"] for r in report["refused"]] == [saved["where"]]
    assert m.paths() == set()


def test_names_an_agent_chose_reach_the_terminal_escaped(
    mount_factory: Callable[..., MountedStore],
) -> None:
    """A local-only name may hold any character but ``/`` (an editor's swap file of a name
    with terminal controls): ``memfs status`` and the report ``memfs umount`` prints show it
    escaped, on one line, never as controls for root's terminal."""
    m = mount_factory()
    evil = ".x\x1b]0;owned\x07\n  a.md: saved as a version of the store.swp"
    escaped = ".x\\x1b]0;owned\\x07\\x0a  a.md: saved as a version of the store.swp"
    with HeldWriter([(m.path / evil, "new")]) as writer:
        writer.write(0, b"swap\n")
        wait_for(lambda: m.status()["open_for_writing"] == [f"/{evil}"])
        status = memfs("status", str(m.path), env=m.env).stdout
        assert f"  open for writing: /{escaped}\n" in status
        forced = memfs("umount", "--force", str(m.path), env=m.env)
    assert forced.returncode == 1, forced.stderr  # a local-only name is not kept
    for output in (status, forced.stdout, forced.stderr):
        assert "\x1b" not in output and "\x07" not in output
    assert f"  /{escaped}: not kept" in forced.stderr
    assert "saved as a version" not in forced.stderr.replace(escaped, "")
