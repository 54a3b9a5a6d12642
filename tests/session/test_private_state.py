"""A session's state directory is private (0700) and its logs are 0600: they name stores,
files and errors. A state directory other users can write to is refused: they could plant a
state file naming a pid that ``memfs session stop`` signals.
"""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path

import pytest

from memfs.session.state import SessionState, state_path

from .helpers import run_memfs, write_config

UNKNOWN = [{"type": "memory_store", "memory_store_id": "memstore_nope"}]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_session_logs_are_0600_in_a_0700_directory(
    tmp_path: Path, root: Path, session_env: dict[str, str]
) -> None:
    state = Path(session_env["MEMFS_STATE_DIR"])
    state.mkdir()
    state.chmod(0o755)  # as an older memfs left it
    config = write_config(tmp_path / "session.json", UNKNOWN)
    done = run_memfs(
        ["session", "--config", str(config), "--root", str(root), "--detach"], session_env
    )
    assert done.returncode == 3, done.stderr  # not found, after the supervisor started logging
    assert mode(state) == 0o700
    logs = list(state.glob("*.log"))
    assert logs and all(mode(log) == 0o600 for log in logs), [(p, mode(p)) for p in logs]


def test_a_state_directory_others_can_write_is_refused(
    tmp_path: Path, root: Path, session_env: dict[str, str]
) -> None:
    state = Path(session_env["MEMFS_STATE_DIR"])
    state.mkdir()
    state.chmod(0o777)
    config = write_config(tmp_path / "session.json", UNKNOWN)
    done = run_memfs(["session", "--config", str(config), "--root", str(root)], session_env)
    assert done.returncode == 2
    assert done.stderr == f"memfs session: the state directory {state} is writable by other users\n"
    assert list(state.iterdir()) == []


def test_a_state_file_another_user_could_plant_is_not_acted_on(
    tmp_path: Path, session_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session's state file names a pid that ``stop`` (and ``memfs umount ROOT``) signals and
    a root it unmounts and removes: one in a directory others can write is refused, nothing
    signalled or removed."""
    root = tmp_path / "memory"
    root.mkdir()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        state = Path(session_env["MEMFS_STATE_DIR"])
        state.mkdir()
        session = SessionState(
            pid=sleeper.pid, root=str(root), session_id="sesn_planted", status="starting",
            created_root=True,
        )  # fmt: skip
        monkeypatch.setenv("MEMFS_STATE_DIR", str(state))
        state_path(root).write_text(json.dumps(session.to_json()))
        state.chmod(0o777)
        for command, argv in [
            ("memfs session", ["session", "stop", "--root", str(root)]),
            ("memfs umount", ["umount", str(root)]),
        ]:
            done = run_memfs(argv, session_env)
            assert done.returncode == 1
            assert done.stderr == (
                f"{command}: the state directory {state} is writable by other users\n"
            )
        assert sleeper.poll() is None and root.is_dir()
    finally:
        sleeper.kill()
        sleeper.wait()
