"""The SDK taking over a connection whose first line ``memfs mcp`` read itself
(``memfs.mcp.handshake``), through the SDK's public stream interface: ``Server.run`` reads the
client's messages from one stream and writes its own to another, and these wrap the stdio
transport's two.

- ``Replayed``: what the SDK reads. The first line's messages (parsed by the SDK's own
  ``jsonrpc_message_adapter``, as its stdio transport parses a line), then the transport's. An
  ``initialize`` answered early is replayed too, so the SDK handles it as if it had read it: it
  negotiates the version and records the client's params in its connection, runs its
  middleware, and is initialized for what follows (``notifications/initialized``, requests).
- ``AnsweredOnce``: what the SDK writes, but its answer to that ``initialize``, which the
  client already has: dropped, after it is compared with the one sent. The same result is
  silent. Another result of the same version is a warning (the SDK changed what it announces:
  ``tests/mcp_tools/test_handshake.py`` fails on it first). An error, or another version, means
  the client and the SDK no longer agree on the connection: ``refused`` is called, and
  ``memfs mcp`` ends with the SDK's reason (``handshake.HandoverError``) rather than serve a
  client the SDK did not accept.

Nothing else is touched: the SDK answers every other message, the early one included when
``memfs mcp`` did not answer it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from contextvars import Context
from types import TracebackType
from typing import Any, Self

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from memfs.mcp.handshake import Opening

log = logging.getLogger(__name__)

Received = SessionMessage | Exception


class _Stream:
    """A stream closed at the end of its ``async with``, as the SDK's streams are."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class Replayed(_Stream):
    """The first line's messages, then ``rest``'s (the stdio transport's read stream)."""

    def __init__(self, first: list[Received], rest: Any) -> None:
        self._first = first
        self._rest = rest  # the SDK's context-carrying stream (a private class of the SDK)

    @property
    def last_context(self) -> Context | None:
        """The transport's context of the last message (None for the replayed ones)."""
        return None if self._first else getattr(self._rest, "last_context", None)

    async def receive(self) -> Received:
        if self._first:
            await anyio.lowlevel.checkpoint()
            return self._first.pop(0)
        message: Received = await self._rest.receive()
        return message

    async def aclose(self) -> None:
        self._first.clear()
        await self._rest.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Received:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class AnsweredOnce(_Stream):
    """``out`` (the stdio transport's write stream) without the SDK's answer to the request
    ``answered`` answers (module docstring)."""

    def __init__(
        self, out: Any, request_id: types.RequestId, answered: Any, refused: Callable[[str], None]
    ) -> None:
        self._out = out
        self._id = request_id
        self._answered = answered  # the answer sent, parsed
        self._refused = refused
        self._pending = True  # until the SDK's own answer to ``request_id`` went by

    async def send(self, item: SessionMessage, /) -> None:
        message = item.message
        if (
            self._pending
            and isinstance(message, types.JSONRPCResponse | types.JSONRPCError)
            and message.id == self._id
        ):
            self._pending = False
            self._compare(message.model_dump(by_alias=True, exclude_unset=True, mode="json"))
            await anyio.lowlevel.checkpoint()
            return
        await self._out.send(item)

    def _compare(self, own: dict[str, Any]) -> None:
        if own == self._answered:
            return
        error = own.get("error")
        if error is not None:
            self._refused(f"the SDK refused the initialize answered early: {error!r:.300}")
            return
        version = own["result"].get("protocolVersion")
        if version != self._answered["result"]["protocolVersion"]:
            self._refused(f"the SDK negotiated protocol version {version!r:.40}, not the one sent")
            return
        log.warning(
            "initialize was answered early with a result other than the SDK's: %.500r, not %.500r",
            self._answered["result"],
            own["result"],
        )

    async def aclose(self) -> None:
        await self._out.aclose()


def take_over(
    opening: Opening, read: Any, write: Any, refused: Callable[[str], None]
) -> tuple[Replayed, Any]:
    """The streams ``Server.run`` serves the connection on: ``read`` and ``write`` (the stdio
    transport's), after ``opening`` (module docstring)."""
    first: list[Received] = []
    for line in opening.messages():
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            first.append(SessionMessage(message))
        except Exception as exc:  # as the stdio transport passes it on: the SDK answers it
            first.append(exc)
    if opening.answer is None:
        return Replayed(first, read), write
    answered = json.loads(opening.answer)
    replayed = first[0] if len(first) == 1 else None
    if not (
        isinstance(replayed, SessionMessage)
        and isinstance(replayed.message, types.JSONRPCRequest)
        and replayed.message.method == "initialize"
        and replayed.message.id == answered["id"]
    ):
        refused(f"the SDK does not read the initialize answered early as one: {first!r:.300}")
    return Replayed(first, read), AnsweredOnce(write, answered["id"], answered, refused)
