"""Who may call the reference server, and as whom: keys, the admin key, headers, actors.

``Gatekeeper.admit(scope)`` decides, before any route runs, whether a request gets in:
- ``GET``/``HEAD`` of ``OPEN_PATHS`` (``/healthz``, ``/metrics``, databricks-sdk's start-up
  probe) need no key;
- ``ADMIN_PATHS`` (fault control) take the admin key only: an API key gets 403, a missing or
  wrong key 401, and without an admin key configured they are off (404);
- with the console on (``console=True``), ``CONSOLE_PATH`` and everything below it need no key
  here: the console is an auth domain of its own (``memfs.server.console``: its session cookie,
  CSRF tokens), and it checks a key only where a person signs in, with ``is_api_key``;
- every other request needs an API key, sent as ``x-api-key`` or ``Authorization: Bearer``.
  Every credential the request carries counts and they must all name the same key
  (``presented_key``). Keys are compared in constant time, each against every key;
- the URL must not hold a NUL; ``anthropic-beta`` must not name both ``MEMORY_BETA`` and
  ``OLD_BETA``; a session header must be a session id, and two of them the same one;
- no request may carry both ``Content-Length`` and ``Transfer-Encoding`` (checked first).

It then records the actors in ``scope["state"]``: ``api_actor`` (``{"type": "api_actor",
"api_key_id": "apikey_…"}``, a digest of the key: ``ids.api_key_id``) and ``actor``, which is
``{"type": "session_actor", "session_id": …}`` when the request carries
``memfs.contract.models.SESSION_HEADER``, else the API actor. Routes read them with ``actor_of``
(who wrote a version) and ``api_actor_of`` (who redacted one: sessions have no redact capability).

This module must not answer requests: ``middleware.ApiMiddleware`` turns a refusal into the
error envelope.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Sequence
from typing import cast

from starlette.requests import Request
from starlette.types import Scope

from memfs.contract.errors import (
    ApiError,
    AuthenticationError,
    BadRequestError,
    NotFoundError,
    PermissionDeniedError,
)
from memfs.contract.models import SESSION_HEADER, Actor
from memfs.server.db import ids

log = logging.getLogger(__name__)

MEMORY_BETA = "agent-memory-2026-07-22"
OLD_BETA = "managed-agents-2026-04-01"
# /.well-known/databricks-config: databricks-sdk probes it at start-up (answered 404, keyless).
OPEN_PATHS = frozenset({"/healthz", "/metrics", "/.well-known/databricks-config"})
FAULTS_PATH = "/v1/memfs/faults"  # answered by memfs.server.http.faults when it is installed
# The operator's endpoints: they take the admin key (``create_app(admin_key=…)``), never an API
# key, and are off (404) when the server has none.
ADMIN_PATHS = frozenset({FAULTS_PATH})
# The console's URLs (``memfs.server.console``): admitted by its own session, not by a key.
CONSOLE_PATH = "/console"
MISSING_KEY = "invalid or missing API key (send it as x-api-key or Authorization: Bearer)"
MISSING_ADMIN_KEY = "invalid or missing admin key (send it as x-api-key or Authorization: Bearer)"


def actor_of(request: Request) -> Actor:
    """Who this request writes as: its session, else its API key (set by ``Gatekeeper``)."""
    return cast(Actor, request.state.actor)


def api_actor_of(request: Request) -> Actor:
    """The API key this request carries, as an actor (set by ``Gatekeeper``)."""
    return cast(Actor, request.state.api_actor)


class Gatekeeper:
    """Admits requests by their keys and headers (see the module docstring)."""

    def __init__(
        self, api_keys: Sequence[str], admin_key: str | None = None, *, console: bool = False
    ) -> None:
        self._keys = [key.encode("utf-8") for key in api_keys if key]
        self._admin_key = admin_key.encode("utf-8") if admin_key else None
        self._console = console

    def _is_api_key(self, presented: bytes) -> bool:
        return is_api_key(presented, self._keys)

    def _admit_admin(self, scope: Scope) -> ApiError | None:
        """Admin endpoints take the admin key only; without one configured they are off."""
        if self._admin_key is None:
            return NotFoundError(
                f"{scope['path']} is off: this server has no admin key "
                "(start it with MEMFS_ADMIN_KEY or --admin-key-file)"
            )
        presented = presented_key(scope, missing=MISSING_ADMIN_KEY)
        if isinstance(presented, ApiError):
            return presented
        if hmac.compare_digest(presented, self._admin_key):
            return None
        if self._is_api_key(presented):
            return PermissionDeniedError(f"{scope['path']} needs the admin key, not an API key")
        return AuthenticationError(MISSING_ADMIN_KEY)

    def admit(self, scope: Scope) -> ApiError | None:
        """Check auth, beta header and session header; put the actors into ``scope['state']``."""
        names = {name.lower() for name, _ in scope.get("headers", [])}
        if b"content-length" in names and b"transfer-encoding" in names:
            # RFC 9112 §6.1: a sign of request smuggling. Refused (the answer then closes the
            # connection: the body is not read), so no proxy in front can be desynchronised.
            return BadRequestError(
                "a request must not carry both Content-Length and Transfer-Encoding"
            )
        if scope["method"] in ("GET", "HEAD") and scope["path"] in OPEN_PATHS:
            return None
        if scope["path"] in ADMIN_PATHS:
            return self._admit_admin(scope)
        if self._console and is_console_path(scope["path"]):
            return None  # the console admits by its session (module docstring)
        presented = presented_key(scope)
        if isinstance(presented, ApiError):
            return presented
        if not self._is_api_key(presented):
            return AuthenticationError(MISSING_KEY)
        key = presented.decode("utf-8")
        query = scope.get("query_string", b"")
        if "\x00" in scope["path"] or b"%00" in query or b"\x00" in query:
            # No id, path or filter holds one, and PostgreSQL text cannot carry one at all.
            return BadRequestError("the URL must not contain NUL characters (%00)")
        betas: set[str] = set()
        sessions: set[str] = set()
        for name, value in scope.get("headers", []):
            lowered = name.decode("latin-1").lower()
            if lowered == "anthropic-beta":
                betas.update(b.strip() for b in value.decode("latin-1").split(","))
            elif lowered == SESSION_HEADER:
                sessions.add(value.decode("latin-1").strip())
        if MEMORY_BETA in betas and OLD_BETA in betas:
            return BadRequestError(
                f"anthropic-beta: send {MEMORY_BETA} without {OLD_BETA}, not both"
            )
        if len(sessions) > 1:  # as for keys: not judged by whichever header comes last
            return BadRequestError(f"{SESSION_HEADER}: sent twice with different values")
        session = sessions.pop() if sessions else None
        api_actor = Actor("api_actor", ids.api_key_id(key))
        state = scope.setdefault("state", {})
        state["api_actor"] = api_actor
        state["actor"] = api_actor
        if session is not None:
            if not ids.is_session_id(session):
                return BadRequestError(
                    f"{SESSION_HEADER}: expected 'sesn_' followed by letters, digits, '-' or '_'"
                )
            state["actor"] = Actor("session_actor", session)
        return None


def is_api_key(presented: bytes, keys: Sequence[bytes]) -> bool:
    """Whether ``presented`` is one of ``keys``: compared with every key in constant time, so
    the time taken tells nothing about which key, or how much of one, matched."""
    found = False
    for key in keys:
        found |= hmac.compare_digest(presented, key)
    return found


def is_console_path(path: str) -> bool:
    return path == CONSOLE_PATH or path.startswith(CONSOLE_PATH + "/")


def presented_key(scope: Scope, missing: str = MISSING_KEY) -> bytes | AuthenticationError:
    """The one key the request presents, or why it presents none.

    Every credential counts: each ``x-api-key`` header and each ``Authorization`` header. They
    must all name the same key: a request whose credentials disagree (a valid key and a wrong
    one, or two different keys) is refused rather than judged by whichever comes first. An
    ``Authorization`` header that is not ``Bearer <token>`` is a credential no key matches.
    """
    presented: set[bytes | None] = set()
    for name, value in scope.get("headers", []):
        lowered = name.lower()
        if lowered == b"x-api-key":
            presented.add(value.strip())
        elif lowered == b"authorization":
            scheme, _, token = value.strip().partition(b" ")
            is_bearer = scheme.lower() == b"bearer" and token.strip()
            presented.add(token.strip() if is_bearer else None)
    if len(presented) > 1:
        return AuthenticationError(
            "the request carries different credentials (x-api-key and Authorization, or the "
            "same header twice); send one key"
        )
    key = presented.pop() if presented else None
    if not key:
        return AuthenticationError(missing)
    return key
