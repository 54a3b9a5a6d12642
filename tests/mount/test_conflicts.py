"""Two mounts of one store race on one file: the loser's content goes to the conflict copy and
its path shows the winner, so no later save of the loser replaces a version it never saw
(docs/semantics.md "Conflicts")."""

from __future__ import annotations

import errno
import hashlib
import os

import pytest

from kit.mounts import MountedStore, memfs
from kit.waiting import wait_for

from .test_errnos import seed


def expect_errno(number: int, func, *args, **kwargs) -> None:
    with pytest.raises(OSError) as info:
        func(*args, **kwargs)
    assert info.value.errno == number, errno.errorcode[info.value.errno]


def conflict_copies(m: MountedStore) -> dict[str, str | None]:
    return {p: m.content(p) for p in m.paths() if p.startswith("/conc.conflict-")}


def history(m: MountedStore, path: str) -> list[str]:
    """The content hashes of every version of the memory at ``path``, oldest first."""
    memory_id = m.memories()[path].id
    return [v.content_sha256 for v in reversed(m.versions(memory_id))]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_loser_shows_the_winner_and_its_next_save_applies_to_it(mount_factory):
    winner = mount_factory(memories={"/conc.md": "base\n"})
    loser = mount_factory(store_id=winner.store_id)
    assert (winner.path / "conc.md").read_text() == "base\n"
    assert (loser.path / "conc.md").read_text() == "base\n"
    # an editor holding the file: what it sees of it on disk (attributes, page cache)
    held = os.open(loser.path / "conc.md", os.O_RDONLY)
    try:
        seen = os.fstat(held)
        fd = os.open(loser.path / "conc.md", os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, b"loser\n")  # based on "base"
            (winner.path / "conc.md").write_text("the winner's text\n")
            winner.settle()
            expect_errno(errno.ESTALE, os.fsync, fd)
        finally:
            os.close(fd)  # reported once (by the fsync)
        # the editor that held the file sees it changed on disk, and the path shows the winner
        wait_for(lambda: os.fstat(held).st_size == len("the winner's text\n"), 5)
        assert os.fstat(held).st_mtime != seen.st_mtime
        assert (loser.path / "conc.md").read_text() == "the winner's text\n"
    finally:
        os.close(held)
    loser.settle()
    assert list(conflict_copies(loser).values()) == ["loser\n"]
    # the loser's next save applies to the winner's content, never replaces it
    with open(loser.path / "conc.md", "a") as f:
        f.write("appended by the loser\n")
    loser.settle()
    assert loser.content("/conc.md") == "the winner's text\nappended by the loser\n"
    assert history(loser, "/conc.md") == [
        sha("base\n"),
        sha("the winner's text\n"),
        sha("the winner's text\nappended by the loser\n"),
    ]


def test_background_conflict_then_append_keeps_the_winner(mount_factory):
    """The issue's case: saves by shells, which never look at close's answer."""
    winner = mount_factory(memories={"/conc.md": "base\n"})
    # the loser's change feed stays quiet: what it shows after the conflict is the conflict's doing
    quiet = ("--change-feed", "poll", "--poll-interval", "30", "--idle-poll-interval", "30")
    loser = mount_factory("--update-delay", "30", *quiet, store_id=winner.store_id)
    conc = loser.path / "conc.md"
    assert conc.read_text() == "base\n"
    conc.write_text("B1\n")  # queued for 30 s
    assert conc.stat().st_size == 3  # the kernel keeps these attributes for 60 s
    (winner.path / "conc.md").write_text("A1 wins\n")
    winner.settle()
    expect_errno(errno.ESTALE, loser.settle)  # directory fsync: the upload lost the race
    assert loser.content("/conc.md") == "A1 wins\n"
    assert list(conflict_copies(loser).values()) == ["B1\n"]
    wait_for(lambda: conc.stat().st_size == len("A1 wins\n"), 5)
    assert conc.read_text() == "A1 wins\n"
    # a shell's `echo B2 >> conc.md`: a new open, so the conflict (of content written before
    # it) is not its to hear; its close says its own content is safe
    fd = os.open(conc, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"B2\n")
    os.close(fd)
    loser.settle()
    assert loser.content("/conc.md") == "A1 wins\nB2\n"
    assert conc.read_text() == "A1 wins\nB2\n"
    wait_for(lambda: (winner.path / "conc.md").read_text() == "A1 wins\nB2\n", 5)
    # memfs status lists the conflict by path, with the copy that holds the local side
    [copy] = conflict_copies(loser)
    [listed] = wait_for(lambda: loser.status()["conflicts"]["recent"], 5)  # published each 1 s
    assert (listed["path"], listed["saved_as"]) == ("/conc.md", copy)
    text = memfs("status", str(loser.path), env=loser.env).stdout
    assert f"  {listed['at']}  /conc.md -> {copy}\n" in text, text
    # ... and so does the unmount report
    result = loser.umount()
    assert result.returncode == 1
    assert "/conc.md: changed on the server by another writer" in result.stderr
    assert f"the local content is saved as {copy}" in result.stderr


def test_a_conflict_copy_waiting_for_room_is_a_file_of_the_mount(private_mount, fresh_server):
    """Issue 20 item 11: in a full store the conflict copy cannot be created; it waits for room
    as a file of the mount (listed, readable, in ``memfs status``), also after a remount (its
    journal record replayed), and is uploaded once there is room."""
    quiet = ("--change-feed", "poll", "--poll-interval", "30", "--idle-poll-interval", "30")
    m = private_mount("--update-delay", "30", *quiet, memories={"/conc.md": "base\n"}, mount=False)
    ids = seed(fresh_server.db, m.store_id, 1_999)  # full: 2,000 memories
    assert m.mount().returncode == 0
    conc = m.path / "conc.md"
    assert conc.read_text() == "base\n"
    conc.write_text("mine\n")  # queued for 30 s
    m.put("/conc.md", "theirs\n")
    with pytest.raises(OSError) as raised:
        m.settle()  # the upload loses the race; its copy finds no room
    assert raised.value.errno in (errno.ENOSPC, errno.ESTALE)

    def the_copy() -> str:
        [copy] = [n for n in os.listdir(m.path) if n.startswith("conc.conflict-")]
        assert (m.path / copy).read_text() == "mine\n"  # the user's own text, readable
        assert conc.read_text() == "theirs\n"
        return copy

    copy = the_copy()
    line = f"waiting for room (the store is full): /{copy}"
    wait_for(lambda: line in memfs("status", str(m.path), env=m.env).stdout, timeout=5)
    result = m.umount()  # still no room: kept in the journal
    assert result.returncode == 1
    assert f"/{copy}: waiting for room (the store is full)" in result.stderr, result.stderr
    assert m.mount().returncode == 0  # replayed: a file of the mount again
    assert the_copy() == copy
    m.sdk.beta.memory_stores.memories.delete(ids[0], memory_store_id=m.store_id)
    m.settle()  # room: the copy is uploaded
    assert m.content(f"/{copy}") == "mine\n"
    assert m.content("/conc.md") == "theirs\n"
    assert m.umount().returncode == 0
