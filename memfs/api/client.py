"""The async client of the Memory Stores API: ``StoreClient``, the one object callers hold.

Where each behaviour lives:
- ``transport``: the HTTP conversation (headers, the pooled ``httpx.AsyncClient``, timeouts,
  retries with backoff, lost answers, error answers as ``memfs.contract.errors`` classes, the change
  stream's GET, ``with_options``); no httpx exception leaves it;
- ``pagination``: list pages, and following them (``Pager``);
- ``memory_stores``, ``memories``, ``memory_versions``: the endpoints, one module per resource,
  each with the reconciliation of its retried writes; ``search``: the search extension;
- this module: ``StoreClient``, those endpoints on one transport, and ``capabilities`` (a memfs
  extension).

Retry rules (attempts = 1 + ``max_retries``, waits from ``memfs.contract.retry``, the policy the
change stream and the write-back queue use too):
- transient answers (408, 429, 5xx, 529) and transport failures are retried, with full-jitter
  exponential backoff, or the server's ``retry-after`` (capped);
- with a ``deadline`` (``with_options``), no retry is made that would start after it: a caller
  waiting on a syscall gets the error instead of a long ``retry-after`` sleep;
- reads, updates, deletes, archive and redact are idempotent and always retried;
- ``create_memory`` is retried too: if an earlier attempt may have been applied and the retry
  meets ``memory_path_conflict_error`` for a memory with the same path and content, that memory
  is the result (no duplicate, no spurious conflict);
- a ``delete_memory`` / ``delete_store`` retried after a lost answer that gets 404 is done;
- ``create_store`` has no natural key, so it is retried only when the server surely did not
  apply it (connection refused, 408, 429, 529); otherwise the error is raised.

The client must not cache, know about files or inodes, or log the API key (nor put it in errors
or ``repr``).
"""

from __future__ import annotations

import logging

from memfs.api.capabilities import server_offers
from memfs.api.memories import MemoryEndpoints
from memfs.api.memory_stores import AmbiguousStoreError, StoreEndpoints
from memfs.api.memory_versions import VersionEndpoints
from memfs.api.search import SearchEndpoints
from memfs.contract.models import JsonObject

__all__ = ["CAPABILITIES", "AmbiguousStoreError", "StoreClient"]

log = logging.getLogger(__name__)

CAPABILITIES = "/v1/memfs/capabilities"  # a memfs extension (the hosted API answers 404)
SEARCH_EXTENSION = "search"  # the search extension's name in them


class StoreClient(StoreEndpoints, MemoryEndpoints, VersionEndpoints, SearchEndpoints):
    """Async client of one Memory Stores API endpoint (see the module docstring for retries).

    ``StoreClient(config, transport=..., retry=...)``: ``transport`` replaces the network (tests
    use ``httpx.MockTransport`` for faults the real server cannot produce); ``retry`` replaces
    the backoff settings. Each base class holds the endpoints of one resource; all share the
    one ``Transport`` base (pool, stats, retries).
    """

    async def capabilities(self) -> JsonObject:
        """``GET /v1/memfs/capabilities``: the memfs extensions the server offers (one try)."""
        return await self.with_options(max_retries=0)._call("GET", CAPABILITIES, {})

    async def offers_search(self) -> bool:
        """Whether the server offers search (one try: a 404, error or timeout is a no)."""
        return await server_offers(self, SEARCH_EXTENSION)
