"""The ``agentbricks memory`` CLI (databricks-agentbricks), unchanged, as a subprocess.

The token travels in its environment (``DATABRICKS_HOST``/``DATABRICKS_TOKEN``), never argv;
its home and config file are empty temp paths and its telemetry is off. ``-o json`` prints the
API's answers, and errors as ``{"error": {"message", "code"}}`` on stderr with exit code 1.
Each run costs ~1.5 s of start-up (the SDK's import), so the whole scenario is one test, run on
each backend: every command (stores create/get/list/update/delete, entries
create/get/list/search/update/delete) and every error code the CLI shows (ALREADY_EXISTS,
NOT_FOUND of a store and of an entry, UNAUTHENTICATED for a wrong token,
INVALID_PARAMETER_VALUE); runs that do not depend on each other start together.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kit.servers import ServerProcess

from .helpers import new_store_id

AGENTBRICKS = str(Path(sys.executable).parent / "agentbricks")


@pytest.fixture(scope="module")
def cli_env(dbx_server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
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
    return env


def start(env: dict[str, str], *args: str, token: str | None = None) -> subprocess.Popen[str]:
    """``agentbricks -o json memory ARGS`` started (with another token if given)."""
    if token is not None:
        env = {**env, "DATABRICKS_TOKEN": token}
    return subprocess.Popen(
        [AGENTBRICKS, "-o", "json", "memory", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def answer(env: dict[str, str], run: subprocess.Popen[str], *, ok: bool = True) -> Any:
    """A started run's JSON answer, or its JSON error (exit code 1) when not ok."""
    stdout, stderr = run.communicate(timeout=60)
    assert env["DATABRICKS_TOKEN"] not in stdout + stderr
    if ok:
        assert run.returncode == 0, stderr
        return json.loads(stdout)
    assert run.returncode == 1, (stdout, stderr)
    # stderr also has databricks-sdk's warning about the (404) host metadata probe.
    return json.loads(stderr[stderr.index("{\n") :])["error"]


def run(env: dict[str, str], *args: str, ok: bool = True) -> Any:
    return answer(env, start(env, *args), ok=ok)


def test_every_command_and_error(cli_env: dict[str, str]) -> None:
    """One scenario per backend, 17 runs; runs that do not depend on each other start together
    (each run is mostly the SDK's import)."""
    store_id = new_store_id()
    store = run(cli_env, "stores", "create", "--display-name", store_id, "--description", "one")
    assert store["name"] == f"memory-stores/{store_id}" and store["description"] == "one"
    common = ["--store", store_id]
    entry = [
        *common, "--actor-id", "a", "--path", "/notes/x.md", "--content", "remember the milk",
        "--description", "errands", "--source-type", "agent",
    ]  # fmt: skip
    exists, invalid, refused, updated, created = [
        start(cli_env, "stores", "create", "--display-name", store_id),
        start(cli_env, "stores", "create", "--display-name", "AB"),
        start(cli_env, "stores", "get", store_id, token="not-the-token"),
        start(cli_env, "stores", "update", store_id, "--description", "two"),
        start(cli_env, "entries", "create", *entry),
    ]
    assert answer(cli_env, exists, ok=False)["code"] == "ALREADY_EXISTS"
    error = answer(cli_env, invalid, ok=False)
    assert error["code"] == "INVALID_PARAMETER_VALUE"
    assert "managed_memory_store_id" in error["message"]
    error = answer({**cli_env, "DATABRICKS_TOKEN": "not-the-token"}, refused, ok=False)
    assert error["code"] == "UNAUTHENTICATED"
    assert answer(cli_env, updated)["description"] == "two"
    made = answer(cli_env, created)
    entry_id = made["name"].rsplit("/", 1)[1]

    got_store, stores, duplicate, got, no_entry, no_store, listed, found = [
        start(cli_env, "stores", "get", store_id),
        start(cli_env, "stores", "list", "--name", store_id),
        start(cli_env, "entries", "create", *common, "--actor-id", "a", "--path", "/notes/x.md"),
        start(cli_env, "entries", "get", *common, entry_id),
        start(cli_env, "entries", "get", *common, "no-such-entry"),
        start(cli_env, "entries", "get", "--store", "absent-store", entry_id),
        start(cli_env, "entries", "list", *common, "--actor-id", "a", "--path-prefix", "/n"),
        start(cli_env, "entries", "search", *common, "--actor-id", "a", "--query", "milk"),
    ]
    got_store = answer(cli_env, got_store)
    assert (got_store["name"], got_store["description"]) == (store["name"], "two")
    stores = answer(cli_env, stores)["managed_memory_stores"]
    assert [s["name"] for s in stores] == [store["name"]]
    assert answer(cli_env, duplicate, ok=False)["code"] == "ALREADY_EXISTS"
    assert answer(cli_env, got) == made
    error = answer(cli_env, no_entry, ok=False)
    assert error["code"] == "NOT_FOUND" and "no-such-entry" in error["message"]
    error = answer(cli_env, no_store, ok=False)
    assert error["code"] == "NOT_FOUND" and "absent-store" in error["message"]
    listed = answer(cli_env, listed)
    assert [e["name"] for e in listed["managed_memory_entries"]] == [made["name"]]
    found = answer(cli_env, found)
    assert [r["managed_memory_entry"]["name"] for r in found["results"]] == [made["name"]]

    updated = run(cli_env, "entries", "update", *common, entry_id, "--content", "eggs")
    assert updated["content"] == "eggs" and updated["description"] == "errands"
    assert run(cli_env, "entries", "delete", *common, entry_id, "--yes") == {"deleted": entry_id}
    assert run(cli_env, "stores", "delete", store_id, "--yes") == {"deleted": store_id}
