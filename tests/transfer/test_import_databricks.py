"""``memfs import --api databricks``: an actor's entries from a tree, with the descriptions of
``.memfs/descriptions.json``; and a Databricks tree into a Memory Stores store (its
descriptions noted, not lost silently)."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from kit.databricks import ACTOR, Workspace, databricks_env
from kit.servers import ServerProcess
from memfs.transfer.import_walk import MAX_DESCRIPTIONS_BYTES

from .importing import contents, create_store, memfs_import, requests, write_tree, writes

TREE = {
    "notes/dana.md": "Dana prefers email.\n",
    "notes/plain.md": "no description",
    "todo.md": "- call Dana\n",
}
DESCRIPTIONS = {"/notes/dana.md": "how to reach Dana", "/todo.md": "open tasks"}


def _tree(root: Path, descriptions: dict[str, str]) -> Path:
    write_tree(root, TREE)
    (root / ".memfs").mkdir(exist_ok=True)
    (root / ".memfs/descriptions.json").write_text(json.dumps(descriptions))
    return root


def test_descriptions_are_created_updated_and_a_second_run_writes_nothing(
    server: ServerProcess, tmp_path: Path
) -> None:
    env = databricks_env(server, tmp_path)
    tree = _tree(tmp_path / "tree", DESCRIPTIONS)
    with Workspace(server) as workspace:
        store = workspace.create_store()
        workspace.put(store, "/notes/plain.md", "old", description="stale description")
        workspace.put(store, "/todo.md", "- call Dana\n", session="s1")  # another session's
        args = (tree, store, "--api", "databricks", "--actor", ACTOR)

        first = memfs_import(env, *args, secrets=(server.api_key,))
        assert first.status == 0, first
        assert first.lines == [
            ("create", "/notes/dana.md"),
            ("update", "/notes/plain.md"),
            ("create", "/todo.md"),
        ]
        entries = workspace.entries(store)
        mine = {path: e for (session, path), e in entries.items() if session is None}
        assert {p: e["content"] for p, e in mine.items()} == {"/" + p: c for p, c in TREE.items()}
        assert {p: e.get("description", "") for p, e in mine.items()} == {
            "/notes/dana.md": "how to reach Dana",
            "/notes/plain.md": "",  # the tree says it has none
            "/todo.md": "open tasks",
        }
        assert entries[("s1", "/todo.md")].get("description", "") == ""  # untouched

        before = requests(server)
        again = memfs_import(env, *args)
        assert again.status == 0 and again.lines == [], again
        assert writes(before, requests(server)) == 0

        # a description changed alone is an update
        (tree / ".memfs/descriptions.json").write_text(
            json.dumps({**DESCRIPTIONS, "/todo.md": "tasks still open"})
        )
        before = requests(server)
        third = memfs_import(env, *args)
        assert third.lines == [("update", "/todo.md")], third
        assert writes(before, requests(server)) == 1
        entry = workspace.entries(store)[(None, "/todo.md")]
        assert entry["description"] == "tasks still open"
        assert entry["content"] == TREE["todo.md"]


def test_a_databricks_tree_into_memory_stores_notes_the_descriptions(
    server: ServerProcess, tmp_path: Path
) -> None:
    tree = _tree(tmp_path / "tree", DESCRIPTIONS)
    store = create_store(server, f"from-databricks-{uuid.uuid4().hex[:8]}")
    run = memfs_import(server.client_env(), tree, store)
    assert run.status == 0, run
    assert run.stderr == (
        "memfs import: 2 description(s) of .memfs/descriptions.json not imported: this "
        "store's memories have no descriptions\n"
    )
    assert contents(server, store) == {"/" + p: c for p, c in TREE.items()}


def test_a_description_the_store_refuses_refuses_its_file(
    server: ServerProcess, tmp_path: Path
) -> None:
    tree = _tree(tmp_path / "tree", {**DESCRIPTIONS, "/todo.md": "x" * 4097})
    with Workspace(server) as workspace:
        store = workspace.create_store()
        run = memfs_import(
            databricks_env(server, tmp_path), tree, store, "--api", "databricks", "--actor", ACTOR
        )
        assert run.status == 1, run
        assert run.reason("/todo.md") == (
            "its description is 4097 bytes, over the store's limit of 4096"
        )
        assert sorted(path for _, path in workspace.entries(store)) == [
            "/notes/dana.md",
            "/notes/plain.md",
        ]


def test_a_session_gets_its_own_entries_and_the_session_less_ones_stay(
    server: ServerProcess, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    write_tree(tree, {"todo.md": "the session's"})
    with Workspace(server) as workspace:
        store = workspace.create_store()
        workspace.put(store, "/todo.md", "the actor's")
        args = (tree, store, "--api", "databricks", "--actor", ACTOR, "--session", "s2")
        run = memfs_import(databricks_env(server, tmp_path), *args, "--delete")
        assert run.lines == [("create", "/todo.md")], run
        entries = workspace.entries(store)
        assert entries[("s2", "/todo.md")]["content"] == "the session's"
        assert entries[(None, "/todo.md")]["content"] == "the actor's"


def test_malformed_descriptions_are_one_line_each_and_the_rest_imports(
    server: ServerProcess, tmp_path: Path
) -> None:
    """A bad entry of ``.memfs/descriptions.json`` (a lone surrogate, a value that is not
    text, a key that is no memory path) refuses that entry, and its file, alone; a file nested
    too deep or larger than any store's descriptions is refused whole, unread when by its size,
    and the memories import without descriptions. One ``refuse`` line each, never a
    traceback."""
    env = databricks_env(server, tmp_path)
    nested = b'{"/todo.md": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    cases = {
        "entries": b'{"/notes/dana.md": "\\ud800", "/todo.md": [[1]], "../x": "d", '
        b'"/notes/plain.md": "plain"}',
        "nested": nested,
        "huge": None,  # a sparse file one byte over the cap
    }
    with Workspace(server) as workspace:
        for name, data in cases.items():
            tree = tmp_path / name
            write_tree(tree, TREE)
            (tree / ".memfs").mkdir()
            descriptions = tree / ".memfs/descriptions.json"
            if data is None:
                descriptions.touch()
                os.truncate(descriptions, MAX_DESCRIPTIONS_BYTES + 1)
            else:
                descriptions.write_bytes(data)
            store = workspace.create_store()
            run = memfs_import(env, tree, store, "--api", "databricks", "--actor", ACTOR)
            assert run.status == 1, run
            mine = {path: e for (_, path), e in workspace.entries(store).items()}
            if name == "entries":
                assert run.lines == [
                    ("refuse", "/.memfs/descriptions.json",
                     "the entry '../x': not a memory path (path must start with '/')"),
                    ("refuse", "/notes/dana.md",
                     "its description in descriptions.json is not valid UTF-8 text"),
                    ("create", "/notes/plain.md"),
                    ("refuse", "/todo.md", "its description in descriptions.json is not text"),
                ], run  # fmt: skip
                assert {p: e.get("description", "") for p, e in mine.items()} == {
                    "/notes/plain.md": "plain"
                }
                continue
            reason = {
                "nested": "descriptions.json: not a JSON object of texts (a value nested "
                "deeper than 32 at byte 45)",
                "huge": f"larger than any store's descriptions ({MAX_DESCRIPTIONS_BYTES} bytes)",
            }[name]
            assert run.lines == [
                ("refuse", "/.memfs/descriptions.json", reason),
                ("create", "/notes/dana.md"),
                ("create", "/notes/plain.md"),
                ("create", "/todo.md"),
            ], run
            assert sorted(mine) == ["/notes/dana.md", "/notes/plain.md", "/todo.md"]
            assert all(not e.get("description") for e in mine.values())
