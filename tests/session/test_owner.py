"""A session whose agent runs as another user: the config's owner and ``--allow-other``."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .helpers import Api, force_unmount, run_memfs, slug_of, unique, write_config

pytestmark = pytest.mark.fuse

NOBODY = 65534


@pytest.fixture
def shared_root(session_env: dict[str, str]) -> Iterator[Path]:
    """A session root every user can reach (pytest's tmp_path is private to root)."""
    shared = Path(tempfile.mkdtemp(prefix="memfs-session-owner-"))
    os.chmod(shared, 0o755)
    root = shared / "memory"
    try:
        yield root
    finally:
        run_memfs(["session", "stop", "--root", str(root)], session_env, timeout=60)
        force_unmount(root)
        shutil.rmtree(shared, ignore_errors=True)


def test_the_agent_user_writes_a_read_write_store(
    tmp_path: Path, shared_root: Path, session_env: dict[str, str], api: Api
) -> None:
    notes = api.create_store(unique("Notes"))
    api.create_memory(notes["id"], "/a.md", "one\n")
    config = write_config(
        tmp_path / "session.json",
        {"owner": {"uid": NOBODY, "gid": NOBODY},
         "resources": [{"type": "memory_store", "memory_store_id": notes["id"]}]},
    )  # fmt: skip
    done = run_memfs(
        ["session", "--config", str(config), "--root", str(shared_root), "--detach",
         "--allow-other", "--umask", "077", "--prompt-file", str(tmp_path / "prompt.md"),
         "--local-bytes", "2M"],
        session_env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    mount = shared_root / slug_of(notes["name"])
    info = os.stat(mount / "a.md")
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (NOBODY, NOBODY, 0o600)
    agent = subprocess.run(
        ["sh", "-c", "echo two >> a.md && echo new > new.md && cat a.md"],
        cwd=mount, user=NOBODY, group=NOBODY, extra_groups=[],
        capture_output=True, text=True, timeout=20,
    )  # fmt: skip
    assert agent.returncode == 0, agent.stderr
    status = run_memfs(["status", str(mount), "--json"], session_env)
    assert json.loads(status.stdout)["local_budget"]["limit_bytes"] == 2 * 1024 * 1024
    assert agent.stdout == "one\ntwo\n"
    stop = run_memfs(["session", "stop", "--root", str(shared_root)], session_env, timeout=60)
    assert stop.returncode == 0, stop.stderr
    memories = api.memories(notes["id"])
    assert {path: m["content"] for path, m in memories.items()} == {
        "/a.md": "one\ntwo\n",
        "/new.md": "new\n",
    }
