"""HTTP/2 cleartext (h2c) only when the operator asks for it (``memfs server --h2c``).

Hypercorn 0.18 switches any plain-text connection to HTTP/2 when a request asks for it
(``Upgrade: h2c``) or when the client opens with the HTTP/2 preface (prior knowledge), and has
no setting to refuse either. HTTP/2 is a second protocol stack facing every client (its own
limits, frames and flow control), and no client of memfs needs it, so it is off by default.

``ServerConfig`` is Hypercorn's ``Config`` with ``h2c`` (False). ``install()`` replaces
Hypercorn's HTTP/1.1 protocol class with ``Http11Protocol``, which switches only when its
connection's config says ``h2c``: an ``Upgrade: h2c`` is then ignored (RFC 9110 §7.8 lets a
server do so) and the request answered in HTTP/1.1; an HTTP/2 preface is read as the HTTP/1.1
request it looks like (``PRI *``, refused) and the frames after it end the connection with a
400. A config without the attribute (another user of Hypercorn in the process) keeps
Hypercorn's behaviour. This module must not know the app.
"""

from __future__ import annotations

import logging
from typing import Any

import hypercorn.protocol
from hypercorn.config import Config
from hypercorn.protocol.h11 import H11Protocol

log = logging.getLogger(__name__)


class ServerConfig(Config):
    """Hypercorn's config, plus whether HTTP/2 cleartext is spoken."""

    h2c: bool = False


class Http11Protocol(H11Protocol):
    """Hypercorn's HTTP/1.1 protocol that moves to HTTP/2 only with ``config.h2c``."""

    async def _check_protocol(self, event: Any) -> None:
        if getattr(self.config, "h2c", True):
            await super()._check_protocol(event)


def install() -> None:
    """Make Hypercorn's connections use ``Http11Protocol`` (idempotent)."""
    setattr(hypercorn.protocol, "H11Protocol", Http11Protocol)  # noqa: B010 - not exported
