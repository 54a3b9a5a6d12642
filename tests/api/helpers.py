"""Helpers of the client tests: a StoreClient on a real server with fast retries."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from memfs.api import RetryPolicy, StoreClient
from memfs.api.config import ClientConfig, Secret

# Retries on the real server should not cost wall time.
FAST_RETRY = RetryPolicy(base_delay=0.001, max_delay=0.01)


def make_client(
    server: Any,
    *,
    key: str | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    **config: Any,
) -> StoreClient:
    cfg = ClientConfig(
        api_key=Secret(key or server.api_key), base_url=server.base_url, timeout=10.0, **config
    )
    return StoreClient(cfg, transport=transport, retry=FAST_RETRY)


def unique(prefix: str = "store") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"
