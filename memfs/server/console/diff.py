"""Line diffs for console pages: two versions compared (the history pages), theirs against
yours (an edit conflict).

``diff_table`` gives the rows of ``templates/_diff_table.html``, as GitHub shows a diff: each
line with its number in the old and the new version, and in a changed line the words that
changed (``Piece.changed``, shown in ``<del>``/``<ins>``), unified or split side by side. The
text is the memories' own, escaped by the template like everything else: nothing here makes
markup. ``line_counts`` gives the history's "+3 −1" of a version against the one before it,
with its work capped.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

log = logging.getLogger(__name__)

CONTEXT_LINES = 3
# the lines a count diffs exactly (old x new, once their common head and tail are set aside):
# difflib takes up to cubic time on repeated lines (500 x 500 of them: ~0.5 s), so past this
# the count is of lines as multisets, in linear time
EXACT_COUNT_CELLS = 10_000
# The same blow-up in the table: past this many line pairs difflib's "autojunk" heuristic is
# on (lines in more than 1% of a long text are not used as anchors: a diff that may not be the
# shortest, found in about linear time), and words are marked only on line pairs of at most
# this many token pairs (one 15,000-word line against another took minutes).
EXACT_DIFF_CELLS = 250_000

TableKind = Literal["hunk", "add", "remove", "same", "change"]
# a word, a run of spaces, or one other character: the units a changed word is marked in
_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")
# below this likeness two paired lines are a rewrite, not an edit: no word is marked
WORD_MARK_RATIO = 0.5


@dataclass(frozen=True)
class Piece:
    """A run of a line's text; ``changed`` runs are shown in ``<del>`` or ``<ins>``."""

    text: str
    changed: bool = False


@dataclass(frozen=True)
class Side:
    """One line of one version: its number there (``None`` on a blank half of a split row)."""

    number: int | None
    pieces: tuple[Piece, ...] = ()


@dataclass(frozen=True)
class DiffRow:
    """A row of the diff table. ``hunk`` rows carry their header in ``header``. In the unified
    view a row is one line (``old`` and ``new`` are the same line for ``same``; an ``add`` has
    no old number, a ``remove`` no new one); in the split view a row pairs an old line with the
    new one that replaced it (a ``change``), either side possibly blank (number ``None``)."""

    kind: TableKind
    old: Side = Side(None)
    new: Side = Side(None)
    header: str = ""


@dataclass(frozen=True)
class DiffTable:
    unified: list[DiffRow]
    split: list[DiffRow]


def diff_table(old: str, new: str) -> DiffTable:
    """The diff of ``old`` to ``new`` as table rows, in both views (empty when they are equal)."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    exact = len(old_lines) * len(new_lines) <= EXACT_DIFF_CELLS
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=not exact)
    unified: list[DiffRow] = []
    split: list[DiffRow] = []
    for group in matcher.get_grouped_opcodes(CONTEXT_LINES):
        header = _hunk_header(group)
        unified.append(DiffRow("hunk", header=header))
        split.append(DiffRow("hunk", header=header))
        for tag, i1, i2, j1, j2 in group:
            olds = [Side(i + 1, (Piece(old_lines[i]),)) for i in range(i1, i2)]
            news = [Side(j + 1, (Piece(new_lines[j]),)) for j in range(j1, j2)]
            if tag == "equal":
                rows = [DiffRow("same", o, n) for o, n in zip(olds, news, strict=True)]
                unified.extend(rows)
                split.extend(rows)
                continue
            # a replaced line and its replacement, paired in order, get their words marked
            for k in range(min(len(olds), len(news))):
                olds[k], news[k] = _mark_words(olds[k], news[k])
            unified.extend(DiffRow("remove", old=o) for o in olds)
            unified.extend(DiffRow("add", new=n) for n in news)
            for k in range(max(len(olds), len(news))):
                o = olds[k] if k < len(olds) else Side(None)
                n = news[k] if k < len(news) else Side(None)
                split.append(DiffRow("change", o, n))
    return DiffTable(unified, split)


@dataclass(frozen=True)
class LineCount:
    """Lines added and removed by a version (the diff table's ``+`` and ``-`` rows)."""

    added: int
    removed: int


def line_counts(old: str, new: str) -> LineCount:
    """The lines ``new`` adds to and removes from ``old``: the diff table's count, as long as
    the lines make at most ``EXACT_COUNT_CELLS`` pairs once their common head and tail are set
    aside (within it, as the table counts them); past it, counted as multisets of lines (lines
    that only moved are not counted then: never more than the diff's)."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    if len(old_lines) * len(new_lines) <= EXACT_COUNT_CELLS:
        return _diffed(old_lines, new_lines)
    most = min(len(old_lines), len(new_lines))
    head = _longest(most, lambda n: old_lines[:n] == new_lines[:n])
    tail = _longest(
        most - head, lambda n: old_lines[len(old_lines) - n :] == new_lines[len(new_lines) - n :]
    )
    old_rest = old_lines[head : len(old_lines) - tail]
    new_rest = new_lines[head : len(new_lines) - tail]
    if len(old_rest) * len(new_rest) <= EXACT_COUNT_CELLS:
        return _diffed(old_rest, new_rest)
    same = sum((Counter(old_rest) & Counter(new_rest)).values())
    return LineCount(len(new_rest) - same, len(old_rest) - same)


def _diffed(old_lines: list[str], new_lines: list[str]) -> LineCount:
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    same = sum(block.size for block in matcher.get_matching_blocks())
    return LineCount(len(new_lines) - same, len(old_lines) - same)


def _longest(most: int, same: Callable[[int], bool]) -> int:
    """The largest ``n <= most`` for which ``same(n)`` holds, ``same`` holding up to a point:
    a binary search, so a common head of 50,000 lines is ~16 list comparisons done in C rather
    than 50,000 steps of Python."""
    low, high = 0, most
    while low < high:
        middle = (low + high + 1) // 2
        if same(middle):
            low = middle
        else:
            high = middle - 1
    return low


def _hunk_header(group: list[tuple[str, int, int, int, int]]) -> str:
    first, last = group[0], group[-1]
    old_start, old_end, new_start, new_end = first[1], last[2], first[3], last[4]
    return f"@@ -{old_start + 1},{old_end - old_start} +{new_start + 1},{new_end - new_start} @@"


def _mark_words(old: Side, new: Side) -> tuple[Side, Side]:
    old_text, new_text = old.pieces[0].text, new.pieces[0].text
    old_tokens, new_tokens = _TOKEN.findall(old_text), _TOKEN.findall(new_text)
    if len(old_tokens) * len(new_tokens) > EXACT_DIFF_CELLS:
        return old, new  # shown whole, unmarked: marking would cost more than the page
    matcher = difflib.SequenceMatcher(None, old_tokens, new_tokens, autojunk=False)
    if matcher.ratio() < WORD_MARK_RATIO:
        return old, new
    old_pieces: list[Piece] = []
    new_pieces: list[Piece] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        changed = tag != "equal"
        _append(old_pieces, "".join(old_tokens[i1:i2]), changed)
        _append(new_pieces, "".join(new_tokens[j1:j2]), changed)
    return Side(old.number, tuple(old_pieces)), Side(new.number, tuple(new_pieces))


def _append(pieces: list[Piece], text: str, changed: bool) -> None:
    """Add a run, merged into the last one when both are changed or both are not."""
    if not text:
        return
    if pieces and pieces[-1].changed == changed:
        pieces[-1] = Piece(pieces[-1].text + text, changed)
    else:
        pieces.append(Piece(text, changed))
