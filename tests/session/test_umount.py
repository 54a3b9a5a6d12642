"""``memfs umount ROOT`` of a session's mount stops the session as ``memfs session stop`` does
(every store flushed, what was not uploaded printed store by store, the process gone, ROOT
removed); ``memfs umount ROOT/<slug>`` is refused: the stores share one mount. A store deleted
mid-session fails alone, and the session's commands say which."""

from __future__ import annotations

import errno
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from kit.journals import journal_records
from kit.waiting import wait_for
from kit.writers import HeldWriter
from memfs.session.state import SessionState, pid_alive, state_path

from .helpers import (
    Api,
    fsync_write,
    mounts_under,
    run_memfs,
    session_status,
    slug_of,
    unique,
    write_config,
)

pytestmark = pytest.mark.fuse


def start(
    tmp_path: Path, root: Path, env: dict[str, str], api: Api, *names: str
) -> tuple[int, list[dict[str, Any]]]:
    """A detached session of new stores named ``names``: its pid, and the stores."""
    stores = [api.create_store(unique(name)) for name in names]
    config = write_config(
        tmp_path / "session.json",
        [{"type": "memory_store", "memory_store_id": store["id"]} for store in stores],
    )
    done = run_memfs(["session", "--config", str(config), "--root", str(root), "--detach"], env)
    assert done.returncode == 0, done.stderr
    return session_status(root, env)["pid"], stores


def test_umount_of_the_root_stops_the_session_and_of_a_store_is_refused(
    tmp_path: Path, root: Path, session_env: dict[str, str], api: Api
) -> None:
    pid, (notes, wiki) = start(tmp_path, root, session_env, api, "Notes", "Wiki")
    n, w = root / slug_of(notes["name"]), root / slug_of(wiki["name"])
    # closed, not synced: journaled, and still waiting for its upload delay
    (n / "pending.md").write_text("flushed by umount\n")
    (root / "scratch.txt").write_text("local\n")

    refused = run_memfs(["umount", str(w)], session_env)
    assert refused.returncode == 1
    assert refused.stderr == (
        f"memfs umount: {w} is inside the session at {root}, whose stores share one mount; "
        f"stop the whole session: memfs session stop --root {root}\n"
    )
    assert pid_alive(pid) and mounts_under(root) == [str(root)]
    assert (n / "pending.md").read_text() == "flushed by umount\n"  # still served

    done = run_memfs(["umount", str(root)], session_env, timeout=90)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        f"memfs umount: stopped; every store flushed and unmounted under {root}\n"
    )
    assert not pid_alive(pid)
    assert mounts_under(root) == []
    assert not root.exists()  # the session made it; scratch went with the daemon's memory
    assert api.memories(notes["id"])["/pending.md"]["content"] == "flushed by umount\n"
    gone = run_memfs(["session", "status", "--root", str(root)], session_env)
    assert gone.returncode == 1 and gone.stderr == f"memfs session: no session at {root}\n"


def test_a_store_deleted_mid_session_fails_alone_and_is_named_by_status_and_umount(
    tmp_path: Path, root: Path, session_env: dict[str, str], api: Api
) -> None:
    """One store failing is one store failing (issue 21, item 3), seen through the session's
    commands: ``memfs session status`` (JSON and words), ``memfs status ROOT/<slug>``, and the
    report of ``memfs umount --json ROOT``."""
    pid, (kept, deleted) = start(tmp_path, root, session_env, api, "Kept", "Deleted")
    k, d = root / slug_of(kept["name"]), root / slug_of(deleted["name"])
    api.call("DELETE", f"/v1/memory_stores/{deleted['id']}")

    def health() -> dict[str, str]:
        return {
            Path(m["path"]).name: m["health"] for m in session_status(root, session_env)["mounts"]
        }

    wait_for(lambda: health()[d.name] != "ok", timeout=15)
    gone = "GONE: deleted on the server (changes fail with ENODEV)"
    assert health() == {k.name: "ok", d.name: gone}
    words = run_memfs(["session", "status", "--root", str(root)], session_env).stdout
    assert f"  {d}  read_write  {deleted['id']}  {gone}\n" in words, words
    assert f"  {k}  read_write  {kept['id']}  ok\n" in words, words
    one = run_memfs(["status", str(d)], session_env)
    assert one.returncode == 0 and "STORE GONE" in one.stdout, one.stdout
    assert kept["id"] not in one.stdout
    # the deleted store's subtree refuses changes; the other store reads and writes as ever
    with pytest.raises(OSError) as refused:
        (d / "new.md").write_text("nowhere to go\n")
    assert refused.value.errno == errno.ENODEV
    fsync_write(k / "still.md", "works\n")
    assert api.memories(kept["id"])["/still.md"]["content"] == "works\n"

    done = run_memfs(["umount", "--json", str(root)], session_env, timeout=90)
    assert done.returncode == 1, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["type"] == "memfs_session_stop" and outcome["root"] == str(root)
    assert outcome["problems"] == [
        f"{d}: the memory store {deleted['id']} no longer exists (deleted while mounted); "
        "nothing was waiting to be uploaded"
    ], outcome
    assert not pid_alive(pid) and mounts_under(root) == []


def test_a_session_that_stopped_with_problems_holds_no_mount(
    tmp_path: Path, session_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its state file stays (for ``memfs session stop`` to print its problems), its mount is
    gone: ``memfs umount`` of that root, or of a path in it, is about whatever is there now."""
    root = tmp_path / "memory"
    (root / "store").mkdir(parents=True)
    monkeypatch.setenv("MEMFS_STATE_DIR", session_env["MEMFS_STATE_DIR"])
    path = state_path(root)
    path.parent.mkdir(mode=0o700)
    SessionState(
        pid=2**22 + 1, root=str(root), session_id="sesn_done", status="stopped",
        problems=[f"{root}/store: 1 change(s) not uploaded"],
    ).write(path)  # fmt: skip
    for point in (root, root / "store"):
        done = run_memfs(["umount", str(point)], session_env)
        assert done.returncode == 1
        assert done.stderr == f"memfs umount: {point} is not mounted\n"
    assert path.exists()  # still there for `memfs session stop` to report


def test_umount_after_a_kill_9_detaches_the_dead_mount_and_keeps_the_journal(
    tmp_path: Path, root: Path, session_env: dict[str, str], api: Api
) -> None:
    pid, (notes,) = start(tmp_path, root, session_env, api, "Notes")
    (root / slug_of(notes["name"]) / "kept.md").write_text("journaled\n")  # closed: journaled
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not pid_alive(pid), timeout=10)
    done = run_memfs(["umount", str(root)], session_env)
    assert done.returncode == 1
    assert done.stderr.startswith(
        f"memfs umount: the session daemon (pid {pid}) died without unmounting; cleaning up\n"
    ), done.stderr
    assert mounts_under(root) == [] and not root.exists()
    # what it had acknowledged waits in the store's journal for the next session or mount
    assert journal_records(Path(session_env["XDG_CACHE_HOME"]) / "memfs") == 1
    assert api.memories(notes["id"]) == {}


def test_a_stop_saves_what_a_program_wrote_and_never_closed(
    tmp_path: Path, root: Path, session_env: dict[str, str], api: Api
) -> None:
    pid, (notes,) = start(tmp_path, root, session_env, api, "Notes")
    n = root / slug_of(notes["name"])
    with HeldWriter([(n / "busy.md", "new")]) as writer:
        writer.write(0, b"written, never closed\n")
        refused = run_memfs(["umount", str(root)], session_env)
        assert refused.returncode == 7, refused.stderr
        assert f"  {n.name}/busy.md: pid {writer.pid} (" in refused.stderr
        assert pid_alive(pid)

        done = run_memfs(["session", "stop", "--root", str(root)], session_env, timeout=90)
        assert done.returncode == 0, done.stderr
        assert (
            done.stdout
            == f"memfs session: stopped; every store flushed and unmounted under {root}\n"
        )
        assert done.stderr == (f"memfs session: {n}: /busy.md: saved as a version of the store\n")
        assert writer.close(0) == "close: Transport endpoint is not connected"
    assert not pid_alive(pid) and mounts_under(root) == []
    assert api.memories(notes["id"])["/busy.md"]["content"] == "written, never closed\n"
