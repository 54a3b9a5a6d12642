"""Dates in a search: the days a query asks about, and the days a memory speaks of.

"What did John do the week before August 3, 2023?" asks about 27 July - 3 August 2023; a
memory written on 3 August ("6:20 pm on 3 August, 2023 — John: ... last week, we had a
meaningful experience at a military memorial") speaks of that day and, by "last week", of the
week before it. BM25 sees the words "August", "3" and "2023" in every memory of that day and
month; these windows let a search prefer the memories whose days meet the query's.

- ``query_window``: the first absolute date of a query ("3 August 2023", "August 3, 2023",
  "2023-08-03", "August 2023"), widened by what comes just before it ("the week before",
  "the day after", "between ... and ..."), or a year alone after "in"/"during"; None if the
  query names no date. A month without a year ("in June") is no window: it could be any year.
- ``memory_windows``: each absolute date a memory holds, and its relative times ("yesterday",
  "last week", "last Friday", "last month", "two weeks ago", "next month") resolved against the
  memory's *own date*: the first absolute date in it (a conversation turn, a journal entry and
  a meeting note start with theirs). A memory without an absolute date has no windows: nothing
  to resolve "yesterday" against (its write time is when it was saved, not what it tells).

English only, no library: the phrases are a short closed list, and a general date parser
(dateparser) costs tens of milliseconds per text, too much for the candidates of every search.
Windows are inclusive ranges of proleptic Gregorian ordinals (``date.toordinal``).
"""

from __future__ import annotations

import calendar
import logging
import re
from datetime import date

log = logging.getLogger(__name__)

Window = tuple[int, int]

_MONTH_NUMBERS = {name.lower(): n for n, name in enumerate(calendar.month_name) if name}
_MONTH_NUMBERS.update({name.lower(): n for n, name in enumerate(calendar.month_abbr) if name})
_MONTH = (
    r"(?P<month>"
    + "|".join(sorted(_MONTH_NUMBERS, key=len, reverse=True))  # "June" before "Jun"
    + r")\.?"
)
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
# The absolute dates, most precise first (a span already taken by one is not read again).
_ABSOLUTE = (
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),  # 3 August, 2023
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE),  # August 3, 2023
    re.compile(rf"\b{_YEAR}-(?P<month_number>[01]\d)-(?P<day_number>[0-3]\d)\b"),  # 2023-08-03
    re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),  # August 2023
)
_YEAR_ALONE = re.compile(rf"\b(?:in|during|of|since)\s+{_YEAR}\b", re.IGNORECASE)
_BETWEEN = re.compile(r"\bbetween\b", re.IGNORECASE)
# "between August 11 and August 15 2023": the first day takes the second's year.
_BETWEEN_WITHOUT_YEAR = (
    re.compile(rf"\bbetween\s+{_MONTH}\s+{_DAY}\s+and\s*$", re.IGNORECASE),
    re.compile(rf"\bbetween\s+{_DAY}\s+(?:of\s+)?{_MONTH}\s+and\s*$", re.IGNORECASE),
)
# "the week before" / "the weekend after" just before a date: how many days, which way.
_AROUND = re.compile(
    r"\b(?P<span>day|days|week|weekend|month)\s+(?P<way>before|after|prior to)\s*$", re.IGNORECASE
)
_AROUND_DAYS = {"day": 1, "days": 4, "week": 7, "weekend": 3, "month": 31}
_WEEKDAYS = {name.lower(): n for n, name in enumerate(calendar.day_name)}
# Relative times, and the days before (negative) or after the memory's own date they mean;
# a name instead of numbers is resolved by ``_resolve``.
_RELATIVE: tuple[tuple[re.Pattern[str], tuple[int, int] | str], ...] = (
    (re.compile(r"\b(?:yesterday|last night)\b", re.IGNORECASE), (-1, -1)),
    (
        re.compile(r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b", re.IGNORECASE),
        (0, 0),
    ),
    (re.compile(r"\btomorrow\b", re.IGNORECASE), (1, 1)),
    (re.compile(r"\b(?:a few|a couple of|two|2|three|3) days ago\b", re.IGNORECASE), (-4, -2)),
    (re.compile(r"\b(?:last|this past|past) weekend\b", re.IGNORECASE), "last weekend"),
    (re.compile(r"\b(?:last week|this past week|a week ago)\b", re.IGNORECASE), (-10, -4)),
    (re.compile(r"\b(?:two|2|a couple of|a few) weeks ago\b", re.IGNORECASE), (-21, -10)),
    (re.compile(r"\bnext week\b", re.IGNORECASE), (4, 10)),
    (re.compile(r"\b(?:last month|a month ago)\b", re.IGNORECASE), "last month"),
    (re.compile(r"\bnext month\b", re.IGNORECASE), "next month"),
    (re.compile(r"\b(?:last year|a year ago)\b", re.IGNORECASE), "last year"),
    (
        re.compile(
            r"\blast (?P<weekday>monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
            re.IGNORECASE,
        ),
        "last weekday",
    ),
)
# All of them in one pattern (one scan of a text): alternative ``rN`` is ``_RELATIVE[N]``.
_ANY_RELATIVE = re.compile(
    "|".join(f"(?P<r{n}>{pattern.pattern})" for n, (pattern, _) in enumerate(_RELATIVE)),
    re.IGNORECASE,
)
# Every relative time above holds one of these words (a weekday ends in "day"): a text without
# any is not scanned by ``_ANY_RELATIVE`` (~3 us against ~80 us for 1,000 characters; most
# memories speak of no relative time).
_RELATIVE_WORDS = ("day", "night", "morning", "afternoon", "evening", "tomorrow", "week",
                   "month", "year")  # fmt: skip
# Only so much of a memory is read for dates, of only the best candidates, and only so many
# dates kept: its own date comes first, and a search that names a date reads its candidates
# (100 memories of 1,000 characters dense with dates: ~90 ms; of prose with numbers: ~30 ms;
# LoCoMo's turns, each with its date: ~7 ms, ~17 ms before ``_RELATIVE_WORDS``).
MAX_CHARS = 1000
DATE_DEPTH = 100
MAX_DATES = 16
_DIGIT = re.compile(r"\d")


def _month_window(year: int, month: int) -> Window:
    last = calendar.monthrange(year, month)[1]
    return date(year, month, 1).toordinal(), date(year, month, last).toordinal()


def _absolute_dates(text: str) -> list[tuple[int, int, Window]]:
    """(start, end, window) of each absolute date in ``text``, in order of appearance."""
    found: list[tuple[int, int, Window]] = []
    if not _DIGIT.search(text):
        return found  # every absolute date has a year
    for pattern in _ABSOLUTE:
        for match in pattern.finditer(text):
            if len(found) == MAX_DATES:
                break
            if any(start <= match.start() < end for start, end, _ in found):
                continue
            parts = match.groupdict()
            try:
                year = int(parts["year"])
                if parts.get("month_number"):
                    month = int(parts["month_number"])
                else:
                    month = _MONTH_NUMBERS[parts["month"].lower()]
                day = parts.get("day") or parts.get("day_number")
                if day:
                    ordinal = date(year, month, int(day)).toordinal()
                    window = (ordinal, ordinal)
                else:
                    window = _month_window(year, month)
            except (ValueError, KeyError):
                continue  # "31 February 2023": no date
            found.append((match.start(), match.end(), window))
    return sorted(found)


def query_window(query: str) -> Window | None:
    """The days ``query`` asks about (module docstring), or None."""
    text = query[:MAX_CHARS]
    found = _absolute_dates(text)
    if found:
        start, _, (low, high) = found[0]
        before = text[:start]
        if len(found) > 1 and _BETWEEN.search(before):
            return low, max(high, found[1][2][1])
        for pattern in _BETWEEN_WITHOUT_YEAR:
            first = pattern.search(before)
            if first is not None:
                try:
                    month = _MONTH_NUMBERS[first["month"].lower()]
                    year = date.fromordinal(low).year
                    return date(year, month, int(first["day"])).toordinal(), high
                except ValueError:
                    break
        around = _AROUND.search(before)
        if around is None:
            return low, high
        days = _AROUND_DAYS[around["span"].lower()]
        if around["way"].lower() == "after":
            return high, high + days
        return low - days, low
    year_named = _YEAR_ALONE.search(text)
    if year_named is None:
        return None
    named = int(year_named["year"])
    return date(named, 1, 1).toordinal(), date(named, 12, 31).toordinal()


def _resolve(rule: str, anchor: int, match: re.Match[str]) -> Window:
    """The window of a named relative time against the own date ``anchor``."""
    day = date.fromordinal(anchor)
    if rule == "last weekend":
        saturday = anchor - ((day.weekday() - 5) % 7 or 7)
        return saturday - 1, saturday + 1
    if rule == "last weekday":
        back = (day.weekday() - _WEEKDAYS[match["weekday"].lower()]) % 7 or 7
        return anchor - back, anchor - back
    if rule == "last year":
        return date(day.year - 1, 1, 1).toordinal(), date(day.year - 1, 12, 31).toordinal()
    step = -1 if rule == "last month" else 1
    month = (day.month - 1 + step) % 12 + 1
    year = day.year + (day.month - 1 + step) // 12
    return _month_window(year, month)


def memory_windows(text: str) -> list[Window]:
    """The days a memory speaks of (module docstring): its own date first, then its other
    absolute dates, then its relative times; empty without an absolute date."""
    text = text[:MAX_CHARS]
    found = _absolute_dates(text)
    if not found:
        return []
    windows = [window for *_, window in found]
    anchor = windows[0][0]
    folded = text.casefold()  # as _ANY_RELATIVE's IGNORECASE ("WEEK", "ſunday")
    if not any(word in folded for word in _RELATIVE_WORDS):
        return windows
    for match in _ANY_RELATIVE.finditer(text):
        if len(windows) >= 2 * MAX_DATES:
            break
        assert match.lastgroup is not None
        rule = _RELATIVE[int(match.lastgroup[1:])][1]
        if isinstance(rule, tuple):
            windows.append((anchor + rule[0], anchor + rule[1]))
        else:
            windows.append(_resolve(rule, anchor, match))
    return windows


def meets(window: Window, windows: list[Window]) -> bool:
    """Whether any of ``windows`` shares a day with ``window``."""
    low, high = window
    return any(start <= high and low <= end for start, end in windows)


# What meeting the query's days adds to a score divided by the answer's best: once for the
# memory's own date, once for the days it speaks of (chosen on LoCoMo's development half).
DATE_WEIGHT = 0.6


def best_of(scores: dict[str, float]) -> list[str]:
    """The ``DATE_DEPTH`` best of ``scores``: the memories whose texts ``dated`` reads."""
    return sorted(scores, key=lambda doc: (-scores[doc], doc))[:DATE_DEPTH]


def dated(scores: dict[str, float], texts: dict[str, str], window: Window) -> dict[str, float]:
    """``scores`` divided by their best, plus ``DATE_WEIGHT`` for each memory whose own date
    meets ``window`` and again for one whose other days do (``texts``: the text of each memory
    to read, ``best_of(scores)``; the others keep their score)."""
    best = max(scores.values(), default=0.0)
    if best <= 0:
        return dict(scores)
    answer = {}
    for doc, score in scores.items():
        windows = memory_windows(texts.get(doc, ""))
        meetings = meets(window, windows[:1]) + meets(window, windows[1:])
        answer[doc] = score / best + DATE_WEIGHT * meetings
    return answer
