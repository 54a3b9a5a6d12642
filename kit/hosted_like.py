"""A transport that makes the real reference server look like the hosted API to one client:
the memfs extensions' discovery (``GET /v1/memfs/capabilities``) answers 404, as the hosted API
does, and every other request goes to the server unchanged. For tests of what memfs does on a
server without its extensions (search by a local index) while the reference server has them.
With ``refuses_in_content``, a memory whose content holds that text is refused with the API's
400, as the hosted API may refuse what memfs cannot know ahead (its rule on NUL is not
published): a request the real server would take is answered before it gets there."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from memfs.api.client import CAPABILITIES, StoreClient
from memfs.api.config import ClientConfig, Secret


class HostedLikeTransport(httpx.AsyncBaseTransport):
    def __init__(self, refuses_in_content: str | None = None) -> None:
        self._real = httpx.AsyncHTTPTransport()
        self.capability_checks = 0
        self.refuses_in_content = refuses_in_content

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == CAPABILITIES:
            self.capability_checks += 1
            body = {"type": "error", "error": {"type": "not_found_error", "message": "Not found"}}
            return httpx.Response(404, json=body)
        if self._refused(request):
            message = "content: holds a character this API refuses"
            body = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
            return httpx.Response(400, json=body)
        return await self._real.handle_async_request(request)

    def _refused(self, request: httpx.Request) -> bool:
        if self.refuses_in_content is None or request.method not in ("POST", "PATCH"):
            return False
        if "/memories" not in request.url.path:
            return False
        content = json.loads(request.content or b"{}").get("content")
        return isinstance(content, str) and self.refuses_in_content in content

    async def aclose(self) -> None:
        await self._real.aclose()


@asynccontextmanager
async def hosted_like_client(
    server: Any, refuses_in_content: str | None = None
) -> AsyncIterator[tuple[StoreClient, HostedLikeTransport]]:
    """A ``StoreClient`` of ``server`` (a ``ServerProcess``) that sees no memfs extension."""
    transport = HostedLikeTransport(refuses_in_content)
    config = ClientConfig(api_key=Secret(server.api_key), base_url=server.base_url)
    async with StoreClient(config, transport=transport) as client:
        yield client, transport
