"""The async Memory Stores client: the only package of memfs that imports httpx.

``StoreClient`` (``client``) speaks the API: its ``transport`` sends with retries and maps
error answers to error classes, ``pagination`` follows list pages, and ``memory_stores``,
``memories`` and ``memory_versions`` hold the endpoints. ``changes`` reads the change stream;
``RequestStats`` counts what was sent; ``RetryPolicy`` holds the backoff settings. Nothing here
caches or knows files.
"""

from memfs.api.client import AmbiguousStoreError, StoreClient
from memfs.api.retry import RetryPolicy
from memfs.api.stats import RequestStats

__all__ = ["AmbiguousStoreError", "RequestStats", "RetryPolicy", "StoreClient"]
