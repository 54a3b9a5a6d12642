"""The async Memory Stores client: the only package of memfs that imports httpx.

``StoreClient`` (``client``) speaks the API: its ``transport`` sends with retries and maps
error answers to error classes, ``pagination`` follows list pages, and ``memory_stores``,
``memories`` and ``memory_versions`` hold the endpoints. ``changes`` reads the change stream;
``RequestStats`` counts what was sent; ``RetryPolicy`` holds the backoff settings. Nothing here
caches or knows files.

The names below are imported when first used (PEP 562): ``memfs.api.config``, which the CLI
reads before it spawns a mount daemon, must not cost httpx's import.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

# httpx imports its command-line tool when click, rich and pygments happen to be installed
# (7 MB of every daemon's memory, for a tool memfs never runs): it finds none (its own fallback)
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

if TYPE_CHECKING:
    from memfs.api.client import AmbiguousStoreError, StoreClient
    from memfs.api.stats import RequestStats
    from memfs.contract.retry import RetryPolicy

__all__ = ["AmbiguousStoreError", "RequestStats", "RetryPolicy", "StoreClient"]

_HOMES = {
    "AmbiguousStoreError": "memfs.api.client",
    "StoreClient": "memfs.api.client",
    "RetryPolicy": "memfs.contract.retry",
    "RequestStats": "memfs.api.stats",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
