"""A transport that makes the real reference server look like the hosted API to one client:
the memfs extensions' discovery (``GET /v1/memfs/capabilities``) answers 404, as the hosted API
does, and every other request goes to the server unchanged. For tests of what memfs does on a
server without its extensions (search by a local index) while the reference server has them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from memfs.api.client import CAPABILITIES, StoreClient
from memfs.api.config import ClientConfig, Secret


class HostedLikeTransport(httpx.AsyncBaseTransport):
    def __init__(self) -> None:
        self._real = httpx.AsyncHTTPTransport()
        self.capability_checks = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == CAPABILITIES:
            self.capability_checks += 1
            body = {"type": "error", "error": {"type": "not_found_error", "message": "Not found"}}
            return httpx.Response(404, json=body)
        return await self._real.handle_async_request(request)

    async def aclose(self) -> None:
        await self._real.aclose()


@asynccontextmanager
async def hosted_like_client(server: Any) -> AsyncIterator[tuple[StoreClient, HostedLikeTransport]]:
    """A ``StoreClient`` of ``server`` (a ``ServerProcess``) that sees no memfs extension."""
    transport = HostedLikeTransport()
    config = ClientConfig(api_key=Secret(server.api_key), base_url=server.base_url)
    async with StoreClient(config, transport=transport) as client:
        yield client, transport
