"""Dates in a search (``memfs.contract.search_dates``) on made-up queries and memories."""

from __future__ import annotations

from datetime import date

import pytest

from memfs.contract.search_dates import (
    DATE_WEIGHT,
    dated,
    meets,
    memory_windows,
    query_window,
)


def day(text: str) -> int:
    return date.fromisoformat(text).toordinal()


def span(first: str, last: str) -> tuple[int, int]:
    return day(first), day(last)


@pytest.mark.parametrize(
    ("query", "window"),
    [
        ("What did John do on August 3, 2023?", span("2023-08-03", "2023-08-03")),
        ("What happened on 3 August, 2023", span("2023-08-03", "2023-08-03")),
        ("notes of the 3rd of August 2023", span("2023-08-03", "2023-08-03")),
        ("what changed on 2023-08-03", span("2023-08-03", "2023-08-03")),
        ("What setback did Melanie face in October 2023?", span("2023-10-01", "2023-10-31")),
        ("the week before August 3, 2023", span("2023-07-27", "2023-08-03")),
        ("the day after 3 Aug 2023", span("2023-08-03", "2023-08-04")),
        ("Where was John between August 11 and August 15 2023?", span("2023-08-11", "2023-08-15")),
        ("between 11 Aug and 15 August 2023", span("2023-08-11", "2023-08-15")),
        (
            "Where was John between 11 August 2023 and 15 August 2023?",
            span("2023-08-11", "2023-08-15"),
        ),
        ("injuries in 2023", span("2023-01-01", "2023-12-31")),
        ("When did Melanie go camping in June?", None),  # a month of any year: no window
        ("When is the dentist?", None),
        ("31 February 2023", span("2023-02-01", "2023-02-28")),  # no such day: the month
        # no such first day: the span is not read, the date named is still asked about
        ("between February 30 and March 3, 2023", span("2023-03-03", "2023-03-03")),
    ],
)
def test_the_days_a_query_asks_about(query: str, window: tuple[int, int] | None) -> None:
    assert query_window(query) == window


def test_relative_times_are_resolved_against_the_memory_s_own_date() -> None:
    """3 August 2023 was a Thursday."""
    text = (
        "6:20 pm on 3 August, 2023 — John: yesterday the kids painted; last week we went to "
        "a memorial; last Friday I ran; last weekend we camped; last month I moved."
    )
    own, *others = memory_windows(text)
    assert own == span("2023-08-03", "2023-08-03")
    assert span("2023-08-02", "2023-08-02") in others  # yesterday
    assert span("2023-07-24", "2023-07-30") in others  # last week
    assert span("2023-07-28", "2023-07-28") in others  # last Friday
    assert span("2023-07-28", "2023-07-30") in others  # last weekend, around Saturday the 29th
    assert span("2023-07-01", "2023-07-31") in others  # last month


@pytest.mark.parametrize(
    ("text", "windows"),
    [
        # a weekday's "last Monday" is a week back, never the day itself
        (
            "Monday 7 August 2023: last Monday, last weekend",
            [span("2023-08-07", "2023-08-07"), span("2023-07-31", "2023-07-31"),
             span("2023-08-04", "2023-08-06")],
        ),
        # on a Saturday "last weekend" is the one before; on a Sunday, the one just gone
        (
            "Saturday 5 August 2023: last weekend",
            [span("2023-08-05", "2023-08-05"), span("2023-07-28", "2023-07-30")],
        ),
        (
            "Sunday 6 August 2023: last weekend",
            [span("2023-08-06", "2023-08-06"), span("2023-08-04", "2023-08-06")],
        ),
        # across the end of a year
        (
            "20 December 2023: next month, last year, next week, tomorrow, two weeks ago",
            [span("2023-12-20", "2023-12-20"), span("2024-01-01", "2024-01-31"),
             span("2022-01-01", "2022-12-31"), span("2023-12-24", "2023-12-30"),
             span("2023-12-21", "2023-12-21"), span("2023-11-29", "2023-12-10")],
        ),
        # a month as the own date: relative times count from its first day
        (
            "August 2023: yesterday",
            [span("2023-08-01", "2023-08-31"), span("2023-07-31", "2023-07-31")],
        ),
        # a span inside one already read is skipped, the pattern's later matches still read
        (
            "3 August 2023, then August 2024",
            [span("2023-08-03", "2023-08-03"), span("2024-08-01", "2024-08-31")],
        ),
        # no such day: its month, and the dates after it are still read
        (
            "31 February 2023 and 3 March 2023",
            [span("2023-02-01", "2023-02-28"), span("2023-03-03", "2023-03-03")],
        ),
    ],
)  # fmt: skip
def test_relative_times_and_dates_at_the_edges(text: str, windows: list[tuple[int, int]]) -> None:
    assert memory_windows(text) == windows


def test_a_memory_without_a_date_speaks_of_no_day() -> None:
    assert memory_windows("yesterday I went to the shelter") == []


def test_last_month_in_january_is_december_of_the_year_before() -> None:
    (own, last_month) = memory_windows("5 January 2024: paid last month's rent")
    assert own == span("2024-01-05", "2024-01-05")
    assert last_month == span("2023-12-01", "2023-12-31")


def test_meets_shares_a_day() -> None:
    window = span("2023-07-27", "2023-08-03")
    assert meets(window, [span("2023-08-03", "2023-08-10")])
    assert not meets(window, [span("2023-08-04", "2023-08-10")])
    assert not meets(window, [])


def test_dated_prefers_the_memory_that_speaks_of_the_day_asked() -> None:
    """Two memories of equal words: the one written that week ("last week" from 3 August)
    outranks the one of another month; a memory meeting by its own date and its days gains
    twice."""
    window = query_window("What did John do the week before August 3, 2023?")
    assert window is not None
    texts = {
        "memorial": "3 August, 2023 — John: last week we went to a military memorial",
        "other": "9 May, 2023 — John: we went to a memorial",
        "undated": "we went to a memorial",
    }
    scores = dated({"memorial": 1.0, "other": 2.0, "undated": 2.0}, texts, window)
    assert scores["memorial"] == pytest.approx(0.5 + 2 * DATE_WEIGHT)
    assert scores["other"] == pytest.approx(1.0)
    assert scores["undated"] == pytest.approx(1.0)
    assert max(scores, key=lambda doc: scores[doc]) == "memorial"


def test_only_the_best_candidates_are_read_and_the_rest_keep_their_score() -> None:
    from memfs.contract.search_dates import DATE_DEPTH, best_of

    scores = {f"m{n:04}": float(10_000 - n) for n in range(DATE_DEPTH + 5)}
    read = best_of(scores)
    assert len(read) == DATE_DEPTH and "m0000" in read and f"m{DATE_DEPTH:04}" not in read
    # by score, not by name: the best-named memory scoring least is not read
    assert best_of({"a": 1.0} | {f"z{n}": 2.0 for n in range(DATE_DEPTH)}) == sorted(
        f"z{n}" for n in range(DATE_DEPTH)
    )
    window = query_window("on 3 May 2023")
    assert window is not None
    texts = {doc: "3 May 2023: notes" for doc in read}
    answer = dated(scores, texts, window)
    assert answer["m0000"] == pytest.approx(1 + DATE_WEIGHT)
    assert answer[f"m{DATE_DEPTH:04}"] == pytest.approx((10_000 - DATE_DEPTH) / 10_000)


def test_a_hostile_text_is_read_in_bounded_time_and_dates() -> None:
    """Thousands of dates and relative times: at most ``MAX_CHARS`` read, ``MAX_DATES``
    absolute dates and twice that many windows kept."""
    from memfs.contract.search_dates import MAX_CHARS, MAX_DATES

    text = "3 May 2023 yesterday " * 10_000
    windows = memory_windows(text)
    assert MAX_DATES < len(windows) <= 2 * MAX_DATES  # its dates still read, up to the bound
    assert memory_windows("x" * MAX_CHARS + " 3 May 2023") == []


def test_dated_scores_are_relative_to_the_best_and_count_each_kind_of_day_once() -> None:
    """Scores are divided by the best (whatever its size); a memory that meets the window only
    by a day it speaks of gains ``DATE_WEIGHT`` once; nothing scored, nothing changed."""
    window = query_window("on 3 August 2023")
    assert window is not None
    texts = {
        "spoken-of": "9 May 2023: on 3 August 2023 we move",
        "own": "3 August 2023: moving day",
        "neither": "9 May 2023: packing",
    }
    scores = dated({"spoken-of": 0.5, "own": 0.25, "neither": 0.25}, texts, window)
    assert scores == pytest.approx(
        {"spoken-of": 1.0 + DATE_WEIGHT, "own": 0.5 + DATE_WEIGHT, "neither": 0.5}
    )
    assert dated({}, texts, window) == {}
    assert dated({"own": 0.0}, texts, window) == {"own": 0.0}


@pytest.mark.parametrize(
    ("phrase", "window"),
    [
        ("last night", span("2023-08-02", "2023-08-02")),
        ("tonight", span("2023-08-03", "2023-08-03")),
        ("this morning", span("2023-08-03", "2023-08-03")),
        ("this afternoon", span("2023-08-03", "2023-08-03")),
        ("THIS EVENING", span("2023-08-03", "2023-08-03")),
        ("tomorrow", span("2023-08-04", "2023-08-04")),
        ("two days ago", span("2023-07-30", "2023-08-01")),
        ("a week ago", span("2023-07-24", "2023-07-30")),
        ("next week", span("2023-08-07", "2023-08-13")),
        ("a month ago", span("2023-07-01", "2023-07-31")),
        ("a year ago", span("2022-01-01", "2022-12-31")),
        ("last Sunday", span("2023-07-30", "2023-07-30")),
    ],
)
def test_each_relative_time_is_read(phrase: str, window: tuple[int, int]) -> None:
    """One phrase of each kind (a text holding none of their words is not scanned for them:
    ``_RELATIVE_WORDS``); 3 August 2023 was a Thursday."""
    assert memory_windows(f"3 August 2023: {phrase} we met") == [
        span("2023-08-03", "2023-08-03"),
        window,
    ]
