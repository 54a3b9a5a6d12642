"""HTTP/2 cleartext (h2c) only when the operator asks for it (``memfs server --h2c``).

Hypercorn 0.18 switches any plain-text connection to HTTP/2 when a request asks for it
(``Upgrade: h2c``) or when the client opens with the HTTP/2 preface (prior knowledge), and has
no setting to refuse either. HTTP/2 is a second protocol stack facing every client (its own
limits, frames and flow control), and no client of memfs needs it, so it is off by default.
It also had a hole: body frames of a stream that was already answered (a 401 or 413 sent before
the body ended, then the rest of the body) raise ``KeyError`` in Hypercorn's HTTP/2 protocol,
which ends the whole server. ``Http2Protocol`` drops them instead (returning their flow-control
credit), so ``--h2c`` does not hand every client a way to stop the server.

``ServerConfig`` is Hypercorn's ``Config`` with ``h2c`` (False). ``install()`` replaces
Hypercorn's protocol classes with ``Http2Protocol`` and ``Http11Protocol``, which switches only
when its connection's config says ``h2c``: an ``Upgrade: h2c`` is then ignored (RFC 9110 §7.8 lets a
server do so) and the request answered in HTTP/1.1; an HTTP/2 preface is read as the HTTP/1.1
request it looks like (``PRI *``, refused) and the frames after it end the connection with a
400. A config without the attribute (another user of Hypercorn in the process) keeps
Hypercorn's behaviour. This module must not know the app.
"""

from __future__ import annotations

import logging
from typing import Any

import h2.events
import hypercorn.protocol
from hypercorn.config import Config
from hypercorn.protocol.h2 import H2Protocol
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


class Http2Protocol(H2Protocol):
    """Hypercorn's HTTP/2 protocol that drops body frames of streams it has closed."""

    async def _handle_events(self, events: list[h2.events.Event]) -> None:
        # One event at a time: a stream may close while an earlier event is handled.
        for event in events:
            if isinstance(event, h2.events.DataReceived) and event.stream_id not in self.streams:
                assert event.stream_id is not None
                self.connection.acknowledge_received_data(
                    event.flow_controlled_length, event.stream_id
                )
                await self._flush()
            else:
                await super()._handle_events([event])


def install() -> None:
    """Make Hypercorn's connections use ``Http11Protocol`` and ``Http2Protocol`` (idempotent)."""
    setattr(hypercorn.protocol, "H11Protocol", Http11Protocol)  # noqa: B010 - not exported
    setattr(hypercorn.protocol, "H2Protocol", Http2Protocol)  # noqa: B010 - not exported
