"""``memfs export`` trusts nothing it reads back from DIR (issue 31): a user who can write DIR
(uid 65534, the attacker) plants ``.memfs/exported.json`` and ``.memfs/written-ahead.jsonl``
naming files outside DIR with their blob ids; root's next export, with and without ``--git``,
removes none of them (nor the directories they would leave empty) and says, one line each,
which entries it ignored. DIR given as a relative path works the same (issue 31, part 5)."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from kit.export_runs import git, memfs
from kit.planted import NOBODY, PRECIOUS, as_nobody, untouched, victim
from kit.servers import ServerProcess
from memfs.api import StoreClient
from memfs.transfer.export_tree import AHEAD_LOG, MANIFEST, Tree, blob_id

# what the attacker lists, and the file of root's each one aims at (below ``rootonly/``)
IN_MANIFEST = {
    "../rootonly/a.conf": "a.conf",
    "notes/../../rootonly/b.conf": "b.conf",
    "notes/x/../../../rootonly/sub/c.conf": "sub/c.conf",
    "./../rootonly/d.conf": "d.conf",
    "/../rootonly/e.conf": "e.conf",
}
IN_AHEAD_LOG = {
    "../rootonly/f.conf": "f.conf",
    "notes/x/../../../rootonly/sub/g.conf": "sub/g.conf",
}


@pytest.mark.parametrize("with_git", [False, True], ids=["plain", "git"])
async def test_bookkeeping_planted_in_dir_removes_nothing_outside_it(
    server: ServerProcess, client: StoreClient, shared_dir: Path, with_git: bool
) -> None:
    store = await client.create_store(f"export-{uuid.uuid4().hex[:8]}")
    await client.create_memory(store.id, "/keep.md", "exported")
    rootonly = shared_dir / "rootonly"
    (rootonly / "sub").mkdir(parents=True)
    victims = [victim(rootonly / name) for name in {**IN_MANIFEST, **IN_AHEAD_LOG}.values()]
    blob = blob_id(PRECIOUS.encode())
    root = shared_dir / "exp"
    root.mkdir()
    os.chown(root, NOBODY, NOBODY)
    manifest = json.dumps({"format": 1, "files": dict.fromkeys(IN_MANIFEST, blob)})
    ahead = "".join(json.dumps({"path": p, "blob": blob}) + "\n" for p in IN_AHEAD_LOG)
    as_nobody(f"mkdir -p .memfs notes/x && cat > {MANIFEST}", root, manifest)
    as_nobody(f"cat > {AHEAD_LOG}", root, ahead)

    done = memfs(server, "export", store.id, str(root), *(["--git"] if with_git else []))
    assert all(untouched(target) for target in victims)
    assert (rootonly / "sub").is_dir()
    assert (root / "keep.md").read_text() == "exported"
    ignored = [line for line in done.stderr.splitlines() if " ignored " in line]
    assert len(ignored) == len(IN_MANIFEST) + len(IN_AHEAD_LOG), done.stderr
    for path in IN_MANIFEST:
        assert f"{MANIFEST} ignored {path!r}: " in done.stderr
    for path in IN_AHEAD_LOG:
        assert f"{AHEAD_LOG} ignored {path!r}: " in done.stderr
    assert "entries of .memfs ignored" in done.stdout
    if with_git:  # DIR is the attacker's: git asks that it be named safe
        assert git(root, "-c", f"safe.directory={root}", "status", "--porcelain") == ""


def test_the_tree_never_reaches_above_dir_whatever_it_is_given(tmp_path: Path) -> None:
    """Below the validation, every path is walked from DIR's descriptor one name at a time: a
    ``..``, ``.`` or empty name is refused there too (defence in depth), for reading, writing,
    appending and removing."""
    (tmp_path / "outside").write_text("keep")
    root = tmp_path / "dir"
    (root / "a").mkdir(parents=True)
    with Tree(root) as tree:
        for path in ("../outside", "a/../../outside", "./../outside", "a//b", "/outside"):
            with pytest.raises(OSError, match="not a path below DIR"):
                tree.read(path)
            with pytest.raises(OSError, match="not a path below DIR"):
                tree.write(path, b"x")
            with pytest.raises(OSError, match="not a path below DIR"):
                tree.append(path, b"x")
            with pytest.raises(OSError, match="not a path below DIR"):
                tree.remove(path)
            assert not tree.create(path, b"x")
    assert (tmp_path / "outside").read_text() == "keep"
    assert sorted(os.listdir(root)) == ["a"] and os.listdir(root / "a") == []


@pytest.mark.parametrize("given", ["exp", "./exp", "exp/", "sub/../exp"])
async def test_a_relative_dir_exports_with_git_and_imports(
    server: ServerProcess, client: StoreClient, tmp_path: Path, given: str
) -> None:
    store = await client.create_store(f"export-{uuid.uuid4().hex[:8]}")
    await client.create_memory(store.id, "/notes/a.md", "alpha")
    (tmp_path / "sub").mkdir()
    memfs(server, "export", store.id, given, "--git", cwd=tmp_path)
    root = tmp_path / "exp"
    assert (root / "notes/a.md").read_text() == "alpha"
    assert sorted(os.listdir(tmp_path)) == ["exp", "sub"]
    assert sorted(os.listdir(root)) == [".git", ".memfs", "notes"]  # no exp/exp left behind
    assert git(root, "log", "--format=%s") == "created /notes/a.md\n"
    assert git(root, "status", "--porcelain") == ""
    again = memfs(server, "export", store.id, given, "--git", cwd=tmp_path)
    assert "0 files written, 0 removed" in again.stdout
    into = await client.create_store(f"import-{uuid.uuid4().hex[:8]}")
    memfs(server, "import", given, into.id, cwd=tmp_path)  # and back, from the same DIR
    imported = await client.find_memory(into.id, "/notes/a.md")
    assert imported is not None
    assert (await client.get_memory(into.id, imported.id)).content == "alpha"
