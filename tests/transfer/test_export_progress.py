"""The progress line of ``memfs export`` (``commands.progress.PhaseProgress``)."""

from __future__ import annotations

import io

import pytest

from memfs.commands import progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_line_shows_phase_and_count_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "SHOW_AFTER", 0.0)
    terminal = Terminal()
    with progress.PhaseProgress("memfs export", terminal) as line:
        line.update("listing versions", 40, None)
    assert terminal.getvalue() == "\rmemfs export: listing versions: 40\x1b[K\r\x1b[K"
    terminal = Terminal()
    with progress.PhaseProgress("memfs export", terminal) as line:
        line.update("committed", 500, 10000)
    assert "committed: 500/10000" in terminal.getvalue()
    pipe = io.StringIO()
    with progress.PhaseProgress("memfs export", pipe) as line:
        line.update("committed", 500, 10000)
    assert pipe.getvalue() == ""
