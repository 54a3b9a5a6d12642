"""Names under .versions: instants in every accepted spelling, timeline stamps, history names."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memfs.contract.models import Actor
from memfs.versions.names import actor_label, history_name, parse_instant, stamp

T = datetime(2026, 11, 29, 10, 15, 3, tzinfo=UTC)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("2026-11-29T10:15:03Z", T),
        ("2026-11-29T10:15:03.250Z", T.replace(microsecond=250_000)),
        ("2026-11-29T10:15:03,25Z", T.replace(microsecond=250_000)),
        ("2026-11-29T10:15:03.1234567Z", T.replace(microsecond=123_456)),
        ("2026-11-29T101503Z", T),
        ("2026-11-29T101503.250123Z", T.replace(microsecond=250_123)),
        ("20261129T101503Z", T),
        ("2026-11-29t10:15:03z", T),
        ("2026-11-29 10:15:03Z", T),
        ("2026-11-29T10:15:03", T),
        ("2026-11-29T10:15Z", T.replace(second=0)),
        ("2026-11-29T11:15:03+01:00", T),
        ("2026-11-29T05:15:03-0500", T),
        ("2026-11-29", datetime(2026, 11, 29, tzinfo=UTC)),
        ("@0", datetime(1970, 1, 1, tzinfo=UTC)),
        (f"@{int(T.timestamp())}.5", T.replace(microsecond=500_000)),
    ],
)
def test_absolute_spellings(name, expected):
    assert parse_instant(name) == expected


@pytest.mark.parametrize(
    ("name", "delta"),
    [
        ("-90s", timedelta(seconds=90)),
        ("-15m", timedelta(minutes=15)),
        ("-2h", timedelta(hours=2)),
        ("-1d", timedelta(days=1)),
        ("-1w", timedelta(weeks=1)),
        ("-1h30m", timedelta(hours=1, minutes=30)),
    ],
)
def test_relative_spellings(name, delta):
    assert parse_instant(name, now=T) == T - delta


@pytest.mark.parametrize(
    "name",
    [
        "history",
        "log.txt",
        "",
        "2026-13-01",
        "2026-02-30T00:00:00Z",
        "2026-11-29T25:00:00Z",
        "2026-11-29T10:15:03+25:00",
        "2026-11-29T10:15:03Q",
        "-1y",
        "-h",
        "1h",
        "@",
        "@99999999999999999",
        "-99999999999999999999w",
        "yesterday",
    ],
)
def test_not_instants(name):
    assert parse_instant(name, now=T) is None


def test_stamp_is_colon_free_fixed_width_and_parses_back():
    early = T.replace(microsecond=5)
    late = T + timedelta(hours=1)
    assert stamp(T) == "2026-11-29T101503.000000Z"
    assert ":" not in stamp(T)
    assert len(stamp(early)) == len(stamp(late))
    assert sorted([stamp(late), stamp(early)]) == [stamp(early), stamp(late)]
    assert parse_instant(stamp(early)) == early


def test_history_names():
    session = Actor("session_actor", "sesn_01")
    assert actor_label(session) == "session-sesn_01"
    assert actor_label(Actor("api_actor", "key/with spaces")) == "api-key_with_spaces"
    assert actor_label(None) == "unknown"
    name = history_name(T, "modified", session, False)
    assert name == "2026-11-29T101503.000000Z-modified-session-sesn_01"
    assert history_name(T, "created", session, True).endswith("-session-sesn_01-redacted")
    long = history_name(T, "renamed-out", Actor("user_actor", "u" * 400), True)
    assert len(long.encode()) == 255
    assert long.endswith("-redacted")
