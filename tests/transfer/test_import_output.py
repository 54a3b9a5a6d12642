"""What ``memfs import`` prints: names escaped so that a line stays one line and a terminal
runs no escape sequence of a hostile file name; the progress line only on a terminal."""

from __future__ import annotations

import io

import pytest

from memfs.commands import progress
from memfs.contract.paths import shown


@pytest.mark.parametrize(
    ("name", "printed"),
    [
        ("/notes/a b.md", "/notes/a b.md"),
        ("/é/ü ✓.md", "/é/ü ✓.md"),
        ("/\x1b[2J\x1b]0;owned\x07", "/\\x1b[2J\\x1b]0;owned\\x07"),
        ("/tab\there\nnewline", "/tab\\x09here\\x0anewline"),
        ("/zero\u200bwidth\u2028line", "/zero\\u200bwidth\\u2028line"),
        ("/latin1-\udce9.md", "/latin1-\\udce9.md"),
    ],
)
def test_names_are_printed_escaped(name: str, printed: str) -> None:
    assert shown(name) == printed


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_count_shows_on_a_terminal_after_a_second_and_is_erased(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    terminal, pipe = Terminal(), io.StringIO()
    with (
        progress.CountProgress("memfs import", "written", terminal) as line,
        progress.CountProgress("memfs import", "written", pipe) as quiet,
    ):
        line.update(1, 10)  # a quick import says nothing
        assert terminal.getvalue() == ""
        now[0] += progress.SHOW_AFTER
        line.update(7, 10)
        quiet.update(7, 10)
    assert terminal.getvalue() == "\rmemfs import: 7/10 written\x1b[K\r\x1b[K"
    assert pipe.getvalue() == ""
