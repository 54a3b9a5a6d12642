"""``memfs export STORE DIR --git`` on the real server with real git: the history matches the
store's versions commit by commit, a second run adds only what is new (one listing request), and
an export stopped half-way ends, once run again, with the commits of one uninterrupted run."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from kit.export_runs import git, memfs
from kit.servers import ServerProcess
from memfs.api import StoreClient
from memfs.contract.models import MemoryStore, MemoryVersion
from memfs.transfer import export_git
from memfs.transfer.export_history import export_history

VERSIONS_ROUTE = 'route="/v1/memory_stores/{store_id}/memory_versions"'


def listing_requests(server: ServerProcess) -> int:
    """The versions listings the server has answered (its /metrics)."""
    total = 0
    for line in httpx.get(server.base_url + "/metrics").text.splitlines():
        if line.startswith("memfs_server_requests_total{") and VERSIONS_ROUTE in line:
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


async def make_history(client: StoreClient) -> MemoryStore:
    """A store whose history has creates, updates, a rename, deletes, a re-create, a redacted
    version and a memory at a reserved path."""
    store = await client.create_store(f"export-{uuid.uuid4().hex[:8]}")
    sid = store.id
    a = await client.create_memory(sid, "/notes/a.md", "one\n")
    await client.update_memory(sid, a.id, content="one\ntwo\n")
    await client.update_memory(sid, a.id, path="/notes/b.md")
    await client.update_memory(sid, a.id, content="one\ntwo\nthree\n", path="/b.md")
    c = await client.create_memory(sid, "/c", "first c")
    await client.delete_memory(sid, c.id)
    await client.create_memory(sid, "/c", "second c")  # another memory at the same path
    r = await client.create_memory(sid, "/r", "the secret")
    await client.update_memory(sid, r.id, content="public")
    first_r = [v async for v in client.list_versions(sid, memory_id=r.id)][-1]
    await client.redact_version(sid, first_r.id)
    await client.create_memory(sid, "/.git/hooks/post-commit", "#!/bin/sh\ntouch /tmp/pwned\n")
    await client.create_memory(sid, '/quote"d \\ name', "odd")
    return store


async def all_versions(client: StoreClient, store_id: str) -> list[MemoryVersion]:
    newest_first = [v async for v in client.list_versions(store_id, view="full", limit=20)]
    return newest_first[::-1]


def commits(root: Path) -> list[dict[str, Any]]:
    out = git(root, "log", "--reverse", "-z", "--format=%H%n%T%n%an%n%ae%n%at%n%ct%n%B")
    found = []
    for record in out.split("\0"):
        if not record.strip():
            continue
        sha, tree, name, email, at, ct, message = record.lstrip("\n").split("\n", 6)
        trailers = dict(
            line.split(": ", 1) for line in message.splitlines() if line.startswith("Memfs-")
        )
        found.append(
            {"sha": sha, "tree": tree, "name": name, "email": email, "at": int(at),
             "ct": int(ct), "message": message, "trailers": trailers}
        )  # fmt: skip
    return found


def files_at(root: Path, commit: str) -> dict[str, str]:
    names = git(root, "ls-tree", "-r", "-z", "--name-only", commit).split("\0")
    return {n: git(root, "show", f"{commit}:{n}") for n in names if n}


async def test_history_matches_the_versions_commit_by_commit(
    server: ServerProcess, client: StoreClient, tmp_path: Path
) -> None:
    store = await make_history(client)
    root = tmp_path / "export"
    done = memfs(server, "export", store.id, str(root), "--git")
    versions = await all_versions(client, store.id)
    history = commits(root)
    assert len(history) == len(versions) == 11
    paths: dict[str, str] = {}  # memory id -> path, as the store had it
    previous: dict[str, str] = {}
    for version, commit in zip(versions, history, strict=True):
        assert commit["trailers"]["Memfs-Version"] == version.id
        assert commit["trailers"]["Memfs-Store"] == store.id
        assert version.created_by is not None
        assert commit["name"] == version.created_by.id
        assert commit["email"].endswith("@api.memfs.invalid")
        assert commit["at"] == commit["ct"] == int(version.created_at.timestamp())
        tree = files_at(root, commit["sha"])
        if version.redacted:
            assert "(redacted)" in commit["message"].splitlines()[0]
            assert "the secret" not in commit["message"]
            assert tree == previous  # the file keeps what it held
        elif version.operation == "deleted":
            assert commit["message"].startswith(f"deleted {version.path}")
            paths.pop(version.memory_id)
        else:
            assert version.path is not None and version.content is not None
            assert commit["message"].startswith(f"{version.operation} {version.path}")
            if version.path.startswith("/.git/"):
                assert "Not exported: reserved name." in commit["message"]
            else:
                paths[version.memory_id] = version.path
                assert tree[version.path[1:]] == version.content
        assert sorted(tree) == sorted(p[1:] for p in paths.values())
        previous = tree
    assert "the secret" not in git(root, "log", "-p", "--all")
    # the working tree is the last commit, plus memfs's own files; git sees it clean
    memories = {m.path: m async for m in client.list_memories(store.id, view="basic")}
    assert sorted(p for p in os.listdir(root) if p != ".git") == [
        ".memfs", "b.md", "c", "quote\"d \\ name", "r",
    ]  # fmt: skip
    assert (root / "b.md").read_text() == "one\ntwo\nthree\n"
    assert "/.git/hooks/post-commit" in memories
    assert not (root / ".git" / "hooks" / "post-commit").exists()
    assert git(root, "status", "--porcelain") == ""
    assert "not exported: '/.git/hooks/post-commit': reserved name" in done.stderr
    assert done.stdout.startswith("memfs export: 4 memories; 11 new versions, 11 commits;")


async def test_a_second_run_adds_only_new_versions_with_one_request(
    server: ServerProcess, client: StoreClient, tmp_path: Path
) -> None:
    store = await client.create_store(f"export-{uuid.uuid4().hex[:8]}")
    a = await client.create_memory(store.id, "/a", "1")
    for n in range(2, 30):  # more than one page of versions
        await client.update_memory(store.id, a.id, content=str(n))
    root = tmp_path / "export"
    memfs(server, "export", store.id, str(root), "--git")
    head = git(root, "rev-parse", "HEAD")
    before = listing_requests(server)
    again = memfs(server, "export", store.id, str(root), "--git")
    assert listing_requests(server) - before == 1
    assert "0 new versions, 0 commits" in again.stdout or "; 0 files written" in again.stdout
    assert git(root, "rev-parse", "HEAD") == head
    await client.update_memory(store.id, a.id, path="/b", content="moved")
    memfs(server, "export", store.id, str(root), "--git")
    log = commits(root)
    assert len(log) == 30 and log[-1]["message"].startswith("modified /b (renamed from /a)")
    assert git(root, "rev-parse", "HEAD~1") == head
    assert sorted(os.listdir(root)) == [".git", ".memfs", "b"]


async def test_git_failing_while_the_versions_are_listed_fails_the_export_and_leaves_no_file(
    server: ServerProcess, client: StoreClient, tmp_path: Path
) -> None:
    """fast-import gone while the pages are listed: the listing's worker, streaming blobs into
    it, fails, the export raises it (not a hang, not a partial success), and the files written
    ahead are removed."""
    store = await client.create_store(f"export-{uuid.uuid4().hex[:8]}")
    for i in range(50):  # 1.5 MB of contents: more than the pipe to fast-import holds
        await client.create_memory(store.id, f"/m{i:02d}.md", f"{i} " + "x" * 30_000)
    real_git = shutil.which("git")
    assert real_git is not None
    fake = tmp_path / "git"
    fake.write_text(
        "#!/bin/sh\n"
        'for arg in "$@"; do [ "$arg" = fast-import ] && { echo gone >&2; exit 1; }; done\n'
        f'exec {real_git} "$@"\n'
    )
    fake.chmod(0o755)
    root = tmp_path / "export"
    with pytest.raises(export_git.GitError, match="fast-import stopped reading its input"):
        await export_history(client, store, root, repo=export_git.GitRepo(root, git=str(fake)))
    assert sorted(os.listdir(root)) == [".git"]
    assert git(root, "log", "--oneline", "--all") == ""


async def test_an_export_stopped_half_way_ends_as_one_uninterrupted_run(
    server: ServerProcess, client: StoreClient, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = await make_history(client)

    class Stop(Exception):
        pass

    def stop_after_first_checkpoint(phase: str, done: int, total: int | None) -> None:
        if phase == "committed" and total is not None and done < total:
            raise Stop

    stopped = tmp_path / "stopped"
    with pytest.raises(Stop):
        await export_history(
            client, store, stopped, progress=stop_after_first_checkpoint, checkpoint_every=4
        )
    assert len(commits(stopped)) == 4  # the branch is at the checkpoint, nothing after it
    assert sorted(os.listdir(stopped)) == [".git"]  # no file written ahead is left
    await export_history(client, store, stopped)
    whole = tmp_path / "whole"
    await export_history(client, store, whole)
    assert [(c["sha"], c["tree"]) for c in commits(stopped)] == [
        (c["sha"], c["tree"]) for c in commits(whole)
    ]
    assert files_at(stopped, "HEAD") == files_at(whole, "HEAD")
    assert sorted(os.listdir(stopped)) == sorted(os.listdir(whole))
    for root in (stopped, whole):
        assert git(root, "status", "--porcelain") == ""  # the working tree is the last commit
    # written while fast-import ran, from the listing, and found equal to the branch's tree
    assert not [r for r in caplog.records if "written again" in r.getMessage()]


async def test_a_repository_of_another_store_or_a_planted_git_is_refused(
    server: ServerProcess, client: StoreClient, tmp_path: Path
) -> None:
    one = await client.create_store(f"export-{uuid.uuid4().hex[:8]}")
    await client.create_memory(one.id, "/a", "a")
    two = await client.create_store(f"export-{uuid.uuid4().hex[:8]}")
    root = tmp_path / "export"
    memfs(server, "export", one.id, str(root), "--git")
    refused = memfs(server, "export", two.id, str(root), "--git", expect=1)
    assert f"holds store {one.id}, not store {two.id}" in refused.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / ".git").symlink_to(elsewhere)
    refused = memfs(server, "export", one.id, str(planted), "--git", expect=1)
    assert "is a symbolic link" in refused.stderr
    assert os.listdir(elsewhere) == []


def test_paths_are_quoted_for_fast_import() -> None:
    assert export_git.quote_path('a "b"\\c\n') == b'"a \\"b\\"\\\\c\\012"'
    assert export_git.quote_path("é") == '"é"'.encode()


def test_author_of_each_actor() -> None:
    from memfs.contract.models import Actor
    from memfs.transfer.export_git import author

    assert author(Actor("session_actor", "sesn_1")) == ("sesn_1", "sesn_1@session.memfs.invalid")
    assert author(Actor("api_actor", "key <x>")) == ("key <x>", "key__x_@api.memfs.invalid")
    assert author(None) == ("unknown", "unknown@memfs.invalid")
    assert isinstance(datetime.now(), datetime)


async def test_versions_redacted_after_the_export_are_reported(
    server: ServerProcess, client: StoreClient, tmp_path: Path
) -> None:
    store = await client.create_store(f"export-{uuid.uuid4().hex[:8]}")
    a = await client.create_memory(store.id, "/a", "a secret")
    await client.update_memory(store.id, a.id, content="public")
    root = tmp_path / "export"
    memfs(server, "export", store.id, str(root), "--git")
    first = [v async for v in client.list_versions(store.id, memory_id=a.id)][-1]
    await client.redact_version(store.id, first.id)
    quiet = memfs(server, "export", store.id, str(root), "--git")
    assert "redacted" not in quiet.stderr  # older than the last export: not listed again
    found = memfs(server, "export", store.id, str(root), "--git", "--find-redacted", "--json")
    assert json.loads(found.stdout)["redacted_in_history"] == [first.id]
    assert "a secret" in git(root, "log", "-p")  # memfs never rewrites the history
    refused = memfs(server, "export", store.id, str(root), "--find-redacted", expect=2)
    assert "--find-redacted goes with --git" in refused.stderr


async def test_a_file_and_a_directory_of_one_name_are_reported_not_merged(
    server: ServerProcess, client: StoreClient, tmp_path: Path
) -> None:
    store = await client.create_store(f"export-{uuid.uuid4().hex[:8]}")
    await client.create_memory(store.id, "/a", "a file")
    await client.create_memory(store.id, "/a/b", "below a file")  # the API allows both
    await client.create_memory(store.id, "/c/d", "below c")
    c = await client.create_memory(store.id, "/c", "over a directory")
    await client.update_memory(store.id, c.id, path="/e")
    root = tmp_path / "export"
    done = memfs(server, "export", store.id, str(root), "--git", "--json")
    skipped = json.loads(done.stdout)["skipped"]
    assert skipped == [
        {"path": "/a/b", "reason": "the memory /a is a file where this path needs a directory"},
        {"path": "/c", "reason": "memories below /c/ need a directory of this name"},
    ]
    assert git(root, "ls-files") == "a\nc/d\ne\n"
    assert (root / "e").read_text() == "over a directory"
    assert "written again" not in done.stderr  # the tree planned was the branch's
    assert git(root, "status", "--porcelain") == ""


async def test_a_history_the_server_pruned_is_said_to_start_late_and_a_whole_one_is_not(
    tmp_path: Path,
) -> None:
    """Retention drops a memory's old versions (never its newest): a first export whose listing
    starts a memory past its creation says how many memories began before the repository; a
    store whose every memory starts with its creation gets no such line."""
    from datetime import timedelta

    from kit.servers import served_in_process
    from memfs.api.config import ClientConfig
    from memfs.server.backends.sqlite import SqliteStorage
    from memfs.server.db.clock import utc_now
    from memfs.transfer.export_history import export_history

    key = "sk-export-pruned-" + "p" * 24
    storage = await SqliteStorage.open(tmp_path / "pruned.db")
    try:
        async with served_in_process(storage, [key]) as base_url:
            config = ClientConfig.from_env(base_url=base_url, env={"ANTHROPIC_API_KEY": key})
            async with StoreClient(config) as client:
                whole = await client.create_store("whole")
                a = await client.create_memory(whole.id, "/a", "1")
                await client.update_memory(whole.id, a.id, content="2")
                report = await export_history(client, whole, tmp_path / "whole")
                assert report.begun_before_history == 0

                pruned = await client.create_store("pruned")
                for name in ("/p", "/q"):
                    memory = await client.create_memory(pruned.id, name, "old")
                    await client.update_memory(pruned.id, memory.id, content="new")
                await client.create_memory(pruned.id, "/r", "only")  # its creation is its newest
                assert await storage.prune_versions(utc_now() + timedelta(seconds=1)) >= 2
                report = await export_history(client, pruned, tmp_path / "pruned")
                assert report.begun_before_history == 2
    finally:
        await storage.aclose()
