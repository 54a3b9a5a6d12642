"""``memfs session`` runs as root and writes the agent's prompt where the agent may write: it
never writes through a link planted there (issue 20, "root writes through a planted link").

The attack: an agent that can write the prompt file's directory plants symbolic links at the
names memfs used to write first (``.<name>.<pid>.tmp``, for a range of the next pids) and at
the prompt file itself, each pointing to a file root owns elsewhere. The session log
(``--log-file``) is attacked the same way, with a hard link as well: ``O_NOFOLLOW`` does not see
one, and appending to it (or making it 0600) would change the file it names.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kit.planted import NOBODY, plant, untouched, victim

from .helpers import Api, force_unmount, mounts_under, run_memfs, unique, write_config

PIDS_AHEAD = 3000  # links planted for this many of the next pids
UNKNOWN = [{"type": "memory_store", "memory_store_id": "memstore_nope"}]


def agent_directory(tmp_path: Path) -> Path:
    """A directory the agent owns (and so may write to): where the prompt goes."""
    path = tmp_path / "agent"
    path.mkdir(mode=0o755)
    os.chown(path, NOBODY, NOBODY)
    return path


def next_pid() -> int:
    with open("/proc/sys/kernel/ns_last_pid") as last:
        return int(last.read()) + 1


@pytest.mark.fuse
def test_a_prompt_file_is_never_written_through_a_planted_link(
    tmp_path: Path, root: Path, session_env: dict[str, str], api: Api
) -> None:
    if os.getuid() != 0:
        pytest.skip("the attack is on root: only root can give a link to another user")
    target = victim(tmp_path / "victim")  # root's, out of the agent's reach
    directory = agent_directory(tmp_path)
    prompt_file = directory / "prompt.md"
    first = next_pid()
    for pid in range(first, first + PIDS_AHEAD):
        plant("symbolic link", directory / f".prompt.md.{pid}.tmp", target)
    plant("symbolic link", prompt_file, target)
    store = api.create_store(unique("Notes"))
    config = write_config(
        tmp_path / "session.json", [{"type": "memory_store", "memory_store_id": store["id"]}]
    )
    argv = ["session", "--config", str(config), "--root", str(root), "--detach"]
    done = run_memfs([*argv, "--prompt-file", str(prompt_file)], session_env)
    assert done.returncode == 0, done.stderr
    assert mounts_under(root), "the session did not mount its store"
    assert untouched(target)
    info = prompt_file.lstat()
    assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o644
    assert f"## {store['name']}\n" in prompt_file.read_text()
    # the planted links are as the agent left them, and nothing else was left behind
    names = set(os.listdir(directory))
    assert len(names) == PIDS_AHEAD + 1 and "prompt.md" in names


def test_a_prompt_file_in_a_directory_anyone_can_write_is_refused(
    tmp_path: Path, root: Path, session_env: dict[str, str]
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # no sticky bit: anyone could swap the file under us
    config = write_config(tmp_path / "session.json", UNKNOWN)
    done = run_memfs(
        ["session", "--config", str(config), "--root", str(root),
         "--prompt-file", str(shared / "prompt.md")],
        session_env,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        f"memfs session: the prompt file {shared}/prompt.md is in a directory other users can "
        "write to (mode 0777, no sticky bit): put it in a directory only its owner can write to\n"
    )
    assert list(shared.iterdir()) == [] and not root.exists()


@pytest.mark.parametrize("planted", ["symbolic link", "hard link"])
def test_a_session_log_planted_as_a_link_is_refused(
    tmp_path: Path, root: Path, session_env: dict[str, str], planted: str
) -> None:
    log_file = tmp_path / "session.log"
    target = victim(tmp_path / "victim")
    why = plant(planted, log_file, target)
    config = write_config(tmp_path / "session.json", UNKNOWN)
    done = run_memfs(
        ["session", "--config", str(config), "--root", str(root), "--detach",
         "--log-file", str(log_file)],
        session_env,
    )  # fmt: skip
    assert untouched(target)
    assert done.returncode == 2
    assert done.stderr == f"memfs session: the session log {log_file} {why}\n"


def test_a_root_planted_as_a_link_is_refused(
    tmp_path: Path, root: Path, session_env: dict[str, str], api: Api
) -> None:
    """A link at the root would have root mount the session over the empty directory it names,
    anywhere on the machine."""
    store = api.create_store(unique("Notes"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    plant("symbolic link", root, elsewhere)
    config = write_config(
        tmp_path / "session.json", [{"type": "memory_store", "memory_store_id": store["id"]}]
    )
    argv = ["session", "--config", str(config), "--root", str(root), "--detach"]
    try:
        done = run_memfs(argv, session_env)
        assert not mounts_under(elsewhere)
    finally:
        force_unmount(elsewhere)  # what an earlier memfs mounted there
    assert done.returncode == 2
    assert done.stderr == (
        f"memfs session: session root {root} is a symbolic link; remove it (memfs never "
        "mounts through one)\n"
    )
    assert root.is_symlink() and os.listdir(elsewhere) == []
