"""``memfs server`` start-up: ordinary failures are one line and an exit code, never a traceback;
the "listening" log line comes only once the port accepts connections."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kit.servers import free_port
from memfs.commands.server import EXIT_FAILED
from memfs.server.serve import console_urls

KEY = "sk-startup-" + "s" * 24


def run_server(args: list[str]) -> tuple[int, str]:
    """Run ``memfs server`` expecting it to fail at start-up: (exit code, stderr)."""
    env = dict(os.environ, MEMFS_API_KEYS=KEY)
    proc = subprocess.run(
        [sys.executable, "-m", "memfs", "server", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.stdout == ""
    return proc.returncode, proc.stderr


def assert_one_line(stderr: str, expected: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert stderr.count("\n") == 1 and stderr.endswith("\n"), stderr
    assert stderr.startswith("memfs server: "), stderr
    assert expected in stderr, stderr


def test_busy_port_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, err = run_server(["--db", str(tmp_path / "m.db"), "--port", str(port)])
    assert code == EXIT_FAILED
    assert_one_line(err, f"memfs server: cannot listen on 127.0.0.1:{port}: address already in use")
    assert not (tmp_path / "m.db").exists()  # the port is checked before the database is touched


def test_address_not_on_this_machine_is_one_line(tmp_path: Path) -> None:
    # 192.0.2.1 is TEST-NET-1: never a local address, and no DNS lookup is needed.
    code, err = run_server(
        ["--db", str(tmp_path / "m.db"), "--host", "192.0.2.1", "--port", "8700"]
    )
    assert code == EXIT_FAILED
    assert_one_line(err, "cannot listen on 192.0.2.1:8700: cannot assign requested address")


def test_missing_database_directory_is_one_line(tmp_path: Path) -> None:
    db = tmp_path / "no-such-dir" / "m.db"
    code, err = run_server(["--db", str(db), "--port", str(free_port())])
    assert code == EXIT_FAILED
    assert_one_line(err, f"cannot open SQLite database {db}: ")
    assert f"directory {db.parent} does not exist" in err


def test_file_that_is_not_a_database_is_one_line(tmp_path: Path) -> None:
    db = tmp_path / "notes.txt"
    db.write_text("not sqlite\n" * 200)
    code, err = run_server(["--db", str(db), "--port", str(free_port())])
    assert code == EXIT_FAILED
    assert_one_line(err, f"cannot open SQLite database {db}: file is not a database")


def test_unreachable_postgres_is_one_line_without_the_password() -> None:
    pytest.importorskip("psycopg")
    url = f"postgresql://memfs:pw-s3cret-xyz@127.0.0.1:{free_port()}/memfs"
    code, err = run_server(["--db", url, "--port", str(free_port())])
    assert code == EXIT_FAILED
    assert_one_line(err, "cannot open PostgreSQL database postgresql://memfs:***@127.0.0.1:")
    assert "pw-s3cret-xyz" not in err


def test_listening_is_logged_once_the_port_accepts(tmp_path: Path) -> None:
    port = free_port()
    env = dict(os.environ, MEMFS_API_KEYS=KEY)
    argv = [sys.executable, "-m", "memfs", "server", "--db", str(tmp_path / "m.db")]
    proc = subprocess.Popen(
        [*argv, "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            if "memfs server listening on" in line:
                # No retry: the line promises the port is already accepting connections.
                with socket.create_connection(("127.0.0.1", port), timeout=5):
                    pass
                break
        else:
            pytest.fail("no 'listening' line within 20 s")
    finally:
        proc.terminate()
        # read() keeps what readline() buffered already (communicate with a timeout reads the
        # pipe itself, past that buffer); SIGTERM ends the server, so the pipe ends too
        rest = proc.stderr.read()
        proc.wait(timeout=10)
    text = "".join(lines) + rest
    assert f"memfs server listening on http://127.0.0.1:{port}" in text, text
    assert text.count("memfs server listening on") == 1
    # and where a person opens the console
    assert f"memfs console at http://127.0.0.1:{port}/console/ (sign in" in text, text
    assert proc.returncode == 0, text


def test_the_console_url_names_an_address_a_browser_can_open() -> None:
    binds = ["http://0.0.0.0:8700", "http://[::]:8700", "http://[::1]:8701"]
    assert console_urls(binds) == ["http://localhost:8700/console/", "http://[::1]:8701/console/"]
