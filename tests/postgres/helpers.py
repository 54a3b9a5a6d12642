"""Helpers of the PostgreSQL tests: a client config, an HTTP client and a new store on a server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import trio

from kit.servers import ServerProcess
from memfs.api.changes import SseStream
from memfs.api.config import ClientConfig, Secret
from memfs.contract.store_api import ChangeEvent


def config_for(server: ServerProcess, **overrides: Any) -> ClientConfig:
    return ClientConfig(api_key=Secret(server.api_key), base_url=server.base_url, **overrides)


def http_for(server: ServerProcess) -> httpx.Client:
    return httpx.Client(
        base_url=server.base_url,
        headers={"x-api-key": server.api_key, "anthropic-version": "2023-06-01"},
        timeout=30,
    )


def new_store(server: ServerProcess, name: str = "changes") -> str:
    with http_for(server) as c:
        r = c.post("/v1/memory_stores", json={"name": name})
        assert r.status_code == 200, r.text
        return str(r.json()["id"])


MakeHttp = Callable[[ServerProcess], httpx.Client]


class Collector:
    """Reads a change stream (either API's) in the background; ``ready`` is set on each
    (re)connection."""

    def __init__(self, stream: SseStream) -> None:
        self.stream = stream
        self.events: list[ChangeEvent] = []
        self.ready = trio.Event()
        self.error: BaseException | None = None
        self.changed = trio.Event()

    @classmethod
    async def connected(cls, stream: SseStream, nursery: trio.Nursery) -> Collector:
        """A collector reading ``stream`` in ``nursery``, once the stream has connected (every
        change committed from then on will arrive)."""
        collector = cls(stream)
        nursery.start_soon(collector.run)
        with trio.fail_after(10):
            await collector.ready.wait()
        return collector

    async def run(self) -> None:
        try:
            async for event in self.stream:
                if event.kind == "ready":
                    self.ready.set()
                elif event.kind == "memory_version":
                    self.events.append(event)
                    self.changed.set()
                    self.changed = trio.Event()
        except Exception as exc:
            self.error = exc

    @property
    def version_ids(self) -> list[str]:
        return [e.version.id for e in self.events if e.version is not None]

    async def wait_for(self, count: int, timeout: float = 10) -> None:
        with trio.fail_after(timeout):
            while len(self.events) < count:
                await self.changed.wait()
