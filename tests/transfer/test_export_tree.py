"""``memfs export STORE DIR`` without git, on the real server: the memories as files, DIR made
equal to the store on the next run (only the last export's unchanged files removed), links
planted in DIR never followed, Databricks entries with their descriptions."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from kit.databricks import ACTOR, Workspace, databricks_env
from kit.export_runs import git, memfs
from kit.servers import ServerProcess
from memfs.api import StoreClient
from memfs.transfer.export_ahead import TreeAhead
from memfs.transfer.export_tree import Tree, blob_id, sync_tree


def tree_of(root: Path) -> dict[str, str]:
    """Every regular file below ``root`` (relative path -> text), links listed as such."""
    found = {}
    for parent, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(parent) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                found[rel] = "-> " + os.readlink(path)
            elif name in files:
                found[rel] = path.read_text()
    return found


async def test_a_store_becomes_files_and_the_next_run_follows_it(
    server: ServerProcess, client: StoreClient, tmp_path: Path
) -> None:
    store = await client.create_store(f"export-{uuid.uuid4().hex[:8]}", description="what for")
    a = await client.create_memory(store.id, "/notes/a.md", "alpha ✓\n")
    b = await client.create_memory(store.id, "/notes/deep/b.md", "beta")
    gone = await client.create_memory(store.id, "/gone.md", "soon gone")
    edited = await client.create_memory(store.id, "/edited.md", "as exported")
    await client.create_memory(store.id, "/.memfs/store.json", "{}")
    for n in range(25):  # more than one page of a listing with contents
        await client.create_memory(store.id, f"/many/{n:02}", str(n))
    root = tmp_path / "export"
    done = memfs(server, "export", store.name, str(root))
    files = tree_of(root)
    assert files["notes/a.md"] == "alpha ✓\n" and files["notes/deep/b.md"] == "beta"
    assert len([f for f in files if f.startswith("many/")]) == 25
    info = json.loads(files[".memfs/store.json"])
    assert info == {
        "format": 1, "api": "memory_stores", "store_id": store.id, "name": store.name,
        "description": "what for",
    }  # fmt: skip
    assert "not exported: '/.memfs/store.json': reserved name" in done.stderr
    assert done.stdout.startswith("memfs export: 29 memories; 30 files written, 0 removed;")

    (root / "mine.txt").write_text("a file of the user's")
    (root / "edited.md").write_text("changed by hand")
    await client.delete_memory(store.id, gone.id)
    await client.delete_memory(store.id, edited.id)
    await client.delete_memory(store.id, b.id)
    await client.update_memory(store.id, a.id, content="alpha 2")
    again = memfs(server, "export", store.id, str(root))
    files = tree_of(root)
    assert files["notes/a.md"] == "alpha 2"
    assert "gone.md" not in files and "notes/deep/b.md" not in files
    assert "notes/deep" not in files  # the directory it left empty
    assert files["mine.txt"] == "a file of the user's"  # never written by an export
    assert files["edited.md"] == "changed by hand"  # changed since: kept, and said so
    assert "kept edited.md: changed since the last export" in again.stderr
    assert "1 files written, 2 removed" in again.stdout
    report = json.loads(memfs(server, "export", store.id, str(root), "--json").stdout)
    assert (report["memories"], report["files_written"], report["files_removed"]) == (26, 0, 0)
    assert report["kept"] == [{"path": "edited.md", "reason": "changed since the last export"}]
    assert report["skipped"] == [{"path": "/.memfs/store.json", "reason": "reserved name"}]


async def test_links_planted_in_dir_are_never_followed(
    server: ServerProcess, client: StoreClient, tmp_path: Path
) -> None:
    store = await client.create_store(f"export-{uuid.uuid4().hex[:8]}")
    await client.create_memory(store.id, "/notes/a.md", "through the link?")
    await client.create_memory(store.id, "/b.md", "over the link?")
    await client.create_memory(store.id, "/c.md", "fine")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "b.md").write_text("precious")
    root = tmp_path / "export"
    root.mkdir()
    (root / "notes").symlink_to(outside)
    (root / "b.md").symlink_to(outside / "b.md")
    done = memfs(server, "export", store.id, str(root), expect=1)
    assert os.listdir(outside) == ["b.md"] and (outside / "b.md").read_text() == "precious"
    assert (root / "c.md").read_text() == "fine"
    assert "not written: notes/a.md: a symbolic link is in the way at notes" in done.stderr
    assert "not written: b.md: a symbolic link is in the way at b.md" in done.stderr
    assert "2 not written" in done.stdout


def test_sync_refuses_special_files_and_keeps_what_it_did_not_write(tmp_path: Path) -> None:
    root = tmp_path / "dir"
    root.mkdir()
    os.mkfifo(root / "fifo")
    (root / "dir.md").mkdir()
    data = {"fifo": b"x", "dir.md": b"y", "ok": b"z"}
    with Tree(root) as tree:
        report = sync_tree(
            tree, {p: blob_id(d) for p, d in data.items()}, lambda ps: {p: data[p] for p in ps}
        )
    assert sorted(report.refused) == [
        ("dir.md", "a directory is in the way at dir.md"),
        ("fifo", "a special file is in the way at fifo"),
    ]
    assert (root / "ok").read_bytes() == b"z" and report.written == 1
    with Tree(root) as tree:  # next run: nothing wanted; only "ok" was ours
        report = sync_tree(tree, {}, lambda ps: {})
    assert report.removed == 1 and not (root / "ok").exists()
    assert (root / "fifo").exists() and (root / "dir.md").is_dir()


def test_files_written_ahead_touch_nothing_already_there_and_leave_no_stray(
    tmp_path: Path,
) -> None:
    """``TreeAhead`` (``export --git`` writing each memory's newest content while it lists):
    it creates only where nothing is, ``prune`` removes what the tree will not hold before the
    tree is synced (so ``a/b`` ahead is not in the way of a file ``a``), a file changed since
    it was written ahead is never removed, and the sync counts the files ahead as written."""
    root = tmp_path / "dir"
    root.mkdir()
    (root / "mine.md").write_text("the user's")
    os.symlink("/etc", root / "link")
    ahead = TreeAhead(root)
    try:
        ahead.submit([("mine.md", b"ahead"), ("link/x", b"ahead"), ("a/b", b"clash")])
        ahead.submit([("kept.md", b"kept"), ("edited.md", b"ahead"), ("a/b", b"second")])
        ahead.submit([("c.md", b"newest"), ("c.md", b"older")])  # one page: the first wins
        ahead.finish()
        assert sorted(ahead.created) == ["a/b", "c.md", "edited.md", "kept.md"]
        assert (root / "c.md").read_bytes() == b"newest"
        assert (root / "mine.md").read_text() == "the user's"  # never over anything
        assert (root / "a" / "b").read_bytes() == b"clash"  # the first (newest) one wins
        (root / "edited.md").write_text("edited meanwhile")
        data = {"a": b"a file", "kept.md": b"kept"}
        wanted = {path: blob_id(content) for path, content in data.items()}
        ahead.prune(wanted)
        assert not (root / "a").is_dir()  # the file ahead and the directory it made
        with Tree(root) as tree:
            report = sync_tree(tree, wanted, lambda paths: {p: data[p] for p in paths})
        assert report.refused == [] and (root / "a").read_bytes() == b"a file"
        ahead.settle(report)
        assert (report.written, report.unchanged) == (2, 0)
        assert (root / "edited.md").read_text() == "edited meanwhile"
        assert sorted(os.listdir(root)) == [
            ".memfs",
            "a",
            "edited.md",
            "kept.md",
            "link",
            "mine.md",
        ]
        assert ahead.created == {}
    finally:
        ahead.close()


def test_nothing_is_written_ahead_where_its_record_cannot_go(tmp_path: Path) -> None:
    """Files written ahead are named in ``.memfs/written-ahead.jsonl`` first (so a killed
    export's are known as its own): where that record cannot be written safely (``.memfs`` a
    planted link, the record a hard link to another file), nothing is written ahead and
    nothing is written through the link."""
    root = tmp_path / "dir"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, root / ".memfs")
    victim = tmp_path / "victim"
    victim.write_text("keep")
    for plant in ("symlink", "hard link"):
        if plant == "hard link":
            os.unlink(root / ".memfs")
            (root / ".memfs").mkdir()
            os.link(victim, root / ".memfs" / "written-ahead.jsonl")
        ahead = TreeAhead(root)
        try:
            ahead.submit([("a.md", b"x")])
            ahead.finish()
            assert ahead.created == {} and not (root / "a.md").exists(), plant
        finally:
            ahead.close()
    assert os.listdir(elsewhere) == [] and victim.read_text() == "keep"


def test_databricks_entries_with_descriptions(server: ServerProcess, tmp_path: Path) -> None:
    env = databricks_env(server, tmp_path)
    with Workspace(server) as workspace:
        store = workspace.create_store()
        workspace.put(store, "/prefs.md", "likes tea", description="what the user likes")
        workspace.put(store, "/plain.md", "no description")
        workspace.put(store, "/prefs.md", "in session one", session="s1", description="s1's")
        workspace.put(store, "/other.md", "another actor's", actor="someone-else")
    root = tmp_path / "export"
    args = ["export", store, str(root), "--api", "databricks", "--actor", ACTOR]
    memfs(server, *args, env=env)
    memfs(server, *args[:2], str(tmp_path / "s1"), *args[3:], "--session", "s1", env=env)
    files = tree_of(root)
    assert files["prefs.md"] == "likes tea" and files["plain.md"] == "no description"
    assert "other.md" not in files
    assert files[".memfs/descriptions.json"] == '{\n  "/prefs.md": "what the user likes"\n}\n'
    info = json.loads(files[".memfs/store.json"])
    assert (info["api"], info["actor_id"], info["session_id"]) == ("databricks", ACTOR, None)
    session = tree_of(tmp_path / "s1")
    assert session["prefs.md"] == "in session one" and "plain.md" not in session
    assert json.loads(session[".memfs/descriptions.json"]) == {"/prefs.md": "s1's"}


def test_databricks_git_is_one_commit_per_run_that_changed_something(
    server: ServerProcess, tmp_path: Path
) -> None:
    env = databricks_env(server, tmp_path)
    root = tmp_path / "export"
    with Workspace(server) as workspace:
        store = workspace.create_store()
        tea = workspace.put(store, "/prefs.md", "likes tea", description="what the user likes")
        workspace.put(store, "/plain.md", "no description")
        args = ["export", store, str(root), "--api", "databricks", "--actor", ACTOR, "--git"]
        first = memfs(server, *args, env=env)
        again = memfs(server, *args, env=env)
        workspace.patch(store, tea, "likes coffee now")
        third = memfs(server, *args, env=env)
    assert "; 1 commit;" in first.stdout and "nothing new to commit" in again.stdout
    assert "; 1 commit;" in third.stdout
    log = git(root, "log", "--format=%an <%ae>|%s", "--name-status").split("\n")
    assert (
        log[0]
        == f"{ACTOR} <{ACTOR}@databricks-actor.memfs.invalid>|export: 0 added, 1 changed, 0 removed"
    )
    assert git(root, "rev-list", "--count", "HEAD") == "2\n"
    assert git(root, "show", "HEAD~1:.memfs/descriptions.json") == (
        '{\n  "/prefs.md": "what the user likes"\n}\n'
    )
    assert git(root, "show", "HEAD:prefs.md") == "likes coffee now"
    assert git(root, "ls-files") == ".memfs/descriptions.json\nplain.md\nprefs.md\n"
    assert git(root, "status", "--porcelain") == ""
