"""Line diffs for console pages (an edit conflict; the history pages compare versions too).

``line_diff`` is ``difflib.unified_diff`` cut into ``DiffLine`` items for a template to show
in a ``<pre>``, each with its kind (added, removed, context, a hunk header) for the CSS. The
text is the memories' own, escaped by the template like everything else: nothing here makes
markup.
"""

from __future__ import annotations

import difflib
import logging
from dataclasses import dataclass
from typing import Literal

log = logging.getLogger(__name__)

DiffKind = Literal["file", "hunk", "add", "remove", "same"]
CONTEXT_LINES = 3


@dataclass(frozen=True)
class DiffLine:
    kind: DiffKind
    text: str  # with its leading "+", "-", " " or "@@"


def line_diff(old: str, new: str, *, old_name: str, new_name: str) -> list[DiffLine]:
    """The unified diff of ``old`` to ``new`` (empty when they are equal)."""
    lines = difflib.unified_diff(
        old.splitlines(),
        new.splitlines(),
        fromfile=old_name,
        tofile=new_name,
        lineterm="",
        n=CONTEXT_LINES,
    )
    return [DiffLine(_kind(line), line) for line in lines]


def _kind(line: str) -> DiffKind:
    if line.startswith(("---", "+++")):
        return "file"
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("+"):
        return "add"
    if line.startswith("-"):
        return "remove"
    return "same"
