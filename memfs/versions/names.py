"""Names below ``.versions``: instants (``parse_instant`` reads every spelling a user may
type; ``stamp`` is the timeline's own), and the ``<time>-<role>-<actor>`` names of history files.

Pure functions of their arguments: no I/O, no store, no clock unless one is passed in.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

from memfs.contract.models import Actor

HISTORY_NAME = "history"
LOG_NAME = "log.txt"
MAX_NAME_BYTES = 255


_ABSOLUTE = re.compile(
    r"^(?P<y>\d{4})-?(?P<mo>\d{2})-?(?P<d>\d{2})"
    r"(?:[Tt ](?P<h>\d{2})(?::?(?P<mi>\d{2})(?::?(?P<s>\d{2})(?:[.,](?P<f>\d+))?)?)?"
    r"(?P<tz>[Zz]|[+-]\d{2}(?::?\d{2})?)?)?$"
)
_RELATIVE = re.compile(r"^-(?:\d+[smhdw])+$")
_RELATIVE_PART = re.compile(r"(\d+)([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_UNIX = re.compile(r"^@(?P<s>\d{1,12})(?:\.(?P<f>\d+))?$")


def parse_instant(name: str, now: datetime | None = None) -> datetime | None:
    """The UTC instant a directory name under ``.versions`` stands for, or None.

    Accepted (times without a zone are UTC; fractions beyond microseconds are cut):
    ``2026-11-29T10:15:03Z``, ``2026-11-29T10:15:03.250Z``, colon-free ``2026-11-29T101503Z``
    and ``2026-11-29T101503.250123Z`` (the timeline's spelling), basic ``20261129T101503Z``,
    minutes ``2026-11-29T10:15Z``, offsets ``2026-11-29T11:15:03+01:00``, a date alone
    ``2026-11-29`` (midnight UTC, the start of that day), relative ``-90s``, ``-15m``, ``-2h``,
    ``-1d``, ``-1w``, ``-1h30m`` (before ``now``), and Unix time ``@1764411303[.5]``.
    """
    if _RELATIVE.match(name):
        seconds = sum(int(n) * _UNIT_SECONDS[u] for n, u in _RELATIVE_PART.findall(name))
        try:
            return (now or datetime.now(UTC)) - timedelta(seconds=seconds)
        except OverflowError:
            return None
    unix = _UNIX.match(name)
    if unix:
        micros = int((unix.group("f") or "").ljust(6, "0")[:6])
        try:
            return datetime.fromtimestamp(int(unix.group("s")), UTC) + timedelta(
                microseconds=micros
            )
        except (OverflowError, OSError, ValueError):
            return None
    match = _ABSOLUTE.match(name)
    if not match:
        return None
    g = match.groupdict()
    try:
        day = date(int(g["y"]), int(g["mo"]), int(g["d"]))
        if g["h"] is None:
            return datetime(day.year, day.month, day.day, tzinfo=UTC)
        moment = datetime(
            day.year,
            day.month,
            day.day,
            int(g["h"]),
            int(g["mi"] or 0),
            int(g["s"] or 0),
            int((g["f"] or "").ljust(6, "0")[:6]),
            tzinfo=UTC,
        )
    except ValueError:
        return None
    tz = g["tz"]
    if tz and tz not in ("Z", "z"):
        digits = tz[1:].replace(":", "")
        hours, minutes = int(digits[:2]), int(digits[2:] or 0)
        if hours > 23 or minutes > 59:
            return None
        offset = timedelta(hours=hours, minutes=minutes)
        moment = moment - offset if tz[0] == "+" else moment + offset
    return moment


def stamp(moment: datetime) -> str:
    """The timeline's colon-free, fixed-width, sortable spelling: ``2026-11-29T101503.250123Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H%M%S.%fZ")


_UNSAFE = re.compile(r"[^A-Za-z0-9._@+=-]")


def actor_label(actor: Actor | None) -> str:
    """``session-sesn_01``, ``api-apikey_01``, ``user-user_01``; ``unknown`` if none."""
    if actor is None:
        return "unknown"
    kind = actor.type.removesuffix("_actor").replace("_", "-") or "unknown"
    ident = _UNSAFE.sub("_", actor.id)
    return f"{kind}-{ident}" if ident else kind


def history_name(moment: datetime, role: str, actor: Actor | None, redacted: bool) -> str:
    """``<time>-<role>-<actor>[-redacted]``, cut to fit one name component."""
    tail = "-redacted" if redacted else ""
    head = f"{stamp(moment)}-{role}-"
    room = MAX_NAME_BYTES - len(head) - len(tail)
    return head + actor_label(actor)[:room] + tail
