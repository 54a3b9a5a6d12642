"""Signing in to the console and the sessions that follow: ``SessionKeeper``.

A person signs in with an API key (``sign_in``): it is compared with every key of the server in
constant time (``http.auth.is_api_key``) and, if it is one, a session starts: a random token
(``secrets.token_urlsafe``, 256 bits) goes to the browser in the ``COOKIE`` cookie, and the
database (``console.storage``) keeps its SHA-256 and the key's id (``ids.api_key_id``), never
the key nor the token. So any replica on the same database knows the session, and a copy of
the database signs nobody in.

A session ends (``current`` answers None and deletes its row) when
- it was not used for ``IDLE`` (its ``last_seen_at``, moved at most once a ``TOUCH_EVERY`` so
  that reading pages does not write on every request),
- it is older than ``ABSOLUTE``, whatever its use,
- its key is no longer one of this server's keys (the server restarted without it),
- or the person signs out (``sign_out``).

Writes made through the console are attributed to the key (``SignedIn.actor``: the
``api_actor`` of its id), as the API attributes a request with that key.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from starlette.requests import Request

from memfs.contract.models import Actor
from memfs.server.console.security import csrf_token
from memfs.server.console.storage import ConsoleSession, ConsoleStorage
from memfs.server.db import ids
from memfs.server.db.clock import utc_now
from memfs.server.http.auth import is_api_key

log = logging.getLogger(__name__)

COOKIE = "memfs_console"
IDLE = timedelta(minutes=30)
ABSOLUTE = timedelta(hours=12)
TOUCH_EVERY = timedelta(minutes=1)
# What a session cookie's value may be (``token_urlsafe(32)``): anything else is not looked up.
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def plausible_token(value: str | None) -> bool:
    return value is not None and 20 <= len(value) <= 100 and set(value) <= _TOKEN_CHARS


@dataclass(frozen=True)
class SignedIn:
    """The browser's session, for one request. ``token`` is its cookie's (kept in memory only,
    to derive form tokens); ``api_key_id`` says who it is."""

    token: str = field(repr=False)
    api_key_id: str

    @property
    def actor(self) -> Actor:
        return Actor("api_actor", self.api_key_id)

    def csrf(self, purpose: str = "console") -> str:
        return csrf_token(self.token, purpose)


class SessionKeeper:
    """Signs people in and finds their session again (module docstring)."""

    def __init__(
        self,
        store: ConsoleStorage,
        api_keys: Sequence[str],
        *,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._store = store
        self._keys = [key.encode("utf-8") for key in api_keys if key]
        self._key_ids = frozenset(ids.api_key_id(key) for key in api_keys if key)
        self._clock = clock

    def is_key(self, presented: str) -> bool:
        try:
            raw = presented.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate is no key
            return False
        return bool(raw) and is_api_key(raw, self._keys)

    async def sign_in(self, presented: str) -> SignedIn | None:
        """A new session for ``presented`` if it is one of the server's keys, else None."""
        if not self.is_key(presented):
            return None
        token = secrets.token_urlsafe(32)
        now = self._clock()
        key_id = ids.api_key_id(presented)
        await self._store.create_session(
            ConsoleSession(token_hash(token), key_id, now, now + ABSOLUTE, now),
            ended_before=now - IDLE,
        )
        log.info("console: %s signed in", key_id)
        return SignedIn(token, key_id)

    async def current(self, request: Request, *, touch: bool = True) -> SignedIn | None:
        """The request's live session, or None (an ended one is deleted on the way).
        ``touch=False``: the request is no use of the session (a live page's stream, which
        must not keep a session alive); its ``last_seen_at`` stays."""
        token = request.cookies.get(COOKIE)
        if not plausible_token(token):
            return None
        assert token is not None
        hashed = token_hash(token)
        session = await self._store.get_session(hashed)
        if session is None:
            return None
        now = self._clock()
        if (
            now >= session.expires_at
            or now - session.last_seen_at >= IDLE
            or session.api_key_id not in self._key_ids
        ):
            await self._store.delete_session(hashed)
            return None
        if touch and now - session.last_seen_at >= TOUCH_EVERY:
            await self._store.touch_session(hashed, now)
        return SignedIn(token, session.api_key_id)

    async def sign_out(self, signed_in: SignedIn) -> None:
        await self._store.delete_session(token_hash(signed_in.token))
        log.info("console: %s signed out", signed_in.api_key_id)

    def max_age(self) -> int:
        """The session cookie's lifetime in seconds (the absolute limit)."""
        return int(ABSOLUTE.total_seconds())
