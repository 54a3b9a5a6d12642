"""Page cursors on their own: every cursor the server issues comes back intact, and nothing else
is accepted — a refused cursor is always ``CursorError`` (HTTP 400), never a crash or a page of
another listing."""

from __future__ import annotations

import base64
import hashlib
import json
import re

import pytest

from memfs.server import cursor


def forge(payload: bytes) -> str:
    """A cursor with a valid check over ``payload``: the check detects corruption, it is not a
    secret (memfs/server/cursor.py), so anyone can build one and the server must still refuse
    what is not a position."""
    check = hashlib.sha256(b"memfs-cursor\0" + payload).digest()[:8]
    return "page_" + base64.urlsafe_b64encode(check + payload).rstrip(b"=").decode()


def test_every_issued_cursor_round_trips_and_is_url_safe() -> None:
    # Positions of every length, so the base64 tokens end in every padding residue.
    for n in range(12):
        position = {"path": "/é/" + "x" * n, "id": n}
        issued = cursor.encode("memories", "q1", position)
        assert re.fullmatch(r"page_[A-Za-z0-9_-]+", issued), issued
        assert cursor.decode(issued, "memories", "q1") == position


def test_a_cursor_without_the_page_prefix_is_refused() -> None:
    issued = cursor.encode("memories", "q1", {"path": "/a"})
    for other in ("PAGE_" + issued[5:], "xxxxx" + issued[5:], issued[5:]):
        with pytest.raises(cursor.CursorError):
            cursor.decode(other, "memories", "q1")


def issued_of_length(length: int) -> str:
    """An issued cursor exactly ``length`` characters long."""
    for n in range(length):
        issued = cursor.encode("memories", "q1", {"path": "a" * n})
        if len(issued) == length:
            return issued
    raise AssertionError(f"no cursor of length {length}")


def test_length_limit_is_inclusive() -> None:
    """A cursor of MAX_CURSOR_LENGTH characters is accepted, a longer one refused even when
    intact, so a request cannot make the server decode an unbounded token."""
    longest = issued_of_length(cursor.MAX_CURSOR_LENGTH)
    assert cursor.decode(longest, "memories", "q1")["path"]
    with pytest.raises(cursor.CursorError):
        cursor.decode(issued_of_length(cursor.MAX_CURSOR_LENGTH + 1), "memories", "q1")


def test_checked_payloads_that_are_not_positions_are_refused() -> None:
    # forge() builds the check as the server does: its refusals below come from the shape.
    intact = b'{"k":"memories","q":"q1","p":{"path":"/a"}}'
    assert cursor.decode(forge(intact), "memories", "q1") == {"path": "/a"}
    for payload in (b"[1, 2]", b'{"k": "memories", "q": "q1", "p": [1]}', b"\xff", b"nul"):
        with pytest.raises(cursor.CursorError):
            cursor.decode(forge(payload), "memories", "q1")


def test_a_changed_position_with_valid_json_is_refused_by_the_check() -> None:
    """Only the check rejects this cursor: the payload still decodes, for the right listing."""
    issued = cursor.encode("memories", "q1", {"path": "/a/1"})
    token = issued[5:]
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    check, payload = raw[:8], raw[8:]
    changed = payload.replace(b"/a/1", b"/a/2")
    assert json.loads(changed)["p"] == {"path": "/a/2"}
    tampered = "page_" + base64.urlsafe_b64encode(check + changed).rstrip(b"=").decode()
    with pytest.raises(cursor.CursorError):
        cursor.decode(tampered, "memories", "q1")


def test_filters_that_differ_give_different_digests() -> None:
    """A cursor names its filters by digest; no two different filter sets may share one (an
    absent filter is not the text "None")."""
    cases = [(None,), ("None",), ("",), ("/a/",), ("/a/", None), ("/a/", "1"), (None, "1")]
    digests = {cursor.query_digest(*parts) for parts in cases}
    assert len(digests) == len(cases)
