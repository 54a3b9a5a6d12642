"""Bulk fetch of a directory's contents when its files are read one after another.

Owns the heuristic and the pages: the first content miss in a directory is answered by one
retrieve (``cat one-file`` costs one request), unless the directory was just read (``readdir``:
``grep -r``, ``find -exec``); a miss right after a readdir, or a second miss in the same
directory within ``window`` seconds (``cat *``), starts a *prefetch* of the whole directory with
``view=full`` listing pages (20 memories a request, the API's maximum), which fills the clean
content cache page by page. Readers of that directory wait for the page that brings their
content instead of sending their own request. A directory is prefetched at most once per
``window`` (a failed or partial prefetch falls back to single retrieves).

Clean data only: everything goes into ``ContentCache`` by sha. This module must not know about
inodes, dirty data or FUSE.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field

import trio

from memfs import paths
from memfs.api import StoreClient
from memfs.cache import ContentCache
from memfs.errors import ApiConnectionError, ApiError
from memfs.models import Memory

log = logging.getLogger(__name__)

PAGE_SIZE = 20  # the API's limit with view=full


@dataclass
class _Prefetch:
    started: float
    done: bool = False
    seen: set[str] = field(default_factory=set)  # shas delivered so far
    progress: trio.Event = field(default_factory=trio.Event)


class BulkFetcher:
    """See the module docstring. ``nursery`` None: a prefetch runs inside the reader's call."""

    def __init__(
        self,
        client: StoreClient,
        store_id: str,
        contents: ContentCache,
        *,
        window: float = 5.0,
    ) -> None:
        self.client = client
        self.store_id = store_id
        self.contents = contents
        self.window = window
        self.nursery: trio.Nursery | None = None
        self._misses: dict[str, float] = {}
        self._listed: dict[str, float] = {}
        self._running: dict[str, _Prefetch] = {}
        self.prefetches = 0
        self.pages = 0

    def listed(self, directory: str) -> None:
        """``directory`` was just read (readdir): a first miss there starts a prefetch."""
        self._listed[directory] = time.monotonic()
        if len(self._listed) > 1000:
            self._listed.clear()

    async def get(self, directory: str, sha: str | None) -> bytes | None:
        """Content ``sha`` of a memory in ``directory`` from a prefetch, or None (retrieve it)."""
        if sha is None:
            return None
        now = time.monotonic()
        job = self._running.get(directory)
        if job is None or (now - job.started > self.window and job.done):
            last = max(
                self._misses.get(directory, -math.inf), self._listed.pop(directory, -math.inf)
            )
            self._misses[directory] = now
            if now - last > self.window:
                return None  # a lone miss: one retrieve
            job = _Prefetch(started=now)
            self._running[directory] = job
            self.prefetches += 1
            if self.nursery is not None:
                self.nursery.start_soon(self._run, directory, job)
            else:
                await self._run(directory, job)
        while True:
            cached = self.contents.get(sha)
            if cached is not None or sha in job.seen or job.done:
                return cached
            await job.progress.wait()

    async def _run(self, directory: str, job: _Prefetch) -> None:
        prefix = None if directory == "/" else paths.as_prefix(directory)
        try:
            cursor: str | None = None
            while True:
                page = await self.client.list_memories_page(
                    self.store_id,
                    path_prefix=prefix,
                    depth=1,
                    limit=PAGE_SIZE,
                    view="full",
                    page=cursor,
                )
                self.pages += 1
                for item in page.data:
                    if isinstance(item, Memory) and item.content is not None:
                        self.contents.put(item.content_sha256, item.content.encode("utf-8"))
                        job.seen.add(item.content_sha256)
                job.progress.set()
                job.progress = trio.Event()
                cursor = page.next_page
                if not cursor:
                    break
        except (ApiError, ApiConnectionError) as exc:
            log.info("prefetch of %s stopped: %s", directory, exc)
        finally:
            job.done = True
            job.progress.set()
