"""Invalid sessions are refused before anything is mounted, each with its own message.

Real server, real ``memfs session`` processes; no mount may appear and no directory be created.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .helpers import Api, mounts_under, run_memfs, slug_of, unique, write_config


def refused(
    tmp_path: Path,
    root: Path,
    env: dict[str, str],
    resources: Any,
    *extra: str,
    code: int = 2,
) -> str:
    """A refused session's stderr; ``code``: the exit status of its kind of fault (README,
    "Exit codes": 3 unknown stores only, 5 a refused key, else 2)."""
    config = write_config(tmp_path / "session.json", resources)
    done = run_memfs(["session", "--config", str(config), "--root", str(root), *extra], env)
    assert done.returncode == code, done.stderr
    assert done.stdout == ""
    assert not root.exists(), "a refused session must not create its root"
    assert mounts_under(root) == []
    assert "Traceback" not in done.stderr
    assert "sk-memfs" not in done.stderr
    return done.stderr


def test_unknown_store(tmp_path: Path, root: Path, session_env: dict[str, str], api: Api) -> None:
    good = api.create_store(unique("Known"))
    stderr = refused(
        tmp_path,
        root,
        session_env,
        [
            {"type": "memory_store", "memory_store_id": good["id"]},
            {
                "type": "memory_store",
                "memory_store_id": "memstore_doesnotexist",
                "access": "read_only",
            },
        ],
        code=3,  # as `memfs stores show` of an unknown store
    )
    assert (
        stderr == "memfs session: resources[1]: memory store memstore_doesnotexist does not exist\n"
    )


def test_a_store_name_several_stores_share(
    tmp_path: Path, root: Path, session_env: dict[str, str], api: Api
) -> None:
    name = unique("Twin")
    twins = [api.create_store(name)["id"] for _ in range(2)]
    stderr = refused(
        tmp_path, root, session_env, [{"type": "memory_store", "memory_store_id": name}]
    )
    assert stderr.count("\n") == 1 and f"2 memory stores are named {name!r}" in stderr
    assert all(store_id in stderr for store_id in twins) and "use an id" in stderr
    unknown = refused(
        tmp_path,
        root,
        session_env,
        [{"type": "memory_store", "memory_store_id": name + "s"}],
        code=3,
    )
    assert unknown == f"memfs session: resources[0]: memory store {name}s does not exist\n"


def test_archived_store_read_write(
    tmp_path: Path, root: Path, session_env: dict[str, str], api: Api
) -> None:
    store = api.create_store(unique("Old"))
    api.archive(store["id"])
    stderr = refused(
        tmp_path, root, session_env, [{"type": "memory_store", "memory_store_id": store["id"]}]
    )
    assert (
        f"memory store {store['id']} ({store['name']!r}) is archived and cannot be attached "
        "read_write; attach it read_only" in stderr
    )


def test_two_stores_with_the_same_slug(
    tmp_path: Path, root: Path, session_env: dict[str, str], api: Api
) -> None:
    name = unique("Shared Notes")
    first = api.create_store(name)
    second = api.create_store(name.upper().replace(" ", "__"))
    stderr = refused(
        tmp_path,
        root,
        session_env,
        {
            "resources": [
                {"type": "memory_store", "memory_store_id": first["id"]},
                {"type": "memory_store", "memory_store_id": second["id"], "access": "read_only"},
            ]
        },
    )
    assert f"would both mount at {root / slug_of(name)}; rename one of them" in stderr


def test_too_many_stores(tmp_path: Path, root: Path, session_env: dict[str, str]) -> None:
    resources = [{"type": "memory_store", "memory_store_id": f"memstore_{i}"} for i in range(9)]
    stderr = refused(tmp_path, root, session_env, resources)
    assert stderr == "memfs session: the session attaches 9 memory stores; at most 8 are allowed\n"


def test_instructions_too_long(tmp_path: Path, root: Path, session_env: dict[str, str]) -> None:
    resources = [
        {"type": "memory_store", "memory_store_id": "memstore_a", "instructions": "i" * 5000}
    ]
    stderr = refused(tmp_path, root, session_env, resources)
    assert "instructions for memstore_a are 5000 characters; at most 4096 are allowed" in stderr


def test_malformed_json(tmp_path: Path, root: Path, session_env: dict[str, str]) -> None:
    (tmp_path / "session.json").write_text("[{")
    done = run_memfs(
        ["session", "--config", str(tmp_path / "session.json"), "--root", str(root)], session_env
    )
    assert done.returncode == 2
    assert "is not valid JSON" in done.stderr
    assert not root.exists()


def test_root_not_empty(tmp_path: Path, root: Path, session_env: dict[str, str], api: Api) -> None:
    """The root is the session's one mount point: a file in it would be hidden, so it is refused
    and left as it is."""
    store = api.create_store(unique("Busy"))
    occupied = root / slug_of(store["name"])
    occupied.mkdir(parents=True)
    (occupied / "stale.md").write_text("left over")
    config = write_config(
        tmp_path / "session.json", [{"type": "memory_store", "memory_store_id": store["id"]}]
    )
    done = run_memfs(["session", "--config", str(config), "--root", str(root)], session_env)
    assert done.returncode == 2
    assert done.stderr.strip().endswith(f"session root {root} exists and is not empty (1 entries)")
    assert sorted(p.name for p in root.iterdir()) == [occupied.name]
    assert (occupied / "stale.md").read_text() == "left over"
    assert mounts_under(root) == []


def test_bad_credentials_are_refused_without_showing_the_key(
    tmp_path: Path, root: Path, session_env: dict[str, str], api: Api
) -> None:
    store = api.create_store(unique("Locked"))
    env = dict(session_env, ANTHROPIC_API_KEY="sk-memfs-wrong-" + "w" * 24)
    stderr = refused(
        tmp_path, root, env, [{"type": "memory_store", "memory_store_id": store["id"]}], code=5
    )
    assert "the API key in ANTHROPIC_API_KEY was refused by http://" in stderr
    assert "wwwwwwww" not in stderr


@pytest.mark.parametrize("detach", [False, True])
def test_refusal_reaches_the_caller_with_and_without_detach(
    tmp_path: Path, root: Path, session_env: dict[str, str], detach: bool
) -> None:
    resources = [{"type": "memory_store", "memory_store_id": "memstore_nope"}]
    extra = ("--detach",) if detach else ()
    stderr = refused(tmp_path, root, session_env, resources, *extra, code=3)
    assert stderr.strip().splitlines()[-1] == (
        "memfs session: resources[0]: memory store memstore_nope does not exist"
    )
