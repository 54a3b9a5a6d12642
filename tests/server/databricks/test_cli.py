"""The ``agentbricks memory`` CLI (databricks-agentbricks), unchanged, as a subprocess.

The token travels in its environment (``DATABRICKS_HOST``/``DATABRICKS_TOKEN``), never argv;
its home and config file are empty temp paths and its telemetry is off. ``-o json`` prints the
API's answers, and errors as ``{"error": {"message", "code"}}`` on stderr with exit code 1.
Each run costs ~1.5 s of start-up (the SDK's import), so the scenarios are few and long: the
whole one on SQLite, and on PostgreSQL only the runs whose answers the backend decides (an
exclusive create, a search); the SDK and AgentKit tests drive every rule on both backends.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.servers import ServerProcess

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


def run(env: dict[str, str], *args: str, ok: bool = True) -> Any:
    """``agentbricks -o json memory ARGS``: its JSON answer, or its JSON error when not ok."""
    done = subprocess.run(
        [AGENTBRICKS, "-o", "json", "memory", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert env["DATABRICKS_TOKEN"] not in done.stdout + done.stderr
    if ok:
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)
    assert done.returncode == 1, (done.stdout, done.stderr)
    # stderr also has databricks-sdk's warning about the (404) host metadata probe.
    return json.loads(done.stderr[done.stderr.index("{\n") :])["error"]


@pytest.mark.parametrize("dbx_server", ["sqlite"], indirect=True)
def test_stores_and_entries(cli_env: dict[str, str]) -> None:
    store_id = new_store_id()
    made = run(cli_env, "stores", "create", "--display-name", store_id, "--description", "one")
    assert made["name"] == f"memory-stores/{store_id}" and made["description"] == "one"
    error = run(cli_env, "stores", "create", "--display-name", store_id, ok=False)
    assert error["code"] == "ALREADY_EXISTS"
    updated = run(cli_env, "stores", "update", store_id, "--description", "two")
    assert updated["description"] == "two"

    common = ["--store", store_id]
    made = run(
        cli_env, "entries", "create", *common, "--actor-id", "a", "--path", "/notes/x.md",
        "--content", "remember the milk", "--description", "errands", "--source-type", "agent",
    )  # fmt: skip
    entry_id = made["name"].rsplit("/", 1)[1]
    duplicate = run(
        cli_env, "entries", "create", *common, "--actor-id", "a", "--path", "/notes/x.md",
        ok=False,
    )  # fmt: skip
    assert duplicate["code"] == "ALREADY_EXISTS"
    listed = run(cli_env, "entries", "list", *common, "--actor-id", "a", "--path-prefix", "/n")
    assert [e["name"] for e in listed["managed_memory_entries"]] == [made["name"]]
    found = run(cli_env, "entries", "search", *common, "--actor-id", "a", "--query", "milk")
    assert [r["managed_memory_entry"]["name"] for r in found["results"]] == [made["name"]]
    updated = run(cli_env, "entries", "update", *common, entry_id, "--content", "eggs")
    assert updated["content"] == "eggs" and updated["description"] == "errands"
    assert run(cli_env, "entries", "delete", *common, entry_id, "--yes") == {"deleted": entry_id}
    assert run(cli_env, "stores", "delete", store_id, "--yes") == {"deleted": store_id}


@pytest.mark.parametrize("dbx_server", ["postgres"], indirect=True)
def test_create_and_search_on_postgres(cli_env: dict[str, str], store: str) -> None:
    common = ["--store", store.removeprefix("memory-stores/"), "--actor-id", "a"]
    made = run(cli_env, "entries", "create", *common, "--path", "/x.md", "--content", "kiwi")
    duplicate = run(cli_env, "entries", "create", *common, "--path", "/x.md", ok=False)
    assert duplicate["code"] == "ALREADY_EXISTS"
    found = run(cli_env, "entries", "search", *common, "--query", "kiwi")
    assert [r["managed_memory_entry"]["name"] for r in found["results"]] == [made["name"]]
