"""A session of Databricks stores beside Memory Stores stores, on the reference server (which
serves both APIs): one process and one mount at the root, each store at its own directory,
each reached through its own API, stopped together with each store's report; and the refusals
only Databricks stores have.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from kit.databricks import ACTOR, Workspace
from kit.journals import journal_home
from kit.servers import ServerProcess

from .helpers import (
    Api,
    both_apis_env,
    force_unmount,
    fsync_write,
    mounts_under,
    run_memfs,
    session_status,
    slug_of,
    unique,
    write_config,
)

pytestmark = pytest.mark.fuse


def session_argv(root: Path, env: dict[str, str]) -> list[str]:
    """The command line of the process that serves the session at ``root``."""
    pid = session_status(root, env)["pid"]
    return Path(f"/proc/{pid}/cmdline").read_text().split("\0")


def test_one_root_for_both_apis_each_store_written_through_its_own_and_stopped_together(
    tmp_path: Path, fresh_server: ServerProcess
) -> None:
    api = Api(fresh_server)
    notes = api.create_store(unique("Notes"), "What the agent learned")
    workspace = Workspace(fresh_server)
    team = workspace.create_store()
    workspace.put(team, "/prefs.md", "be brief\n", description="the user's tastes")
    env = both_apis_env(fresh_server, tmp_path)
    root = tmp_path / "memory"
    config = write_config(
        tmp_path / "session.json",
        [
            {"type": "memory_store", "memory_store_id": notes["id"]},
            {"type": "memory_store", "api": "databricks", "memory_store_id": team,
             "actor_id": ACTOR, "instructions": "Keep the user's preferences here."},
        ],
    )  # fmt: skip
    prompt_file = tmp_path / "prompt.md"
    mounts = {"notes": root / slug_of(notes["name"]), "team": root / team}
    try:
        done = run_memfs(
            ["session", "--config", str(config), "--root", str(root), "--detach",
             "--prompt-file", str(prompt_file)],
            env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert mounts_under(root) == [str(root)]  # one mount, each store a directory of it
        assert sorted(os.listdir(root)) == sorted(path.name for path in mounts.values())
        # no token on the command line of the one process
        assert fresh_server.api_key not in "\0".join(session_argv(root, env))

        prompt = prompt_file.read_text()
        assert f"## {team}\n\n- Path: `{mounts['team']}`\n- Access: read-write\n" in prompt
        assert f"- Kind: Databricks Agent Memory store (the entries of actor {ACTOR})" in prompt
        assert "Keep the user's preferences here." in prompt
        assert f"## {notes['name']}\n\n- Path: `{mounts['notes']}`" in prompt

        status = run_memfs(["session", "status", "--root", str(root), "--json"], env)
        listed = {m["path"]: m for m in json.loads(status.stdout)["mounts"]}
        assert listed[str(mounts["team"])]["api"] == "databricks"
        assert listed[str(mounts["team"])]["actor_id"] == ACTOR
        assert "api" not in listed[str(mounts["notes"])]
        shown = run_memfs(["session", "status", "--root", str(root)], env).stdout
        assert f"  {mounts['team']}  read_write  databricks:{team} (actor {ACTOR})  ok\n" in shown

        # files written in each reach that store's API, and only it
        assert (mounts["team"] / "prefs.md").read_text() == "be brief\n"
        assert os.getxattr(mounts["team"] / "prefs.md", "user.description") == b"the user's tastes"
        fsync_write(mounts["notes"] / "learned.md", "a fact\n")
        fsync_write(mounts["team"] / "tone.md", "formal\n")
        assert api.memories(notes["id"])["/learned.md"]["content"] == "a fact\n"
        assert workspace.content(team, "/tone.md") == "formal\n"
        assert "/tone.md" not in api.memories(notes["id"])
        assert workspace.content(team, "/learned.md") is None

        # the server goes away before the next changes are uploaded: the stop reports each
        # mount's, from each mount's own unmount report and journal
        (mounts["notes"] / "late.md").write_text("late fact\n")
        (mounts["team"] / "late.md").write_text("late preference\n")
        fresh_server.stop()
        stopped = run_memfs(["session", "stop", "--root", str(root)], env, timeout=90)
    finally:
        force_unmount(root)
        workspace.http.close()
    assert stopped.returncode == 1, stopped.stderr
    lines = stopped.stderr.splitlines()
    cache = tmp_path / "cache" / "memfs"
    for mount, journal in (
        (mounts["notes"], f"{journal_home(cache, notes['id'], fresh_server.base_url)}/journal-0"),
        (mounts["team"], f"{cache}/databricks-{team}-"),
    ):
        mine = [line for line in lines if line.startswith(f"memfs session: {mount}: put /late.md")]
        assert len(mine) == 1, stopped.stderr
        assert f"(kept in {journal}" in mine[0]
    assert mounts_under(root) == [] and not root.exists()


def refused(tmp_path: Path, env: dict[str, str], resources: Any, code: int = 2) -> str:
    """``code``: the exit status of the fault's kind (README, "Exit codes"), else 2."""
    root = tmp_path / "memory"
    config = write_config(tmp_path / "session.json", resources)
    done = run_memfs(["session", "--config", str(config), "--root", str(root)], env)
    assert (done.returncode, done.stdout) == (code, ""), done.stderr
    assert not root.exists() and mounts_under(root) == []
    assert "Traceback" not in done.stderr
    return done.stderr


def test_databricks_refusals_are_one_line_each_before_anything_mounts(
    tmp_path: Path, server: ServerProcess, api: Api
) -> None:
    notes = api.create_store(unique("Notes"))
    workspace = Workspace(server)
    team = workspace.create_store()
    workspace.http.close()
    env = both_apis_env(server, tmp_path)

    def dbx(store: str, **extra: str) -> dict[str, str]:
        return {"type": "memory_store", "api": "databricks", "memory_store_id": store, **extra}

    ms = {"type": "memory_store", "memory_store_id": notes["id"]}
    assert refused(tmp_path, env, [ms, dbx(team), {**ms, "actor_id": ACTOR}]) == (
        "memfs session: resources[1]: a Databricks store needs an 'actor_id' (whose entries "
        'to mount)\nmemfs session: resources[2]: actor_id goes only with "api": "databricks" '
        "(a Memory Stores store has no actors)\n"
    )
    # a session of Databricks stores alone needs no Memory Stores key
    alone = {k: v for k, v in env.items() if not k.startswith("ANTHROPIC_")}
    assert refused(
        tmp_path, alone, [dbx(team, actor_id=ACTOR), dbx("no-such-store", actor_id=ACTOR)], 3
    ) == ("memfs session: resources[1]: Databricks store no-such-store does not exist\n")
    without = {k: v for k, v in env.items() if not k.startswith("DATABRICKS_")}
    said = refused(tmp_path, without, [ms, dbx(team, actor_id=ACTOR)])
    assert said.startswith("memfs session: no Databricks workspace") and said.count("\n") == 1
    said = refused(
        tmp_path, {**env, "DATABRICKS_TOKEN": "not-the-token"}, [dbx(team, actor_id=ACTOR)], 5
    )
    assert said.startswith(
        f"memfs session: the Databricks token in DATABRICKS_TOKEN was refused by {server.base_url}"
    )
    assert said.count("\n") == 1 and "not-the-token" not in said


def test_a_databricks_store_with_a_session_id_shows_and_writes_that_session_only(
    tmp_path: Path, server: ServerProcess
) -> None:
    """``"session_id"`` of a Databricks resource: the store's directory lists that session's
    entries only and creates new files in it."""
    workspace = Workspace(server)
    team = workspace.create_store()
    workspace.put(team, "/shared.md", "no session\n")
    workspace.put(team, "/mine.md", "in s1\n", session="s1")
    workspace.put(team, "/theirs.md", "in s2\n", session="s2")
    env = both_apis_env(server, tmp_path)
    root = tmp_path / "memory"
    config = write_config(
        tmp_path / "session.json",
        [{"type": "memory_store", "api": "databricks", "memory_store_id": team,
          "actor_id": ACTOR, "session_id": "s1"}],
    )  # fmt: skip
    mount = root / team
    try:
        done = run_memfs(["session", "--config", str(config), "--root", str(root), "--detach"], env)
        assert done.returncode == 0, done.stderr
        assert os.listdir(mount) == ["mine.md"]
        assert (mount / "mine.md").read_text() == "in s1\n"
        fsync_write(mount / "new.md", "written in s1\n")
        assert workspace.content(team, "/new.md", session="s1") == "written in s1\n"
        assert workspace.content(team, "/new.md") is None
        assert workspace.content(team, "/new.md", session="s2") is None
        stopped = run_memfs(["session", "stop", "--root", str(root)], env, timeout=90)
        assert (stopped.returncode, stopped.stderr) == (0, "")
    finally:
        force_unmount(root)
        workspace.http.close()
    assert mounts_under(root) == []
