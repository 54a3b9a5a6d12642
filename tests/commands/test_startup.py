"""``memfs --version``, ``--help`` and usage errors load nothing a command runs on.

Not a timing test (``python -m bench cli`` measures the time): a real ``memfs`` process runs
``main`` and reports which modules it imported. Whatever answers without talking to a store or
a mount must not import trio, httpx, FUSE, the server stack, nor memfs below the commands.
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

HEAVY = (
    "trio",
    "httpx",
    "pyfuse3",
    "cachetools",
    "starlette",
    "hypercorn",
    "jinja2",
    "psycopg",
    "shtab",
    "memfs.api",
    "memfs.core",
    "memfs.mount",
    "memfs.server",
    "memfs.session",
    "memfs.versions",
    "memfs.writeback",
    "memfs.mcp",
    "mcp",
)

# Runs main(argv), then prints, as the last line of stdout, its exit status and the heavy
# modules it imported.
RUN_AND_REPORT = """
import json, sys
from memfs.cli import main
heavy = tuple(sys.argv[1].split(","))
try:
    status = main(sys.argv[2:])
except SystemExit as exc:
    status = exc.code
loaded = sorted(m for m in sys.modules if m in heavy or m.startswith(tuple(h + "." for h in heavy)))
print("\\n" + json.dumps({"status": status, "loaded": loaded}))
"""


def run_report(
    *argv: str, env: dict[str, str] | None = None, heavy: tuple[str, ...] = HEAVY, stdin: str = ""
) -> tuple[dict[str, Any], str, str]:
    """``main(argv)``'s report (status, loaded), its stdout before the report, its stderr."""
    proc = subprocess.run(
        [sys.executable, "-c", RUN_AND_REPORT, ",".join(heavy), *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    *output, report = proc.stdout.splitlines()
    return json.loads(report), "\n".join(output), proc.stderr


def run_main(
    *argv: str, env: dict[str, str] | None = None, heavy: tuple[str, ...] = HEAVY
) -> tuple[int, list[str], str]:
    report, _, stderr = run_report(*argv, env=env, heavy=heavy)
    return report["status"], report["loaded"], stderr


@pytest.mark.parametrize(
    ("argv", "status"),
    [
        (["--version"], 0),
        (["--help"], 0),
        ([], 2),  # no command: the help, as a usage error
        (["no-such-command"], 2),
        (["mount"], 2),  # missing STORE MOUNTPOINT
        (["mount", "store", "/mnt/x", "--grace", "soon"], 2),
        (["mount", "--help"], 0),
        (["umount", "--help"], 0),
        (["status", "--help"], 0),
        (["server", "--help"], 0),
        (["session", "--help"], 0),
        (["session", "stop", "--help"], 0),
        (["stores", "list", "--help"], 0),
        (["memories", "log", "store", "-n", "0"], 2),
        (["completion", "--help"], 0),
        (["mcp", "--help"], 0),
        (["mcp", "store", "--actor", "a"], 2),  # --actor without --api databricks
    ],
)
def test_answers_without_importing_what_commands_run_on(argv: list[str], status: int) -> None:
    got_status, loaded, stderr = run_main(*argv)
    assert got_status == status, stderr
    assert loaded == []


def test_a_command_imports_what_it_needs_when_it_runs() -> None:
    """The check above sees imports: the completion command does load shtab."""
    status, loaded, stderr = run_main("completion", "bash")
    assert status == 0, stderr
    assert loaded == ["shtab"]


def test_a_detached_session_leaves_the_daemon_to_its_own_process(tmp_path: Path) -> None:
    """``memfs session --detach`` checks the config, then hands over to the session's process:
    it never loads the mount daemon, the core or trio, which that process loads anyway."""
    config = tmp_path / "session.json"
    store = {"type": "memory_store", "memory_store_id": "memstore_x", "access": "read_only"}
    config.write_text(json.dumps([store]))
    env = dict(
        os.environ,
        ANTHROPIC_API_KEY="sk-startup-test-" + "s" * 20,
        ANTHROPIC_BASE_URL="http://127.0.0.1:1",  # nothing there: the session refuses
        MEMFS_STATE_DIR=str(tmp_path / "state"),
    )
    argv = ["session", "--config", str(config), "--root", str(tmp_path / "root"), "--detach"]
    heavy = ("trio", "pyfuse3", "memfs.core", "memfs.mount.daemon", "memfs.session.runner")
    status, loaded, stderr = run_main(*argv, env=env, heavy=heavy)
    assert status == 6 and "cannot reach the API at http://127.0.0.1:1" in stderr, stderr
    assert loaded == []


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "startup-test", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def test_memfs_mcp_loads_the_sdk_once_the_store_is_open_and_search_at_a_search(
    server: ServerProcess,
) -> None:
    """``memfs mcp`` opens the store before it imports the SDK (most of its start-up:
    docs/benchmarks.md "MCP server"), so an unknown store is reported without it; and it answers
    initialize (then stdin ends) without the search engine, which only a search needs."""
    env = server.client_env()
    heavy = ("mcp", "memfs.search")
    report, _, stderr = run_report("mcp", "memstore_no_such_store", env=env, heavy=heavy)
    assert report == {"status": 3, "loaded": []}, stderr

    store = subprocess.run(
        [sys.executable, "-m", "memfs", "stores", "create", "startup", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    store_id = json.loads(store.stdout)["id"]
    stdin = json.dumps(INITIALIZE) + "\n" + json.dumps(INITIALIZED) + "\n"
    report, stdout, stderr = run_report("mcp", store_id, env=env, heavy=heavy, stdin=stdin)
    assert report["status"] == 0, stderr
    answer = json.loads(stdout.splitlines()[0])
    assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "memfs", answer
    assert "Memory store startup, read-write." in answer["result"]["instructions"]
    assert "mcp" in report["loaded"]
    assert not [m for m in report["loaded"] if m.startswith("memfs.search")], report["loaded"]
