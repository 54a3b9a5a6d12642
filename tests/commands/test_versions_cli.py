"""``memfs memories cat --version``, ``memfs memories diff`` and the paths near a missing one, as
a user runs them: subprocesses on the real server (test_admin's ``Cli``: no key in any output,
an error one line ``memfs: …`` with its exit code)."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from typing import Any

from .test_admin import EXIT_NOT_FOUND, EXIT_USAGE, Cli, cli, store_name

__all__ = ["cli", "store_name"]  # test_admin's fixtures, used here by name

# a diff header: the version's path and id, then a tab, its time (UTC) and its writer
HEADER = re.compile(r"^(---|\+\+\+) (\S+) @ (memver_\w+)( \(current\))?\t(\S+ \S+) UTC by (.+)$")


def saves(cli: Cli, store: str, path: str, *contents: str) -> list[dict[str, Any]]:
    """Put each content at ``path`` in turn; the memory's versions, newest first."""
    for content in contents:
        cli.run("memories", "put", store, path, input=content.encode())
    return list(cli.json("memories", "log", store, path))


def test_cat_prints_an_old_version(cli: Cli, store_name: str) -> None:
    versions = saves(cli, store_name, "/notes/todo.md", "- [ ] one\n", "- [x] one\n", "gone")
    first, second = versions[2], versions[1]
    out = cli.run("memories", "cat", store_name, "notes/todo.md", "--version", first["id"])
    assert out.stdout == "- [ ] one\n"
    shown = cli.json("memories", "cat", store_name, "/notes/todo.md", "--version", second["id"])
    assert (shown["id"], shown["content"]) == (second["id"], "- [x] one\n")

    # a deleted memory's versions stay readable at its last path
    cli.run("memories", "rm", store_name, "/notes/todo.md")
    out = cli.run("memories", "cat", store_name, "/notes/todo.md", "--version", second["id"])
    assert out.stdout == "- [x] one\n"
    deletion = cli.json("memories", "log", store_name, "/notes/todo.md")[0]["id"]
    removed = cli.run("memories", "diff", store_name, "/notes/todo.md").stdout.splitlines()
    assert removed[1].startswith(f"+++ /notes/todo.md @ {deletion} (deleted)\t")
    assert removed[2:] == ["@@ -1 +0,0 @@", "-gone", "\\ No newline at end of file"]
    out = cli.run("memories", "cat", store_name, "/notes/todo.md", "--version", deletion,
                  expect=EXIT_NOT_FOUND)  # fmt: skip
    assert (
        out.stderr
        == f"memfs: version {deletion} of /notes/todo.md is its deletion: it holds no content\n"
    )

    # a version of another memory, a version the store lacks
    other = saves(cli, store_name, "/other.md", "other")[0]["id"]
    cli.run("memories", "put", store_name, "/notes/todo.md", input=b"again")
    out = cli.run("memories", "cat", store_name, "/notes/todo.md", "--version", other,
                  expect=EXIT_NOT_FOUND)  # fmt: skip
    assert out.stderr == (
        f"memfs: version {other} is not a version of /notes/todo.md (it is one of /other.md)\n"
    )
    out = cli.run("memories", "cat", store_name, "/other.md", "--version", "memver_nope",
                  expect=EXIT_NOT_FOUND)  # fmt: skip
    assert out.stderr.startswith(f"memfs: no version 'memver_nope' in store {store_name!r}; ")


def test_diff_the_previous_version_against_the_current_one(cli: Cli, store_name: str) -> None:
    versions = saves(cli, store_name, "/plan.md", "a\nb\nc\n", "a\nB\nc\n", "a\nB\nc\nd")
    newest, middle, oldest = (v["id"] for v in versions)
    out = cli.run("memories", "diff", store_name, "plan.md")
    out_before = out.stdout
    assert "\x1b" not in out.stdout  # not a terminal: no colour
    lines = out.stdout.splitlines()
    old, new = HEADER.match(lines[0]), HEADER.match(lines[1])
    assert old is not None and new is not None, lines[:2]
    assert (old[1], old[2], old[3], old[4]) == ("---", "/plan.md", middle, None)
    assert (new[1], new[2], new[3], new[4]) == ("+++", "/plan.md", newest, " (current)")
    assert old[5].startswith("20") and old[6].startswith("api ")  # when, and who wrote it
    assert lines[2:] == ["@@ -1,3 +1,4 @@", " a", " B", " c", "+d", "\\ No newline at end of file"]

    # --from and --to chosen; the first version against nothing
    out = cli.run("memories", "diff", store_name, "/plan.md", "--from", oldest, "--to", middle)
    assert out.stdout.splitlines()[2:] == ["@@ -1,3 +1,3 @@", " a", "-b", "+B", " c"]
    out = cli.run("memories", "diff", store_name, "/plan.md", "--to", oldest)
    assert out.stdout.splitlines()[0] == "--- /dev/null"
    assert out.stdout.splitlines()[2:] == ["@@ -0,0 +1,3 @@", "+a", "+b", "+c"]

    # exit 0 either way; --exit-code: 1 when they differ (as git diff), 0 when the same
    differ = subprocess.run(
        [sys.executable, "-m", "memfs", "memories", "diff", store_name, "/plan.md", "--exit-code"],
        env=cli.env, capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert (differ.returncode, differ.stderr) == (1, b"")  # a difference is no fault: silent
    assert differ.stdout.decode() == out_before
    same = cli.run("memories", "diff", store_name, "/plan.md", "--from", newest, "--exit-code")
    assert same.stdout == ""
    shown = cli.json("memories", "diff", store_name, "/plan.md", "--from", oldest)
    assert (shown["from"]["id"], shown["to"]["id"]) == (oldest, newest)
    assert shown["diff"].splitlines()[2:5] == ["@@ -1,3 +1,4 @@", " a", "-b"]

    other = saves(cli, store_name, "/other.md", "x")[0]["id"]
    out = cli.run("memories", "diff", store_name, "/plan.md", "--from", other,
                  expect=EXIT_NOT_FOUND)  # fmt: skip
    assert "is not a version of /plan.md" in out.stderr


def run_on_a_terminal(cli: Cli, *args: str, **env: str) -> bytes:
    """``memfs ARGS`` with stdout a pseudo-terminal; what it wrote there."""
    leader, follower = pty.openpty()
    environ = {name: value for name, value in cli.env.items() if name != "NO_COLOR"} | env
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "memfs", *args],
            env=environ, stdout=follower, stderr=subprocess.PIPE, timeout=60, check=False,
        )  # fmt: skip
        os.close(follower)
        follower = -1
        assert proc.returncode == 0, proc.stderr
        out = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed, all is read
                break
            if not chunk:
                break
            out += chunk
        return out
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)


def test_diff_is_coloured_on_a_terminal_unless_no_color(cli: Cli, store_name: str) -> None:
    saves(cli, store_name, "/c.md", "old\n", "new\n")
    out = run_on_a_terminal(cli, "memories", "diff", store_name, "/c.md")
    assert b"\x1b[31m-old\x1b[0m" in out and b"\x1b[32m+new\x1b[0m" in out
    assert b"\x1b[36m@@ -1 +1 @@\x1b[0m" in out
    plain = run_on_a_terminal(cli, "memories", "diff", store_name, "/c.md", NO_COLOR="1")
    assert b"\x1b" not in plain and b"-old" in plain and b"+new" in plain


def test_versions_of_a_databricks_store_are_a_usage_error(cli: Cli) -> None:
    env = {k: v for k, v in cli.env.items() if k != "ANTHROPIC_API_KEY"}  # said before any key
    why = "needs a Memory Stores store: Databricks Agent Memory keeps no versions"
    for args in (
        ("diff", "agent-memory", "/a.md", "--api", "databricks"),
        ("history", "agent-memory", "/a.md", "--api", "databricks"),
        ("cat", "agent-memory", "/a.md", "--version", "v1", "--api", "databricks"),
    ):
        out = cli.run("memories", *args, env=env, expect=EXIT_USAGE)
        assert why in out.stderr, out.stderr


def test_a_missing_path_suggests_the_near_ones(cli: Cli, store_name: str) -> None:
    saves(cli, store_name, "/notes/todo.md", "x")
    cli.run("memories", "put", store_name, "/readme.md", input=b"y")
    near = (
        f"memfs: memory '/notes/tood.md' not found in store {store_name!r}; "
        "did you mean '/notes/todo.md'?\n"
    )
    for args in (("cat",), ("log",), ("history",), ("diff",), ("rm",)):
        out = cli.run("memories", *args, store_name, "notes/tood.md", expect=EXIT_NOT_FOUND)
        assert out.stderr == near, (args, out.stderr)
    some = saves(cli, store_name, "/readme.md", "z")[0]["id"]
    out = cli.run("memories", "cat", store_name, "/notes/tood.md", "--version", some,
                  expect=EXIT_NOT_FOUND)  # fmt: skip
    assert out.stderr == near
    out = cli.run("memories", "cat", store_name, "/zzz/qqq.txt", expect=EXIT_NOT_FOUND)
    assert out.stderr == f"memfs: memory '/zzz/qqq.txt' not found in store {store_name!r}\n"
