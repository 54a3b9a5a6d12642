"""The ``agentbricks memory`` CLI (databricks-agentbricks), unchanged, as a subprocess.

The token travels in its environment (``DATABRICKS_HOST``/``DATABRICKS_TOKEN``), never argv;
its home and config file are empty temp paths and its telemetry is off. ``-o json`` prints the
API's answers, and errors as ``{"error": {"message", "code"}}`` on stderr with exit code 1.
Each run costs ~1.5 s of start-up (the SDK's import), so the 17 runs of a backend start together
(``cli``, once per server), each on stores and entries of its own made through the SDK
beforehand, and each test checks the answers of its part: the store commands
(create/get/list/update/delete), the entry commands (create/get/list/search/update/delete), and
every error code the CLI shows (ALREADY_EXISTS of a store and of an entry, NOT_FOUND of a store
and of an entry, UNAUTHENTICATED for a wrong token, INVALID_PARAMETER_VALUE).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from databricks.sdk import WorkspaceClient
from databricks.sdk.errors import NotFound
from databricks.sdk.service.agentkit import ManagedMemoryEntry, ManagedMemoryStore

from kit.servers import ServerProcess

from .helpers import new_store_id

# the first test of a backend waits for its 17 runs: ~15 s on 2 idle cores, more under load
pytestmark = pytest.mark.slow

AGENTBRICKS = str(Path(sys.executable).parent / "agentbricks")
WRONG_TOKEN = "not-the-token"


class Runs:
    """CLI runs started together, answered one by one (by name) in the tests that check them.

    Args:
        env: the CLI's environment (the server's URL and token).
        ids: the stores the runs act on, by role (deleted at the end).
        entries: the entries made through the SDK for them, by role.
    """

    def __init__(self, env: dict[str, str], ids: dict[str, str]) -> None:
        self.env = env
        self.ids = ids
        self.entries: dict[str, ManagedMemoryEntry] = {}
        self._started: dict[str, tuple[subprocess.Popen[str], str]] = {}

    def start(self, name: str, *args: str, token: str | None = None) -> None:
        """``agentbricks -o json memory ARGS`` started (with another token if given)."""
        env = self.env if token is None else {**self.env, "DATABRICKS_TOKEN": token}
        run = subprocess.Popen(
            [AGENTBRICKS, "-o", "json", "memory", *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._started[name] = (run, env["DATABRICKS_TOKEN"])

    def answer(self, name: str, *, ok: bool = True) -> Any:
        """The run's JSON answer, or its JSON error (exit code 1) when not ok."""
        run, token = self._started.pop(name)
        stdout, stderr = run.communicate(timeout=60)
        assert token not in stdout + stderr
        if ok:
            assert run.returncode == 0, stderr
            return json.loads(stdout)
        assert run.returncode == 1, (stdout, stderr)
        # stderr also has databricks-sdk's warning about the (404) host metadata probe.
        return json.loads(stderr[stderr.index("{\n") :])["error"]

    def stop(self) -> None:
        """End the runs no test asked for (a test failed before it did)."""
        for run, _ in self._started.values():
            run.kill()
            run.communicate()


def entry_id(entry: ManagedMemoryEntry) -> str:
    assert entry.name is not None
    return entry.name.rsplit("/", 1)[1]


@pytest.fixture(scope="module")
def cli(
    dbx_server: ServerProcess, workspace: WorkspaceClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Runs]:
    """Every run of this module on ``dbx_server``, started at once on what the SDK made."""
    home = tmp_path_factory.mktemp("cli-home")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DATABRICKS_")}
    env.update(
        HOME=str(home),
        DATABRICKS_CONFIG_FILE=str(home / "no-databrickscfg"),
        DATABRICKS_HOST=dbx_server.base_url,
        DATABRICKS_TOKEN=dbx_server.api_key,
        AGENTBRICKS_DISABLE_TELEMETRY="1",
        NO_COLOR="1",
    )
    roles = ("created", "shown", "changed", "removed", "entries", "errors")
    runs = Runs(env, {role: new_store_id() for role in roles})
    ids, ak = runs.ids, workspace.agent_kit
    try:
        for role, description in (("shown", "kept"), ("changed", "one"), ("removed", None)):
            ak.create_memory_store(ManagedMemoryStore(description=description), ids[role])
        for role in ("entries", "errors"):
            ak.create_memory_store(ManagedMemoryStore(), ids[role])
        for role, fields in (
            ("shown", {"path": "/notes/x.md", "content": "remember the milk"}),
            ("changed", {"path": "/todo/c.md", "content": "bread", "description": "errands"}),
            ("removed", {"path": "/todo/d.md", "content": "soon gone"}),
        ):
            runs.entries[role] = ak.create_memory(
                f"memory-stores/{ids['entries']}", ManagedMemoryEntry(actor_id="a", **fields)
            )
        runs.entries["taken"] = ak.create_memory(
            f"memory-stores/{ids['errors']}", ManagedMemoryEntry(actor_id="a", path="/notes/x.md")
        )
        _start_every_run(runs)
        yield runs
    finally:
        runs.stop()
        for store_id in ids.values():
            with contextlib.suppress(NotFound):
                ak.delete_memory_store(f"memory-stores/{store_id}")


def _start_every_run(runs: Runs) -> None:
    ids, entries, start = runs.ids, runs.entries, runs.start
    start(
        "store create", "stores", "create", "--display-name", ids["created"], "--description", "one"
    )
    start("store get", "stores", "get", ids["shown"])
    start("store list", "stores", "list", "--name", ids["shown"])
    start("store update", "stores", "update", ids["changed"], "--description", "two")
    start("store delete", "stores", "delete", ids["removed"], "--yes")
    common = ["--store", ids["entries"]]
    start(
        "entry create", "entries", "create", *common, "--actor-id", "a", "--path", "/made/y.md",
        "--content", "new", "--description", "made", "--source-type", "agent",
    )  # fmt: skip
    start("entry get", "entries", "get", *common, entry_id(entries["shown"]))
    start("entry list", "entries", "list", *common, "--actor-id", "a", "--path-prefix", "/n")
    start("entry search", "entries", "search", *common, "--actor-id", "a", "--query", "milk")
    changed, removed = entry_id(entries["changed"]), entry_id(entries["removed"])
    start("entry update", "entries", "update", *common, changed, "--content", "eggs")
    start("entry delete", "entries", "delete", *common, removed, "--yes")
    taken = ["--store", ids["errors"]]
    start("store exists", "stores", "create", "--display-name", ids["errors"])
    start("invalid id", "stores", "create", "--display-name", "AB")
    start("wrong token", "stores", "get", ids["errors"], token=WRONG_TOKEN)
    start("entry exists", "entries", "create", *taken, "--actor-id", "a", "--path", "/notes/x.md")
    start("no entry", "entries", "get", *taken, "no-such-entry")
    start("no store", "entries", "get", "--store", "absent-store", entry_id(entries["taken"]))


def test_store_commands(cli: Runs, workspace: WorkspaceClient) -> None:
    """create, get, list, update and delete, each on a store of its own."""
    ids = cli.ids
    created = cli.answer("store create")
    assert (created["name"], created["description"]) == (f"memory-stores/{ids['created']}", "one")
    got = cli.answer("store get")
    assert (got["name"], got["description"]) == (f"memory-stores/{ids['shown']}", "kept")
    listed = cli.answer("store list")["managed_memory_stores"]
    assert [s["name"] for s in listed] == [f"memory-stores/{ids['shown']}"]
    assert cli.answer("store update")["description"] == "two"
    assert cli.answer("store delete") == {"deleted": ids["removed"]}

    ak = workspace.agent_kit
    assert ak.get_memory_store(f"memory-stores/{ids['created']}").description == "one"
    assert ak.get_memory_store(f"memory-stores/{ids['changed']}").description == "two"
    with pytest.raises(NotFound):
        ak.get_memory_store(f"memory-stores/{ids['removed']}")


def test_entry_commands(cli: Runs, workspace: WorkspaceClient) -> None:
    """create (with every field), get, list, search, update and delete, each on an entry of its
    own."""
    shown, removed = cli.entries["shown"], cli.entries["removed"]
    created = cli.answer("entry create")
    assert (created["path"], created["content"], created["description"]) == (
        "/made/y.md",
        "new",
        "made",
    )
    assert workspace.agent_kit.get_memory(created["name"]).content == "new"
    got = cli.answer("entry get")
    assert (got["name"], got["path"], got["content"]) == (
        shown.name,
        "/notes/x.md",
        "remember the milk",
    )
    listed = cli.answer("entry list")["managed_memory_entries"]
    assert [e["name"] for e in listed] == [shown.name]
    found = cli.answer("entry search")["results"]
    assert [r["managed_memory_entry"]["name"] for r in found] == [shown.name]
    updated = cli.answer("entry update")
    assert (updated["content"], updated["description"]) == ("eggs", "errands")
    assert cli.answer("entry delete") == {"deleted": entry_id(removed)}
    with pytest.raises(NotFound):
        workspace.agent_kit.get_memory(removed.name)


def test_every_error_code(cli: Runs) -> None:
    """ALREADY_EXISTS (a store, an entry), INVALID_PARAMETER_VALUE, UNAUTHENTICATED, NOT_FOUND
    (an entry, a store), each as the CLI shows it."""
    assert cli.answer("store exists", ok=False)["code"] == "ALREADY_EXISTS"
    error = cli.answer("invalid id", ok=False)
    assert error["code"] == "INVALID_PARAMETER_VALUE"
    assert "managed_memory_store_id" in error["message"]
    assert cli.answer("wrong token", ok=False)["code"] == "UNAUTHENTICATED"
    assert cli.answer("entry exists", ok=False)["code"] == "ALREADY_EXISTS"
    error = cli.answer("no entry", ok=False)
    assert error["code"] == "NOT_FOUND" and "no-such-entry" in error["message"]
    error = cli.answer("no store", ok=False)
    assert error["code"] == "NOT_FOUND" and "absent-store" in error["message"]
