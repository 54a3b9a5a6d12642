"""Client of the search endpoint, a memfs extension of the Memory Stores API (the hosted API
does not have it).

``StoreClient.offers_search`` asks ``GET /v1/memfs/capabilities`` (``"search": true``);
anything but a clear yes (404 on the hosted API, an error, a timeout) means "no": the mount, or
``memfs search``, searches its own copy of the store (``memfs.search.engine``).

``search_memories`` is ``POST /v1/memory_stores/{store}/memfs/search`` with ``{"query", "limit"
(1-100), "path_prefix" (optional)}``; the answer, ``{"type": "memfs_search_results", "data":
[{"memory": <memory with content>, "score": float}, ...]}``, best first (higher is better), is
returned as (memory, score) pairs. A search changes nothing, so it is retried like a read.

It must not send anything except through ``Transport``.
"""

from __future__ import annotations

import logging

from memfs.api.transport import Transport
from memfs.contract.models import JsonObject, Memory

log = logging.getLogger(__name__)

SEARCH = "/v1/memory_stores/{store}/memfs/search"  # the route template (RequestStats' key)


class SearchEndpoints(Transport):
    """The search method of ``StoreClient``, sent by its ``Transport``."""

    async def search_memories(
        self, store_id: str, query: str, *, limit: int = 10, path_prefix: str | None = None
    ) -> list[tuple[Memory, float]]:
        """The best ``limit`` memories (with content) for ``query``, best first, with scores."""
        body: JsonObject = {"query": query, "limit": limit}
        if path_prefix is not None:
            body["path_prefix"] = path_prefix
        data = await self._call("POST", SEARCH, {"store": store_id}, body=body)
        return [(Memory.from_json(hit["memory"]), float(hit["score"])) for hit in data["data"]]
