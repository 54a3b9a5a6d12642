"""Sessions on a real server with a real mount: use the stores with ordinary tools, stop, check
the store. One process serves every store from one mount at the root (``test_one_process``
counts it, and covers scratch, a killed session and the status of each store).

Every test's ``root`` fixture stops the session and unmounts (``fusermount3 -uz``) on teardown,
even when the test fails.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .helpers import Api, mounts_under, run_memfs, slug_of, unique, write_config

pytestmark = pytest.mark.fuse


def sh(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=30, check=False
    )


def status(root: Path, env: dict[str, str]) -> dict[str, Any]:
    done = run_memfs(["session", "status", "--root", str(root), "--json"], env)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def session_writes(api: Api, store_id: str) -> dict[str, set[str]]:
    """path -> the session ids that wrote versions of it."""
    found: dict[str, set[str]] = {}
    for version in api.versions(store_id):
        actor = version["created_by"]
        who = actor.get("session_id") if actor["type"] == "session_actor" else actor["type"]
        found.setdefault(version["path"], set()).add(who)
    return found


def test_detached_session_of_three_stores(
    tmp_path: Path, root: Path, session_env: dict[str, str], api: Api
) -> None:
    notes = api.create_store(unique("Notes"), "What the agent learned")
    wiki = api.create_store(unique("Team Wiki"))
    style = api.create_store(unique("Style Guide"), "House style")
    api.create_memory(wiki["id"], "/onboarding.md", "welcome\n")
    api.create_memory(style["id"], "/tone.md", "be brief\n")
    config = write_config(
        tmp_path / "session.json",
        {"resources": [
            {"type": "memory_store", "memory_store_id": notes["id"],
             "instructions": "Record one fact per file."},
            {"type": "memory_store", "memory_store_id": wiki["id"], "access": "read_write"},
            {"type": "memory_store", "memory_store_id": style["id"], "access": "read_only"},
            {"type": "github_repository", "url": "https://github.com/example/repo"},
        ]},
    )  # fmt: skip
    session_id = "sesn_test" + os.urandom(6).hex()
    prompt_file = tmp_path / "prompt.md"
    started = time.monotonic()
    done = run_memfs(
        ["session", "--config", str(config), "--root", str(root), "--detach",
         "--session-id", session_id, "--prompt-file", str(prompt_file)],
        session_env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 20
    assert done.stdout == ""  # the prompt went to the file
    assert f"memfs session: {session_id} running" in done.stderr
    n, w, s = (root / slug_of(x["name"]) for x in (notes, wiki, style))
    assert mounts_under(root) == [str(root)]  # one mount, each store a directory of it
    assert sorted(os.listdir(root)) == sorted(p.name for p in (n, w, s))

    prompt = prompt_file.read_text()
    assert f"## {notes['name']}\n\n- Path: `{n}`\n- Access: read-write\n" in prompt
    assert (
        "- Description: What the agent learned\n\nInstructions:\n\nRecord one fact per file."
        in prompt
    )
    assert f"- Path: `{s}`\n- Access: read-only" in prompt

    # Ordinary tools.
    assert sh(f"echo 'the sky is blue' > '{n}/sky.md'", root).returncode == 0
    assert sh(f"mkdir '{n}/people' && echo ada > '{n}/people/ada.md'", root).returncode == 0
    assert sh(f"cat '{w}/onboarding.md'", root).stdout == "welcome\n"
    assert sh(f"echo 'ask for help' >> '{w}/onboarding.md'", root).returncode == 0
    assert sh(f"ls '{s}'", root).stdout == "tone.md\n"
    assert sh(f"cat '{n}/sky.md'", root).stdout == "the sky is blue\n"

    # Read-only holds for every process, with EROFS from the kernel.
    refused = sh(f"echo nope > '{s}/new.md'", root)
    assert refused.returncode != 0 and "Read-only file system" in refused.stderr
    with pytest.raises(OSError) as info:
        (s / "tone.md").write_text("changed")
    assert info.value.errno == errno.EROFS

    state = status(root, session_env)
    assert state["alive"] and state["status"] == "running" and state["session_id"] == session_id
    assert {m["path"]: m["health"] for m in state["mounts"]} == {
        str(n): "ok",
        str(w): "ok",
        str(s): "ok",
    }

    # A second session on the same root is refused while this one runs.
    again = run_memfs(["session", "--config", str(config), "--root", str(root)], session_env)
    assert again.returncode == 2
    assert f"a session is already running at {root}" in again.stderr

    stopped = run_memfs(["session", "stop", "--root", str(root)], session_env)
    assert stopped.returncode == 0, stopped.stderr
    assert "stopped; every store flushed and unmounted" in stopped.stdout
    assert mounts_under(root) == []
    assert not root.exists()  # created by the session, so removed by it
    assert not list((tmp_path / "state").glob("*.json"))

    # Every write is in the store, attributed to the session.
    memories = api.memories(notes["id"])
    assert memories["/sky.md"]["content"] == "the sky is blue\n"
    assert memories["/people/ada.md"]["content"] == "ada\n"
    assert api.memories(wiki["id"])["/onboarding.md"]["content"] == "welcome\nask for help\n"
    assert api.memories(style["id"])["/tone.md"]["content"] == "be brief\n"
    assert session_writes(api, notes["id"]) == {
        "/sky.md": {session_id},
        "/people/ada.md": {session_id},
    }
    assert session_writes(api, wiki["id"])["/onboarding.md"] == {"api_actor", session_id}
    assert session_writes(api, style["id"]) == {"/tone.md": {"api_actor"}}


def test_foreground_session_prints_the_prompt_and_stops_on_sigterm(
    tmp_path: Path, root: Path, session_env: dict[str, str], api: Api
) -> None:
    store = api.create_store(unique("Scratch"))
    root.mkdir()  # an existing root is kept at the end
    config = write_config(
        tmp_path / "session.json", [{"type": "memory_store", "memory_store_id": store["id"]}]
    )
    mount = root / slug_of(store["name"])
    proc = subprocess.Popen(
        [sys.executable, "-m", "memfs", "session", "--config", str(config), "--root", str(root)],
        env=session_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "# Memory\n"  # printed once every store answers
        assert os.path.ismount(root) and mount.is_dir()
        prompt = [proc.stdout.readline() for _ in range(14)]
        assert f"- Path: `{mount}`\n" in prompt
        session_id = status(root, session_env)["session_id"]
        assert session_id.startswith("sesn_")
        (mount / "note.md").write_text("from the foreground session\n")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=40)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert out == ""  # the whole prompt came before
    assert "signal SIGTERM: flushing and unmounting" in err
    assert " INFO memfs.session.runner: " in err  # one line per event, with a level
    assert "sk-memfs" not in err
    assert not mount.exists() and root.is_dir() and mounts_under(root) == []
    assert session_writes(api, store["id"]) == {"/note.md": {session_id}}
