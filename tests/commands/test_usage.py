"""Usage errors and ``--help`` of every command, as a user sees them in a real ``memfs`` process.

A usage error exits 2 with argparse's usage and one line ``memfs CMD: error: …``; ``--help``
shows every option's default value (a flag is off unless given; an option whose default is not
a value, such as the mounting user, says so in words).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from memfs.cli import build_parser
from memfs.commands import session as session_command
from memfs.commands.admin_actions import ACTIONS
from memfs.mount.owner import DEFAULT_UMASK
from memfs.session.runner import FLUSH_TIMEOUT

EXIT_USAGE = 2


def memfs(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memfs", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["no-such-command"],
            "memfs: error: argument COMMAND: invalid choice: 'no-such-command' (choose from "
            "'server', 'stores', 'memories', 'search', 'export', 'import', 'mount', 'umount', "
            "'status', 'sync', 'session', 'mcp', 'completion')",
        ),
        (["mount"], "memfs mount: error: the following arguments are required: STORE, MOUNTPOINT"),
        (
            ["mount", "store", "/mnt/x", "--grace", "soon"],
            "memfs mount: error: argument --grace: invalid float value: 'soon'",
        ),
        (
            ["mount", "store", "/mnt/x", "--umask", "9"],
            "memfs mount: error: argument --umask: umask '9' is not an octal number from 000 to "
            "777 (e.g. 022)",
        ),
        (["stores"], "memfs stores: error: the following arguments are required: ACTION"),
        (
            ["memories", "log", "store", "-n", "0"],
            "memfs memories log: error: argument -n/--limit: must be at least 1, got 0",
        ),
        (
            ["search", "store", "words", "--limit", "101"],
            "memfs search: error: argument -n/--limit: must be from 1 to 100, got 101",
        ),
        (
            ["completion", "fish"],
            "memfs completion: error: argument SHELL: invalid choice: 'fish' (choose from "
            "'bash', 'zsh')",
        ),
        (
            ["session", "stop", "--timeout", "x"],
            "memfs session stop: error: argument --timeout: invalid float value: 'x'",
        ),
    ],
)
def test_a_usage_error_is_its_usage_and_one_line(argv: list[str], message: str) -> None:
    proc = memfs(*argv)
    assert proc.returncode == EXIT_USAGE
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("usage: memfs")
    assert [line for line in lines if "error:" in line] == [message]
    assert lines[-1] == message


def test_no_command_prints_the_help_as_a_usage_error() -> None:
    proc = memfs()
    assert proc.returncode == EXIT_USAGE
    assert proc.stdout == ""
    assert proc.stderr.startswith("usage: memfs [-h] [--version] COMMAND ...")
    assert "completion" in proc.stderr


def parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """``parser`` and every parser below it (commands, their actions)."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from parsers(sub)


def has_value(default: object) -> bool:
    return default not in (None, False, argparse.SUPPRESS, [])


def test_every_default_value_is_in_the_help() -> None:
    checked = 0
    for parser in parsers(build_parser()):
        text = " ".join(parser.format_help().split())  # as one line: wrapping moves spaces
        for action in parser._actions:
            if action.help is argparse.SUPPRESS or not has_value(action.default):
                continue
            if action.nargs == 0:  # a flag (--no-console): its default is no value to show
                continue
            assert f"(default: {action.default})" in text, (parser.prog, action.dest)
            checked += 1
    assert checked >= 15  # server, mount, memories put, session's


def test_mount_help_shows_its_defaults() -> None:
    proc = memfs("mount", "--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    for shown in (
        "--update-delay UPDATE_DELAY seconds before a save is uploaded (default: 0.5)",
        "--change-feed {auto,poll} auto: the server's change stream when offered, else "
        "polling; poll: polling only (default: auto)",
        "--readahead-dirs N directories fetched ahead of a reader walking the tree, grep -r "
        "(0: off) (default: 4)",
        f"(default: {DEFAULT_UMASK:03o}, files 0644 and directories 0755)",
        "(name or number; default: the mounting user)",
    ):
        assert shown in text
    assert "(default: None)" not in text and "(default: False)" not in text


def test_session_stop_waits_longer_than_the_supervisor_flushes() -> None:
    """The constant ``--help`` shows (kept out of the supervisor's module, which is heavy)."""
    assert session_command.STOP_TIMEOUT == FLUSH_TIMEOUT + 15.0
    assert "(default: 45.0)" in " ".join(memfs("session", "stop", "--help").stdout.split())


def test_a_hidden_option_stays_hidden() -> None:
    assert "ready-fd" not in memfs("mount", "--help").stdout
    assert re.search(r"--ready-fd", memfs("session", "--help").stdout) is None


def test_every_admin_action_on_the_command_line_has_its_function() -> None:
    commands = {sub.prog.removeprefix("memfs "): sub for sub in parsers(build_parser())}
    admin = {name for name in commands if name.startswith(("stores ", "memories "))}
    assert admin == set(ACTIONS)
