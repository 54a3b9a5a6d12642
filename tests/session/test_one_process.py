"""One process serves a whole session: every store (both APIs, read-only and read-write) is a
directory of one FUSE mount at the root, every other name there is local scratch (never
uploaded, gone at the stop, ``mv`` into a store copies), ``memfs session status`` shows each
store, and a ``kill -9`` of that process loses nothing: the next session at the root detaches
the dead mount and uploads every store's journal before it serves.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kit.databricks import ACTOR, Workspace
from kit.journals import journal_records
from kit.servers import ServerProcess
from kit.waiting import wait_for
from memfs.session.state import pid_alive

from .helpers import (
    Api,
    both_apis_env,
    children,
    fsync_write,
    mounts_under,
    processes_naming,
    run_memfs,
    session_status,
    slug_of,
    stop_and_unmount,
    unique,
    write_config,
)

pytestmark = pytest.mark.fuse


def ms(store: dict[str, Any], access: str = "read_write") -> dict[str, str]:
    return {"type": "memory_store", "memory_store_id": store["id"], "access": access}


def dbx(store: str) -> dict[str, str]:
    return {
        "type": "memory_store",
        "api": "databricks",
        "memory_store_id": store,
        "actor_id": ACTOR,
    }


def start(
    config: Path, root: Path, env: dict[str, str], *options: str
) -> subprocess.CompletedProcess[str]:
    argv = ["session", "--config", str(config), "--root", str(root), "--detach", *options]
    done = run_memfs(argv, env)
    assert done.returncode == 0, done.stderr
    return done


def stop(root: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_memfs(["session", "stop", "--root", str(root)], env, timeout=90)


def error_of(call: Any) -> int:
    try:
        call()
    except OSError as exc:
        return exc.errno or 0
    return 0


def every_store_reports(root: Path, env: dict[str, str]) -> bool:
    """Every store has its section in the daemon's status (published every second)."""
    return all(
        m["health"] != "starting (no status yet)" for m in session_status(root, env)["mounts"]
    )


def test_eight_stores_are_one_process_and_one_mount_beside_scratch(
    tmp_path: Path, server: ServerProcess, api: Api
) -> None:
    writable = [api.create_store(unique(f"Notes {n}")) for n in range(5)]
    references = [api.create_store(unique(f"Reference {n}")) for n in range(2)]
    for store in references:
        api.create_memory(store["id"], "/fact.md", "water is wet\n")
    workspace = Workspace(server)
    team = workspace.create_store()
    workspace.put(team, "/prefs.md", "be brief\n", description="the user's tastes")
    env = both_apis_env(server, tmp_path)
    root = tmp_path / "memory"
    config = write_config(
        tmp_path / "session.json",
        [ms(s) for s in writable] + [ms(s, "read_only") for s in references] + [dbx(team)],
    )
    rw = [root / slug_of(s["name"]) for s in writable]
    ro = [root / slug_of(s["name"]) for s in references]
    try:
        start(config, root, env, "--cache-size", "12.5")  # one budget of 12.5 MiB
        state = session_status(root, env)
        assert len(state["mounts"]) == 8
        # one process (none other serves the root, it has no child), one mount; each store a
        # directory of it
        assert processes_naming(root) == [state["pid"]] and children(state["pid"]) == []
        assert mounts_under(root) == [str(root)]
        assert sorted(os.listdir(root)) == sorted([p.name for p in rw + ro] + [team])

        for path in ro:
            assert (path / "fact.md").read_text() == "water is wet\n"
            assert error_of(lambda path=path: (path / "new.md").write_text("no")) == errno.EROFS
        assert (root / team / "prefs.md").read_text() == "be brief\n"
        assert os.getxattr(root / team / "prefs.md", "user.description") == b"the user's tastes"
        for index, path in enumerate(rw):
            fsync_write(path / "learned.md", f"fact {index}\n")
        fsync_write(root / team / "tone.md", "formal\n")

        # scratch: any other name at the root, in memory; a rename into a store is EXDEV
        (root / "draft.txt").write_text("local only\n")
        (root / "work").mkdir()
        (root / "work" / "result.md").write_text("worth keeping\n")
        assert error_of(lambda: os.rename(root / "draft.txt", rw[0] / "draft.md")) == errno.EXDEV
        assert error_of(lambda: os.rename(rw[0] / "learned.md", rw[1] / "x.md")) == errno.EXDEV
        moved = subprocess.run(
            ["mv", str(root / "work" / "result.md"), str(rw[0] / "result.md")],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert moved.returncode == 0, moved.stderr  # mv copies across, then removes
        assert os.listdir(root / "work") == []
        assert (rw[0] / "result.md").read_text() == "worth keeping\n"

        # each store's health, in JSON and in words
        def scratch_counted() -> bool:  # the status is published every second
            return bool(session_status(root, env)["scratch"]["inodes"] >= 3)

        wait_for(lambda: every_store_reports(root, env) and scratch_counted(), timeout=10)
        state = session_status(root, env)  # the root, draft.txt and work are scratch's inodes
        assert {Path(m["path"]).name: m["health"] for m in state["mounts"]} == {
            name: "ok" for name in [p.name for p in rw + ro] + [team]
        }
        # the stores share one cache budget, of --cache-size
        budget = 12.5 * 1024 * 1024
        assert state["cache_budget"]["limit"] == budget
        sections = json.loads(run_memfs(["status", str(root), "--json"], env).stdout)["stores"]
        assert [s["memory"]["cache budget"]["limit"] for s in sections] == [budget] * 8
        shown = run_memfs(["session", "status", "--root", str(root)], env).stdout
        assert f" of {budget:,.0f} bytes (clean data, one budget every store shares" in shown
        assert f"  {root / team}  read_write  databricks:{team} (actor {ACTOR})  ok\n" in shown
        assert f"  {ro[0]}  read_only  {references[0]['id']}  ok\n" in shown

        # the stop, with scratch present: every store flushed, the root removed with scratch
        stopped = stop(root, env)
        assert (stopped.returncode, stopped.stderr) == (0, ""), stopped.stderr
    finally:
        stop_and_unmount(root, env)
        workspace.http.close()
    assert mounts_under(root) == [] and not root.exists()
    for index, store in enumerate(writable):
        memories = api.memories(store["id"])
        assert memories["/learned.md"]["content"] == f"fact {index}\n"
        assert "/draft.txt" not in memories and "/draft.md" not in memories
    assert api.memories(writable[0]["id"])["/result.md"]["content"] == "worth keeping\n"
    with Workspace(server) as check:
        assert check.content(team, "/tone.md") == "formal\n"


def test_a_killed_session_loses_nothing_the_next_one_uploads_every_store(
    tmp_path: Path, fresh_server: ServerProcess
) -> None:
    api = Api(fresh_server)
    notes = api.create_store(unique("Notes"))
    wiki = api.create_store(unique("Wiki"))
    reference = api.create_store(unique("Reference"))
    api.create_memory(reference["id"], "/fact.md", "water is wet\n")
    workspace = Workspace(fresh_server)
    team = workspace.create_store()
    env = both_apis_env(fresh_server, tmp_path)
    root = tmp_path / "memory"
    config = write_config(
        tmp_path / "session.json", [ms(notes), ms(wiki), ms(reference, "read_only"), dbx(team)]
    )
    writable = {root / slug_of(notes["name"]), root / slug_of(wiki["name"]), root / team}
    try:
        start(config, root, env)
        pid = session_status(root, env)["pid"]
        for path in writable:
            assert os.listdir(path) == []  # listed before the server goes away
        # acknowledged (closed) but not uploaded: the server is gone before the upload delay
        fresh_server.stop()
        for path in writable:
            (path / "saved.md").write_text(f"kept for {path.name}\n")
        (root / "scratch.txt").write_text("never uploaded\n")

        def waiting() -> set[str]:
            mounts = session_status(root, env)["mounts"]
            return {Path(m["path"]).name for m in mounts if m["waiting"] == ["/saved.md"]}

        wait_for(lambda: waiting() == {path.name for path in writable}, timeout=10)
        shown = run_memfs(["session", "status", "--root", str(root)], env).stdout
        assert shown.count("    waiting: /saved.md\n") == 3, shown

        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not pid_alive(pid), timeout=10)
        # the mount died with it: ENOTCONN, or ECONNABORTED for a request the kernel had queued
        # when the connection was aborted (seen under load)
        assert error_of(lambda: os.listdir(root)) in (errno.ENOTCONN, errno.ECONNABORTED)
        cache = tmp_path / "cache" / "memfs"
        assert journal_records(cache) == 3

        # the next session detaches the dead mount and replays every store's journal first
        fresh_server.start()
        restarted = start(config, root, env)
        assert "died without unmounting" in restarted.stderr
        assert session_status(root, env)["pid"] != pid
        assert not (root / "scratch.txt").exists()  # scratch died with its process
        for path in writable:
            assert (path / "saved.md").read_text() == f"kept for {path.name}\n"
        stopped = stop(root, env)
        assert (stopped.returncode, stopped.stderr) == (0, ""), stopped.stderr
    finally:
        stop_and_unmount(root, env)
        workspace.http.close()
    assert mounts_under(root) == [] and not root.exists()
    for store in (notes, wiki):
        memories = api.memories(store["id"])
        assert memories["/saved.md"]["content"] == f"kept for {slug_of(store['name'])}\n"
    assert set(api.memories(reference["id"])) == {"/fact.md"}
    with Workspace(fresh_server) as check:
        assert check.content(team, "/saved.md") == f"kept for {team}\n"
    assert journal_records(tmp_path / "cache" / "memfs") == 0
