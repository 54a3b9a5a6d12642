"""Helpers of the PostgreSQL tests: a client config, an HTTP client and a new store on a server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from support.servers import ServerProcess

from memfs.api.config import ClientConfig, Secret


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
