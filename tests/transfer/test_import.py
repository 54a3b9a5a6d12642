"""``memfs import DIR STORE`` as a user runs it, on the real server: creates, updates, skips,
deletes only when asked, changes nothing in a dry run, and makes no write the second time."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import httpx
import pytest

from kit.servers import ServerProcess

from .importing import (
    contents,
    create_store,
    headers,
    memfs_import,
    requests,
    write_tree,
    writes,
)

LISTING = ("GET", "/v1/memory_stores/{store_id}/memories")

TREE = {
    "notes/a.md": "# A\n",
    "notes/deep/b.md": "b",
    "todo.txt": "- [ ] write things down\n",
    "empty.md": "",
    "é/unicode ü.md": "ünïcödé",
}


def _store_and_tree(server: ServerProcess, tmp_path: Path) -> tuple[str, Path, dict[str, str]]:
    """A new store, ``TREE`` written below ``tmp_path``, the environment of a client."""
    tree = tmp_path / "tree"
    write_tree(tree, TREE)
    return create_store(server, f"import-{uuid.uuid4().hex[:8]}"), tree, server.client_env()


def test_import_into_an_empty_store_then_again_then_after_edits(
    server: ServerProcess, tmp_path: Path
) -> None:
    store, tree, env = _store_and_tree(server, tmp_path)
    first = memfs_import(env, tree, store, secrets=(server.api_key,))
    assert first.status == 0, first
    assert sorted(first.paths("create")) == sorted("/" + p for p in TREE)
    assert first.summary.startswith("memfs import: 5 created, 0 updated, 0 deleted; 0 unchanged")
    assert contents(server, store) == {"/" + p: c for p, c in TREE.items()}

    # the second run of an unchanged tree: one listing page, no write
    before = requests(server)
    second = memfs_import(env, tree, store)
    after = requests(server)
    assert second.status == 0 and second.lines == [], second
    assert "5 unchanged" in second.summary
    assert writes(before, after) == 0
    assert after[LISTING] - before[LISTING] == 1

    # edits: only those are written, each once
    (tree / "notes/a.md").write_text("# A, edited\n")
    (tree / "new.md").write_text("new")
    before = requests(server)
    third = memfs_import(env, tree, store)
    after = requests(server)
    assert third.status == 0, third
    assert third.lines == [("create", "/new.md"), ("update", "/notes/a.md")]
    assert writes(before, after) == 2
    assert contents(server, store)["/notes/a.md"] == "# A, edited\n"


def test_delete_only_when_asked_and_dry_run_changes_nothing(
    server: ServerProcess, tmp_path: Path
) -> None:
    store, tree, env = _store_and_tree(server, tmp_path)
    assert memfs_import(env, tree, store).status == 0
    (tree / "todo.txt").unlink()
    (tree / "notes/deep/b.md").write_text("b2")
    (tree / "added.md").write_text("added")
    stored = contents(server, store)

    plain = memfs_import(env, tree, store, "--dry-run")  # without --delete: kept
    assert plain.paths("delete") == [] and "/todo.txt" not in plain.paths("skip")

    before = requests(server)
    dry = memfs_import(env, tree, store, "--delete", "--dry-run")
    after = requests(server)
    assert dry.status == 0, dry
    assert dry.lines == [
        ("create", "/added.md"),
        ("skip", "/empty.md"),
        ("skip", "/notes/a.md"),
        ("update", "/notes/deep/b.md"),
        ("delete", "/todo.txt"),
        ("skip", "/é/unicode ü.md"),
    ]
    assert dry.summary.endswith("nothing changed")
    assert "would create 1, update 1, delete 1; 3 unchanged" in dry.summary
    assert writes(before, after) == 0
    assert contents(server, store) == stored

    done = memfs_import(env, tree, store, "--delete")
    assert done.status == 0, done
    assert done.lines == [
        ("create", "/added.md"),
        ("update", "/notes/deep/b.md"),
        ("delete", "/todo.txt"),
    ]
    final = contents(server, store)
    assert "/todo.txt" not in final and final["/added.md"] == "added"
    assert final["/notes/deep/b.md"] == "b2"


def test_what_cannot_be_a_memory_is_listed_and_the_rest_uploaded(
    server: ServerProcess, tmp_path: Path
) -> None:
    store = create_store(server, f"import-{uuid.uuid4().hex[:8]}")
    tree = tmp_path / "tree"
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the store")
    long_dir = "/".join(["d" * 205] * 5)  # 1,029 bytes: with the name, over 1,024
    write_tree(
        tree,
        {
            "good.md": "good",
            "sub/fine.txt": "fine",
            "binary.bin": b"\x89PNG\r\n\x1a\n\x00\xff",
            "big.txt": "x" * 102_401,
            "just-fits.txt": "y" * 102_400,
            "nul.txt": "a\x00b",  # a content may hold NUL (Databricks refuses it)
            "bad\x01name.md": "control character",
            f"{long_dir}/over-1024-bytes.md": "too long a path",
            "l/" * 19 + "twenty-segments.md": "deep, and a memory path",
            "l/" * 20 + "twenty-one.md": "deeper than any memory path",
            ".git/config": "[core]",  # a repository: never read
            "sub/.git/HEAD": "ref",
            ".memfs/store.json": "{}",  # memfs's own
        },
    )
    (tree / "link.md").symlink_to(secret)
    (tree / "linked-dir").symlink_to(tmp_path)
    os.mkfifo(tree / "fifo")
    os.close(os.open(bytes(tree) + b"/latin1-\xe9.md", os.O_CREAT | os.O_WRONLY, 0o644))

    run = memfs_import(server.client_env(), tree, store)
    assert run.status == 1, run
    deep = "/l" * 19 + "/twenty-segments.md"
    imported = sorted([deep, "/good.md", "/just-fits.txt", "/nul.txt", "/sub/fine.txt"])
    assert sorted(run.paths("create")) == imported
    assert run.reason("/binary.bin") == "not UTF-8 text"
    assert run.reason("/big.txt") == "102401 bytes, over the store's limit of 102400"
    assert "control or format character U+0001" in run.reason("/bad\\x01name.md")
    assert "longer than 1024 bytes" in run.reason(f"/{long_dir}/over-1024-bytes.md")
    assert run.reason("/link.md") == "a symbolic link (not followed)"
    assert run.reason("/linked-dir") == "a symbolic link (not followed)"
    assert run.reason("/fifo") == "not a regular file"
    assert run.reason("/latin1-\\udce9.md") == "the file name is not UTF-8"
    assert run.reason("/l" * 20) == "a directory 20 levels deep: no memory path is deeper"
    assert "9 refused, 0 failed" in run.summary
    stored = contents(server, store)
    assert sorted(stored) == imported
    assert stored["/nul.txt"] == "a\x00b"
    assert "not for the store" not in stored.values()


def test_usage_errors_are_one_line(server: ServerProcess, tmp_path: Path) -> None:
    env = server.client_env()
    store = create_store(server, f"import-{uuid.uuid4().hex[:8]}")
    missing = memfs_import(env, tmp_path / "nope", store)
    assert missing.status == 2 and missing.summary.startswith("memfs: ")
    (tmp_path / "t").mkdir()
    unknown = memfs_import(env, tmp_path / "t", "no such store")
    assert unknown.status == 3, unknown
    actor = memfs_import(env, tmp_path / "t", store, "--actor", "a")
    assert actor.status == 2 and "--actor needs --api databricks" in actor.summary


@pytest.mark.slow  # 2,000 creates: about 6 s on 2 idle cores
def test_past_2000_memories_the_first_paths_get_in_and_the_others_are_listed(
    server: ServerProcess, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    write_tree(tree, {f"d{n % 7}/{n:04d}.md": str(n) for n in range(2003)})
    store = create_store(server, f"import-{uuid.uuid4().hex[:8]}")
    run = memfs_import(server.client_env(), tree, store)
    assert run.status == 1, run.summary
    in_order = sorted(f"/d{n % 7}/{n:04d}.md" for n in range(2003))
    assert run.paths("refuse") == in_order[-3:]
    assert {run.reason(p) for p in in_order[-3:]} == {"the store is full (2000 memories at most)"}
    assert run.summary.startswith("memfs import: 2000 created, 0 updated")
    assert sorted(contents(server, store)) == in_order[:2000]


def test_an_archived_store_stops_the_import_with_one_line(
    server: ServerProcess, tmp_path: Path
) -> None:
    store, tree, env = _store_and_tree(server, tmp_path)
    with httpx.Client(base_url=server.base_url, headers=headers(server)) as http:
        answer = http.post(f"/v1/memory_stores/{store}/archive")
        assert answer.status_code == 200, answer.text
    run = memfs_import(env, tree, store)
    assert run.status == 1, run
    assert run.stderr.startswith("memfs: ") and run.stderr.count("\n") == 1, run.stderr
    assert "archived" in run.stderr
    assert "0 created" in run.summary and "5 not attempted" in run.summary
    assert contents(server, store) == {}
