"""A store moves: ``memfs export`` -> ``memfs import`` into another store (on the same server,
and on a second one: another workspace) -> ``memfs export`` gives the same tree, on both APIs
(Databricks descriptions included)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

from kit.databricks import ACTOR, Workspace, databricks_env
from kit.export_runs import memfs
from kit.servers import ServerProcess

from .importing import create_store, memfs_import

MEMORIES = {
    "/notes/a.md": "# A\n",
    "/notes/deep/er/b.md": "b\n" * 100,
    "/empty.md": "",
    "/é/unicode ü.md": "ünïcödé ✓",
    "/todo": "- [ ] move the store\n",
}
DESCRIBED = {"/notes/a.md": "the first note", "/todo": "what is left"}


def files_of(root: Path) -> dict[str, bytes]:
    """Every file below ``root`` by its path there, but for what names its store (store.json)
    and the exporter's own record of what it wrote."""
    found: dict[str, bytes] = {}
    for directory, _dirs, names in os.walk(root):
        for name in names:
            relative = os.path.relpath(os.path.join(directory, name), root)
            if relative in (".memfs/store.json", ".memfs/exported.json"):
                continue
            found[relative] = Path(directory, name).read_bytes()
    return found


def _fill(server: ServerProcess) -> str:
    store = create_store(server, f"moving-{uuid.uuid4().hex[:8]}")
    for path, content in MEMORIES.items():
        _put(server, store, path, content)
    return store


def _put(server: ServerProcess, store: str, path: str, content: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memfs", "memories", "put", store, path, "-"],
        input=content.encode("utf-8"),
        env=server.client_env(),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_memory_stores_round_trip_on_one_server_and_onto_another(
    server: ServerProcess, fresh_server: ServerProcess, tmp_path: Path
) -> None:
    source = _fill(server)
    first = tmp_path / "first"
    memfs(server, "export", source, str(first))
    assert files_of(first) == {p[1:]: c.encode("utf-8") for p, c in MEMORIES.items()}

    for target_server in (server, fresh_server):  # the same workspace, then another
        target = create_store(target_server, f"moved-{uuid.uuid4().hex[:8]}")
        run = memfs_import(target_server.client_env(), first, target)
        assert run.status == 0 and len(run.paths("create")) == len(MEMORIES), run
        again = tmp_path / f"again-{target_server.port}"
        memfs(target_server, "export", target, str(again))
        assert files_of(again) == files_of(first)


def test_databricks_round_trip_keeps_the_descriptions(
    server: ServerProcess, fresh_server: ServerProcess, tmp_path: Path
) -> None:
    with Workspace(server) as here, Workspace(fresh_server) as there:
        source = here.create_store()
        for path, content in MEMORIES.items():
            here.put(source, path, content, description=DESCRIBED.get(path))
        actor = ("--api", "databricks", "--actor", ACTOR)
        first = tmp_path / "first"
        memfs(server, "export", source, str(first), *actor, env=databricks_env(server, tmp_path))
        assert ".memfs/descriptions.json" in files_of(first)

        for target_server, workspace in ((server, here), (fresh_server, there)):
            env = databricks_env(target_server, tmp_path)
            target = workspace.create_store()
            run = memfs_import(env, first, target, *actor)
            assert run.status == 0 and len(run.paths("create")) == len(MEMORIES), run
            entries = workspace.entries(target)
            assert {p: e.get("description", "") for (_, p), e in entries.items()} == {
                p: DESCRIBED.get(p, "") for p in MEMORIES
            }
            again = tmp_path / f"again-{target_server.port}"
            memfs(target_server, "export", target, str(again), *actor, env=env)
            assert files_of(again) == files_of(first)


def test_a_databricks_export_into_memory_stores_and_back(
    server: ServerProcess, tmp_path: Path
) -> None:
    """Across the APIs: the contents move, the descriptions are noted (Memory Stores has
    none) and come back only from the tree they were in."""
    with Workspace(server) as workspace:
        source = workspace.create_store()
        for path, content in MEMORIES.items():
            workspace.put(source, path, content, description=DESCRIBED.get(path))
        env = databricks_env(server, tmp_path)
        actor = ("--api", "databricks", "--actor", ACTOR)
        first = tmp_path / "first"
        memfs(server, "export", source, str(first), *actor, env=env)
        memory_stores = create_store(server, f"from-dbx-{uuid.uuid4().hex[:8]}")
        run = memfs_import(server.client_env(), first, memory_stores)
        assert run.status == 0 and "2 description(s)" in run.stderr, run
        second = tmp_path / "second"
        memfs(server, "export", memory_stores, str(second))
        contents = {p: c for p, c in files_of(first).items() if not p.startswith(".memfs/")}
        assert files_of(second) == contents

        back = workspace.create_store()
        assert memfs_import(env, second, back, *actor).status == 0
        entries = workspace.entries(back)
        assert {p: e.get("content", "") for (_, p), e in entries.items()} == MEMORIES
