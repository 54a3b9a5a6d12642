"""The Memory Stores change stream's cursors: a position is the ``created_at`` of the last
version seen, in integer microseconds since the epoch (``encode_cursor``). ``created_at``
strictly increases within a store in commit order (a ``Storage`` invariant), so "versions after
this cursor" is exact.
"""

from __future__ import annotations

import logging
from datetime import datetime

from memfs.server.db.clock import from_us, to_us

log = logging.getLogger(__name__)

ORIGIN = from_us(0)  # the position before every version


def encode_cursor(created_at: datetime) -> str:
    return str(to_us(created_at))


def position_of(created_at: datetime) -> int:
    """A version's position in its store's stream (the number in its cursor)."""
    return to_us(created_at)


def from_position(position: int) -> datetime:
    return from_us(position)


def decode_cursor(text: str) -> datetime | None:
    """The position in a cursor, or None if ``text`` is not one."""
    if not text.isascii() or not text.isdigit() or len(text) > 20:
        return None
    try:
        return from_us(int(text))
    except OverflowError:  # past year 9999: no version is there
        return None
