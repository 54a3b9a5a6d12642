"""Two texts' unified diff as ``diff -u`` prints it: the lines ``memfs memories diff`` prints and
the MCP ``memory_history`` tool answers with, made in one place so that both mark a last line
without a newline alike (``\\ No newline at end of file``).
"""

from __future__ import annotations

import difflib

CONTEXT_LINES = 3  # unchanged lines shown around each change, as diff -u
NO_NEWLINE = "\\ No newline at end of file"


def unified_diff(
    old: str, new: str, old_label: str, new_label: str, old_date: str = "", new_date: str = ""
) -> list[str]:
    """The diff's lines, each ending in a newline (none when the texts are equal). A label and
    a date make a header (``--- LABEL<tab>DATE``), as diff puts a file's name and time there."""
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=old_label,
        tofile=new_label,
        fromfiledate=old_date,
        tofiledate=new_date,
        n=CONTEXT_LINES,
    )
    return [line if line.endswith("\n") else f"{line}\n{NO_NEWLINE}\n" for line in lines]
