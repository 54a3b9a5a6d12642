"""Page cursors on their own: every cursor the server issues comes back intact, and nothing else
is accepted — a refused cursor is always ``CursorError`` (HTTP 400), never a crash or a page of
another listing.

Mutants left alive (``make mutate``): ``"UTF-8"``/``"ASCII"`` spellings, ``ensure_ascii`` set to
its default or to ``None`` (false as ``False``), ``+len(token) % 4`` padding (the decoder takes
the extra ``=``), and ``rstrip(b"XX=XX")`` (a token never ends in ``X``: the payload ends in
``}``)."""

from __future__ import annotations

import base64
import hashlib
import json
import re

import pytest

from memfs.server.http import cursor


def forge(payload: bytes) -> str:
    """A cursor with a valid check over ``payload``: the check detects corruption, it is not a
    secret (memfs/server/http/cursor.py), so anyone can build one and the server must still refuse
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
    with pytest.raises(cursor.CursorError, match=r"^page: not a valid page cursor$"):
        cursor.decode(tampered, "memories", "q1")


def test_filters_that_differ_give_different_digests() -> None:
    """A cursor names its filters by digest; no two different filter sets may share one (an
    absent filter is not the text "None")."""
    cases = [(None,), ("None",), ("",), ("/a/",), ("/a/", None), ("/a/", "1"), (None, "1")]
    digests = {cursor.query_digest(*parts) for parts in cases}
    assert len(digests) == len(cases)


def test_the_cursor_format_is_stable() -> None:
    """A cursor is a wire format: one a client holds across a server restart or upgrade must
    still decode, so its bytes (separators, check, digest length) are pinned here."""
    position = {"path": "/é", "n": 1}
    issued = "page_aUBQKf8Yrud7ImsiOiJtZW1vcmllcyIsInEiOiJxMSIsInAiOnsicGF0aCI6Ii_DqSIsIm4iOjF9fQ"
    assert cursor.encode("memories", "q1", position) == issued
    assert cursor.decode(issued, "memories", "q1") == position
    assert cursor.query_digest("/a/", None, "é") == "9d3199d48758a8ae"


def test_a_cursor_of_another_listing_or_filters_is_refused_with_that_reason() -> None:
    issued = cursor.encode("memories", cursor.query_digest("/a/"), {"path": "/a/x"})
    assert cursor.decode(issued, "memories", cursor.query_digest("/a/")) == {"path": "/a/x"}
    for kind, query in (("versions", cursor.query_digest("/a/")), ("memories", "other")):
        with pytest.raises(
            cursor.CursorError,
            match=r"^page: this cursor belongs to a different listing or filters$",
        ):
            cursor.decode(issued, kind, query)


@pytest.mark.parametrize(
    "bad",
    [
        "page_",  # nothing after the prefix
        "page_A",  # a base64 length no encoder produces (binascii.Error)
        "page_AAAA",  # decodes to 3 bytes: shorter than the check
        "x" * 5000,  # too long, and no prefix
    ],
)
def test_malformed_cursors_are_refused_in_one_line(bad: str) -> None:
    with pytest.raises(cursor.CursorError, match=r"^page: not a valid page cursor$"):
        cursor.decode(bad, "memories", "q1")


def test_checked_but_malformed_payloads_say_so() -> None:
    for payload in (b"[1, 2]", b'{"k": "memories", "q": "q1", "p": [1]}', b"\xff", b"nul"):
        with pytest.raises(cursor.CursorError, match=r"^page: not a valid page cursor$"):
            cursor.decode(forge(payload), "memories", "q1")
