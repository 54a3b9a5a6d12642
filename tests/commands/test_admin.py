"""``memfs stores`` / ``memfs memories`` as a user runs them: subprocesses on the real server.

Every run checks that the API key appears in no output. Expected errors must be one line
``memfs: …`` on stderr with the documented exit code, never a traceback.
"""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memfs.contract.models import sha256_hex

EXIT_USAGE, EXIT_NOT_FOUND, EXIT_CONFLICT, EXIT_AUTH, EXIT_UNREACHABLE = 2, 3, 4, 5, 6


class Cli:
    def __init__(self, server: Any) -> None:
        self.server = server
        self.env = server.client_env()

    def run(
        self,
        *args: str,
        input: bytes | None = None,
        env: dict[str, str] | None = None,
        expect: int = 0,
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [sys.executable, "-m", "memfs", *args],
            input=input,
            env=env or self.env,
            capture_output=True,
            timeout=60,
            check=False,
        )
        out = subprocess.CompletedProcess(
            proc.args,
            proc.returncode,
            proc.stdout.decode("utf-8"),
            proc.stderr.decode("utf-8"),
        )
        for key in self.server.keys:
            assert key not in out.stdout and key not in out.stderr
        assert "Traceback" not in out.stderr, out.stderr
        assert out.returncode == expect, (out.returncode, out.stdout, out.stderr)
        if expect != 0 and not out.stderr.startswith("usage:"):  # argparse's own usage errors
            assert out.stderr.startswith("memfs: "), out.stderr
            assert out.stderr.count("\n") == 1, out.stderr  # exactly one line
        return out

    def json(self, *args: str, input: bytes | None = None) -> Any:
        return json.loads(self.run(*args, "--json", input=input).stdout)


@pytest.fixture
def cli(server: Any) -> Cli:
    return Cli(server)


@pytest.fixture
def store_name(cli: Cli) -> str:
    name = f"CLI Store {uuid.uuid4().hex[:8]}"
    cli.run("stores", "create", name)
    return name


def columns(header: str, *names: str) -> list[int]:
    return [header.index(name) for name in names]


def test_store_commands(cli: Cli) -> None:
    name = f"Team Notes {uuid.uuid4().hex[:8]}"
    out = cli.run("stores", "create", name, "--description", "shared notes",
                  "--metadata", "team=a", "owner=b")  # fmt: skip
    assert out.stdout.startswith(f"created store '{name}' (memstore_")
    created = cli.json("stores", "show", name)
    assert created["name"] == name
    assert created["metadata"] == {"team": "a", "owner": "b"}

    shown = cli.run("stores", "show", created["id"]).stdout
    assert f"name         {name}" in shown
    assert "metadata     owner=b" in shown and "metadata     team=a" in shown
    assert "archived     no" in shown

    listing = cli.run("stores", "list").stdout.splitlines()
    header = listing[0]
    assert header.split() == ["ID", "NAME", "CREATED", "DESCRIPTION"]
    row = next(line for line in listing if created["id"] in line)
    name_col, created_col = columns(header, "NAME", "CREATED")
    assert row[name_col:].startswith(name)  # aligned under its header
    assert row[created_col : created_col + 2] == "20"

    updated = cli.json("stores", "update", name, "--name", name + " v2",
                       "--metadata", "team=", "extra=1")  # fmt: skip
    assert updated["name"] == name + " v2"
    assert updated["metadata"] == {"owner": "b", "extra": "1"}

    cli.run("stores", "archive", name + " v2")
    assert created["id"] not in cli.run("stores", "list").stdout
    assert created["id"] in cli.run("stores", "list", "--archived").stdout
    archived = [s for s in cli.json("stores", "list", "--archived") if s["id"] == created["id"]]
    assert archived[0]["archived_at"] is not None

    refused = cli.run("stores", "delete", created["id"], expect=EXIT_USAGE)
    assert "--yes" in refused.stderr
    cli.run("stores", "show", created["id"])  # still there
    out = cli.run("stores", "delete", created["id"], "--yes")
    assert out.stdout.startswith("deleted store")
    cli.run("stores", "show", created["id"], expect=EXIT_NOT_FOUND)


def test_memory_commands(cli: Cli, store_name: str, tmp_path: Path) -> None:
    out = cli.run("memories", "put", store_name, "/notes/todo.md", "-", input=b"- [ ] one\n")
    assert out.stdout.startswith("created /notes/todo.md (10 bytes, sha256 ")
    source = tmp_path / "readme.md"
    source.write_text("héllo\n", encoding="utf-8")
    cli.run("memories", "put", store_name, "/readme.md", str(source))
    cli.run("memories", "put", store_name, "/notes/deep/x.md", input=b"x")

    cat = subprocess.run(
        [sys.executable, "-m", "memfs", "memories", "cat", store_name, "/readme.md"],
        env=cli.env, capture_output=True, check=True,
    )  # fmt: skip
    assert cat.stdout == "héllo\n".encode()

    listing = cli.run("memories", "ls", store_name).stdout.splitlines()
    assert listing[0].split() == ["SIZE", "UPDATED", "ID", "PATH"]
    assert [line.split()[-1] for line in listing[1:]] == ["/notes/", "/readme.md"]
    assert listing[2].split()[0] == str(len("héllo\n".encode()))
    size_end = len("SIZE")
    assert all(line[:size_end].strip() for line in listing)  # right-aligned sizes

    deep = cli.run("memories", "ls", store_name, "/notes", "-r").stdout.splitlines()
    assert [line.split()[-1] for line in deep[1:]] == ["/notes/deep/x.md", "/notes/todo.md"]
    items = cli.json("memories", "ls", store_name, "/notes/")
    assert [(i["type"], i["path"]) for i in items] == [
        ("memory_prefix", "/notes/deep/"),
        ("memory", "/notes/todo.md"),
    ]

    out = cli.run("memories", "put", store_name, "/notes/todo.md", input=b"- [x] one\n")
    assert out.stdout.startswith("updated /notes/todo.md")
    out = cli.run("memories", "put", store_name, "/notes/todo.md", input=b"- [x] one\n")
    assert out.stdout.startswith("unchanged /notes/todo.md")

    moved = cli.json("memories", "mv", store_name, "/notes/todo.md", "/done/todo.md")
    assert moved["path"] == "/done/todo.md"
    cli.run("memories", "cat", store_name, "/notes/todo.md", expect=EXIT_NOT_FOUND)

    log = cli.run("memories", "log", store_name, "/done/todo.md").stdout.splitlines()
    assert log[0].split() == ["TIME", "OPERATION", "ACTOR", "PATH", "SIZE", "ID"]
    assert [line.split()[2] for line in log[1:]] == ["modified", "modified", "created"]
    assert [line.split()[-3] for line in log[1:]] == ["/done/todo.md", "/notes/todo.md",
                                                      "/notes/todo.md"]  # fmt: skip
    assert all(" api " in line for line in log[1:])

    cli.run("memories", "rm", store_name, "/done/todo.md")
    cli.run("memories", "rm", store_name, "/done/todo.md", expect=EXIT_NOT_FOUND)
    history = cli.json("memories", "log", store_name, "/done/todo.md")
    assert history[0]["operation"] == "deleted"
    every = cli.json("memories", "log", store_name)
    assert len(every) == 6  # 3 creates, 1 update (the 2nd put was a no-op), 1 rename, 1 delete
    assert every[0]["operation"] == "deleted"
    assert len(cli.json("memories", "log", store_name, "-n", "2")) == 2


def test_precondition_and_conflict_exit_codes(cli: Cli, store_name: str) -> None:
    cli.run("memories", "put", store_name, "/p.md", input=b"v1")
    wrong = sha256_hex("not v1")
    out = cli.run("memories", "put", store_name, "/p.md", "--if-sha", wrong,
                  input=b"v2", expect=EXIT_CONFLICT)  # fmt: skip
    assert "memory_precondition_failed_error" in out.stderr and "request_id" in out.stderr
    result = cli.json("memories", "put", store_name, "/p.md", "--if-sha", sha256_hex("v1"),
                      input=b"v2")  # fmt: skip
    assert result["action"] == "updated"
    assert result["memory"]["content_sha256"] == sha256_hex("v2")
    cli.run("memories", "put", store_name, "/absent.md", "--if-sha", wrong,
            input=b"x", expect=EXIT_CONFLICT)  # fmt: skip
    cli.run("memories", "put", store_name, "/q.md", input=b"q")
    cli.run("memories", "mv", store_name, "/q.md", "/p.md", expect=EXIT_CONFLICT)
    cli.run("memories", "rm", store_name, "/p.md", "--if-sha", wrong, expect=EXIT_CONFLICT)


def test_usage_errors(cli: Cli, store_name: str, tmp_path: Path) -> None:
    cli.run("memories", "put", store_name, "./dot", input=b"x", expect=EXIT_USAGE)
    cli.run("memories", "cat", store_name, "/a/../b", expect=EXIT_USAGE)
    cli.run("memories", "put", store_name, "/x", "--if-sha", "abc", input=b"x", expect=EXIT_USAGE)
    cli.run("stores", "update", store_name, expect=EXIT_USAGE)
    cli.run("stores", "create", "x", "--metadata", "novalue", expect=EXIT_USAGE)
    out = cli.run("stores", expect=EXIT_USAGE)  # argparse: no action
    assert "usage:" in out.stderr
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("café".encode("latin-1"))
    out = cli.run("memories", "put", store_name, "/bad.md", str(bad), expect=1)
    assert "not UTF-8" in out.stderr
    out = cli.run("memories", "put", store_name, "/x.md", str(tmp_path / "missing"), expect=1)
    assert "cannot read" in out.stderr


def test_not_found_and_ambiguous_stores(cli: Cli) -> None:
    wanted = "no such store " + uuid.uuid4().hex
    out = cli.run("stores", "show", wanted, expect=EXIT_NOT_FOUND)
    said = f"memfs: memory store {wanted!r} not found; `memfs stores list` lists them\n"
    assert out.stderr == said
    cli.run("memories", "ls", "memstore_doesnotexist", expect=EXIT_NOT_FOUND)
    name = f"twin {uuid.uuid4().hex[:8]}"
    cli.run("stores", "create", name)
    cli.run("stores", "create", name)
    out = cli.run("stores", "show", name, expect=1)
    assert "use an id" in out.stderr


def test_an_unknown_store_name_suggests_the_near_ones(cli: Cli) -> None:
    name = f"Team Notes {uuid.uuid4().hex[:8]}"
    cli.run("stores", "create", name)
    for typed in (name[:-1], name.lower()):  # a letter short; another case
        out = cli.run("memories", "ls", typed, expect=EXIT_NOT_FOUND)
        assert out.stderr.startswith(  # the closest first
            f"memfs: memory store {typed!r} not found; did you mean {name!r}"
        )
        assert out.stderr.endswith("? `memfs stores list` lists them\n")


def test_key_sources_and_auth_errors(cli: Cli, store_name: str, tmp_path: Path) -> None:
    env = dict(cli.env)
    del env["ANTHROPIC_API_KEY"]
    out = cli.run("stores", "list", env=env, expect=EXIT_USAGE)
    assert "no API key" in out.stderr

    key_file = tmp_path / "key"
    key_file.write_text(cli.server.api_key + "\n")
    key_file.chmod(0o600)
    listing = cli.run("stores", "list", "--api-key-file", str(key_file), env=env).stdout
    assert store_name in listing

    env["ANTHROPIC_API_KEY"] = "sk-memfs-wrong-" + "w" * 24
    out = cli.run("stores", "list", env=env, expect=EXIT_AUTH)
    assert "sk-memfs-wrong" not in out.stderr
    # the line names where the key came from and the server that refused it
    assert out.stderr.startswith(
        f"memfs: the API key in ANTHROPIC_API_KEY was refused by {cli.server.base_url} "
        "(401 authentication_error"
    ), out.stderr

    key_file.write_text("sk-memfs-wrong-" + "f" * 24 + "\n")
    out = cli.run("stores", "list", "--api-key-file", str(key_file), env=env, expect=EXIT_AUTH)
    assert f"the API key in --api-key-file {key_file} was refused by" in out.stderr


def test_unreachable_server_exit_code(cli: Cli) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        out = cli.run("stores", "list", "--base-url", f"http://127.0.0.1:{port}",
                      expect=EXIT_UNREACHABLE)  # fmt: skip
    assert "cannot reach" in out.stderr


def test_log_limit_must_be_at_least_one(cli: Cli, store_name: str) -> None:
    cli.run("memories", "put", store_name, "/a.md", input=b"1")
    cli.run("memories", "put", store_name, "/a.md", input=b"2")
    for bad in ("0", "-3", "two"):
        out = cli.run("memories", "log", store_name, "-n", bad, expect=EXIT_USAGE)
        assert out.stdout == ""  # not the whole history
        assert "-n/--limit" in out.stderr
    assert (
        "must be at least 1"
        in cli.run("memories", "log", store_name, "-n", "0", expect=EXIT_USAGE).stderr
    )
    assert len(cli.json("memories", "log", store_name, "/a.md", "-n", "1")) == 1


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("not-a-url", "needs a scheme and a host"),
        ("ftp://127.0.0.1:8700", "unsupported scheme 'ftp'"),
        ("http://", "needs a scheme and a host"),
        ("http://127.0.0.1:99999", "invalid port"),
    ],
)
def test_invalid_base_url_is_a_usage_error(cli: Cli, url: str, reason: str) -> None:
    env = dict(cli.env, ANTHROPIC_BASE_URL=url)
    out = cli.run("stores", "list", env=env, expect=EXIT_USAGE)
    assert f"invalid ANTHROPIC_BASE_URL {url!r}: " in out.stderr
    assert reason in out.stderr
    assert "cannot reach" not in out.stderr
    out = cli.run("stores", "list", "--base-url", url, expect=EXIT_USAGE)
    assert f"invalid --base-url {url!r}: " in out.stderr


# ---------------------------------------------------------------------------------------------
# Secrets: unusable keys are refused before any request; a base URL's password never shows

SECRET_PART = "secretpart-" + "s" * 16


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A port that accepts connections (and never answers): shows whether a client came."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        sock.setblocking(False)
        yield sock


def connections(sock: socket.socket) -> int:
    count = 0
    while True:
        try:
            conn, _ = sock.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


def _commands_given_a_key(tmp_path: Path, args: tuple[str, ...]) -> dict[str, Any]:
    """How each command that reads a key is run with ``args``: argv, exit code, prefix."""
    (tmp_path / "mnt").mkdir()
    config = tmp_path / "session.json"
    config.write_text('[{"type": "memory_store", "memory_store_id": "memstore_x"}]')
    return {
        "stores": (["stores", "list", *args], EXIT_USAGE, "memfs: "),
        "mount": (
            ["mount", "some-store", str(tmp_path / "mnt"), "--log-file",
             str(tmp_path / "daemon.log"), *args],
            EXIT_USAGE,  # the same code for the same fault (README, "Exit codes")
            "memfs mount: ",
        ),
        "session": (
            ["session", "--config", str(config), "--root", str(tmp_path / "r"), *args],
            EXIT_USAGE,
            "memfs session: ",
        ),
    }  # fmt: skip


def _each_refuses(
    commands: dict[str, Any], env: dict[str, str], expected: str, listener: socket.socket
) -> None:
    """Every command exits with its code and one line starting ``expected``, without the
    secret; none of them connects (the log of the mount, if any, is without it too)."""
    for argv, code, prefix in commands.values():
        proc = subprocess.run(
            [sys.executable, "-m", "memfs", *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        output = proc.stdout + proc.stderr
        assert proc.returncode == code, output
        assert SECRET_PART not in output and "Traceback" not in output
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(prefix + expected), proc.stderr
    # every command has exited: none of them will ever connect
    assert connections(listener) == 0


@pytest.mark.parametrize(
    ("variable", "key", "what"),
    [
        ("ANTHROPIC_API_KEY", f"sk-memfs-{SECRET_PART}\nsecond-line", "a line break"),
        ("ANTHROPIC_API_KEY", f"sk-memfs-é-{SECRET_PART}", "a non-ASCII character"),
        ("ANTHROPIC_AUTH_TOKEN", f"token {SECRET_PART}", "white space"),
        ("--api-key-file", f"sk-memfs-\x01{SECRET_PART}", "a control character"),
    ],
)
def test_an_unusable_key_is_one_line_without_the_key_and_sends_nothing(
    cli: Cli, listener: socket.socket, tmp_path: Path, variable: str, key: str, what: str
) -> None:
    env = {k: v for k, v in cli.env.items() if not k.startswith("ANTHROPIC_API_KEY")}
    env["ANTHROPIC_BASE_URL"] = f"http://127.0.0.1:{listener.getsockname()[1]}"
    args: tuple[str, ...] = ()
    source = variable
    if variable == "--api-key-file":
        key_file = tmp_path / "key"
        key_file.write_text(key + "\n")
        key_file.chmod(0o600)
        args, source = ("--api-key-file", str(key_file)), f"the API key in {key_file}"
    else:
        env[variable] = key
    commands = _commands_given_a_key(tmp_path, args)
    if what != "a line break":  # one case goes through every command; the others, one
        commands = {"stores": commands["stores"]}
    _each_refuses(commands, env, f"{source} is not a usable API key: it contains {what}", listener)
    log = tmp_path / "daemon.log"
    assert not log.exists() or SECRET_PART not in log.read_text()


@pytest.mark.parametrize("flaw", ["readable by others", "two lines"])
def test_a_key_file_others_can_read_or_of_two_lines_is_refused_and_sends_nothing(
    cli: Cli, listener: socket.socket, tmp_path: Path, flaw: str
) -> None:
    """Issue 20: such a key file was used silently (the first of two lines, at that)."""
    env = {k: v for k, v in cli.env.items() if not k.startswith("ANTHROPIC_API_KEY")}
    env["ANTHROPIC_BASE_URL"] = f"http://127.0.0.1:{listener.getsockname()[1]}"
    key_file = tmp_path / "key"
    key = f"sk-memfs-{SECRET_PART}"
    if flaw == "readable by others":
        key_file.write_text(key + "\n")
        key_file.chmod(0o644)
        expected = (
            f"the key file {key_file} is open to other users (mode 0644); make it private: "
            f"chmod 600 {key_file}"
        )
    else:
        key_file.write_text(f"{key}\n\nsk-memfs-old-{SECRET_PART}\n")
        key_file.chmod(0o600)
        expected = f"the key file {key_file} has 2 lines; it must hold the key alone, on one line"
    commands = _commands_given_a_key(tmp_path, ("--api-key-file", str(key_file)))
    _each_refuses(commands, env, expected, listener)


def test_a_base_url_password_never_shows(cli: Cli, tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens: every try is refused
        url = f"http://memfs:{SECRET_PART}@127.0.0.1:{port}"
        shown = f"http://memfs:***@127.0.0.1:{port}"
        out = cli.run("stores", "list", "--base-url", url, expect=EXIT_UNREACHABLE)
        assert f"cannot reach {shown}" in out.stderr
        bad = f"http://memfs:{SECRET_PART}@127.0.0.1:0"
        out = cli.run("stores", "list", "--base-url", bad, expect=EXIT_USAGE)
        assert "invalid --base-url 'http://memfs:***@127.0.0.1:0': invalid port" in out.stderr
        env = dict(cli.env, ANTHROPIC_BASE_URL=url)
        log = tmp_path / "daemon.log"
        (tmp_path / "mnt").mkdir()
        mount = subprocess.run(
            [sys.executable, "-m", "memfs", "mount", "some-store", str(tmp_path / "mnt"),
             "--log-file", str(log)],
            env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert mount.returncode == EXIT_UNREACHABLE
        assert mount.stderr == f"memfs mount: cannot reach the Memory Stores API at {shown}\n"
    assert "cannot reach" in log.read_text() and SECRET_PART not in log.read_text()
    assert log.stat().st_mode & 0o777 == 0o600  # logs name stores and files


def test_swapped_arguments_show_the_right_order(cli: Cli, store_name: str, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.md").write_text("kept out of the store")
    quoted = shlex.quote(store_name)
    out = cli.run("import", store_name, str(tree), expect=EXIT_USAGE)  # DIR STORE swapped
    assert out.stderr == (
        f"memfs: {store_name!r} is not a directory but {str(tree)!r} is: the arguments are "
        f"swapped? memfs import takes DIR STORE: memfs import {tree} {quoted}\n"
    )
    assert cli.json("memories", "ls", store_name, "-r") == []  # nothing imported
    out = cli.run("export", str(tree), "out", expect=EXIT_USAGE)  # STORE DIR swapped
    assert "memfs export takes STORE DIR: memfs export out " in out.stderr
    assert not Path("out").exists()  # nothing made
    mount = subprocess.run(
        [sys.executable, "-m", "memfs", "mount", str(tree), store_name],
        env=cli.env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (mount.returncode, mount.stderr) == (
        EXIT_USAGE,
        f"memfs mount: {store_name!r} is not a directory but {str(tree)!r} is: the arguments "
        f"are swapped? memfs mount takes STORE MOUNTPOINT: memfs mount {quoted} {tree}\n",
    )


def test_aliases_and_paths_without_their_leading_slash(cli: Cli, store_name: str) -> None:
    assert store_name in cli.run("stores", "ls").stdout  # as `stores list`
    cli.run("memories", "put", store_name, "notes/todo.md", "-", input=b"- [ ] write")
    assert cli.run("memories", "cat", store_name, "notes/todo.md").stdout == "- [ ] write"
    listed = cli.json("memories", "list", store_name, "notes/")  # `ls`, a prefix without /
    assert [entry["path"] for entry in listed] == ["/notes/todo.md"]
    cli.run("memories", "mv", store_name, "notes/todo.md", "done/todo.md")
    assert len(cli.json("memories", "log", store_name, "done/todo.md")) == 2
    cli.run("memories", "rm", store_name, "done/todo.md")
    out = cli.run("memories", "cat", store_name, "./x.md", expect=EXIT_USAGE)  # not a store path
    assert "invalid path './x.md'" in out.stderr
