"""The async Memory Stores client: the only package of memfs that imports httpx.

``StoreClient`` speaks the API (retries, error classes, pagination); ``RequestStats`` counts
what it sent; ``RetryPolicy`` holds the backoff settings. Nothing here caches or knows files.
"""

from memfs.api.client import AmbiguousStoreError, StoreClient
from memfs.api.retry import RetryPolicy
from memfs.api.stats import RequestStats

__all__ = ["AmbiguousStoreError", "RequestStats", "RetryPolicy", "StoreClient"]
