"""A change stream read over a raw socket (HTTP/1.0, so the body is the bare event stream):
cheap enough to hold hundreds at once in one test or benchmark process."""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import trio


class RawStream:
    """One Server-Sent Events stream: ``events`` (event name, id, data) in arrival order.

    ``await nursery.start(stream.run)`` returns once the ``ready`` event arrived (or raises the
    status line of a refused stream). ``paused`` stops reading the socket until set again (a
    slow consumer); ``recv_buffer`` shrinks the socket's receive buffer, so a paused stream
    soon stops the server's sends to it.
    """

    def __init__(
        self, port: int, path: str, headers: dict[str, str], *, recv_buffer: int | None = None
    ) -> None:
        self.port = port
        self.path = path
        self.headers = headers
        self.recv_buffer = recv_buffer
        # (event name, id, data not yet decoded: JSON is decoded when asked for, so a process
        # holding hundreds of streams spends little while they receive)
        self._events: list[tuple[str, str | None, str]] = []
        self.arrived_at: list[float] = []  # of each of ``_events`` (``time.perf_counter``)
        self.ended = False
        self.resumed = trio.Event()
        self.resumed.set()
        self._arrived = trio.Event()

    def pause(self) -> None:
        self.resumed = trio.Event()

    def resume(self) -> None:
        self.resumed.set()

    def named(self, name: str) -> list[tuple[str | None, dict[str, Any]]]:
        return [
            (event_id, json.loads(data)) for kind, event_id, data in self._events if kind == name
        ]

    def times(self, name: str) -> list[float]:
        """When each event called ``name`` arrived (``time.perf_counter``, as ``named``)."""
        return [
            at
            for (kind, _, _), at in zip(self._events, self.arrived_at, strict=True)
            if kind == name
        ]

    def count(self, name: str) -> int:
        return sum(1 for kind, _, _ in self._events if kind == name)

    async def wait_for(self, name: str, count: int) -> None:
        """Until ``count`` events called ``name`` arrived (or the stream ended)."""
        while self.count(name) < count and not self.ended:
            self._arrived = trio.Event()
            await self._arrived.wait()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        sock = trio.socket.socket()
        if self.recv_buffer is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.recv_buffer)
        await sock.connect(("127.0.0.1", self.port))
        stream = trio.SocketStream(sock)
        request = f"GET {self.path} HTTP/1.0\r\nhost: memfs\r\n"
        request += "".join(f"{k}: {v}\r\n" for k, v in self.headers.items()) + "\r\n"
        started = False
        async with stream:
            await stream.send_all(request.encode())
            buffer = b""
            head: bytes | None = None
            while True:
                await self.resumed.wait()
                data = await stream.receive_some(65536)
                if not data:
                    break
                buffer += data
                if head is None:
                    if b"\r\n\r\n" not in buffer:
                        continue
                    head, buffer = buffer.split(b"\r\n\r\n", 1)
                    status = head.split(b"\r\n", 1)[0].decode()
                    if " 200 " not in status:
                        raise RuntimeError(f"the stream was refused: {status}: {buffer[:300]!r}")
                while b"\n\n" in buffer:
                    block, buffer = buffer.split(b"\n\n", 1)
                    self._parse(block.decode())
                    if not started and self.count("ready"):
                        started = True
                        task_status.started()
        self.ended = True
        self._arrived.set()
        if not started:
            raise RuntimeError("the stream ended before it was ready")

    def _parse(self, block: str) -> None:
        fields = dict(line.split(": ", 1) for line in block.split("\n") if ": " in line)
        if "event" in fields:
            self._events.append((fields["event"], fields.get("id"), fields["data"]))
            self.arrived_at.append(time.perf_counter())
            self._arrived.set()
