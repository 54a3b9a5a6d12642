"""Bulk fetch of directory contents when files are read one after another, and walk readahead.

Owns the heuristics and the pages: the first content miss in a directory is answered by one
retrieve (``cat one-file`` costs one request), unless the directory was just read (``readdir``:
``grep -r``, ``find -exec``); a miss right after a readdir, or a second miss in the same
directory within ``window`` seconds (``cat *``), starts a *prefetch* of the whole directory with
``view=full`` listing pages (20 memories a request, the API's maximum), which fills the clean
content cache page by page. Readers of that directory wait for the page that brings their
content instead of sending their own request. A directory is prefetched at most once per
``window`` (a failed or partial prefetch falls back to single retrieves).

*Walk readahead* (``grep -r``, ``find -exec cat``, ``tar c``): a reader that read a directory's
files in bulk and then lists the directory that comes next in a depth-first walk of sorted names
(the order ``readdir`` returns) is walking the tree. From then on the next ``lookahead``
directories of the walk are fetched ahead, concurrently, each with its ``view=full`` pages,
which bring its listing (memories and sub-directories, in path order) as well as its contents:
the walker's ``readdir`` and reads of those directories cost no request and do not wait for
the server. The walk never goes above the highest directory the walker listed, and ends when
the walker lists something else. Listing-only walks (``ls -R``, ``find``) read no file and
trigger nothing.

Clean data only: contents go into ``ContentCache`` by sha, complete listings into
``ListingCache`` (without contents). This module must not know about inodes, dirty data or FUSE.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import trio

from memfs import paths
from memfs.core.fetch.cache import ContentCache, Listing, ListingCache
from memfs.core.model.config import DEFAULT_LOOKAHEAD
from memfs.errors import ApiConnectionError, ApiError
from memfs.models import ListItem, Memory, MemoryPrefix
from memfs.store_api import StoreAPI

log = logging.getLogger(__name__)

PAGE_SIZE = 20  # the API's limit with view=full
WALK_MEMORY = 300.0  # seconds a readdir counts as part of a walk (the walk's top)


@dataclass
class _Prefetch:
    started: float
    done: bool = False
    listed: bool = False  # its complete listing went into the listing cache
    seen: set[str] = field(default_factory=set)  # shas delivered so far
    progress: trio.Event = field(default_factory=trio.Event)


def walk_order(directory: str) -> tuple[str, ...]:
    """Sort key of a depth-first walk in name order (what ``grep -r`` over readdir does)."""
    return tuple(directory.strip("/").split("/")) if directory != "/" else ()


class _Unknown(Exception):
    """The walk's next directory depends on a listing not fetched yet."""


class BulkFetcher:
    """See the module docstring. ``nursery`` None: a prefetch runs inside the reader's call,
    and there is no walk readahead."""

    def __init__(
        self,
        store: StoreAPI,
        contents: ContentCache,
        listings: ListingCache,
        *,
        window: float = 5.0,
        lookahead: int = DEFAULT_LOOKAHEAD,
        hidden_root_names: frozenset[str] = frozenset(),
    ) -> None:
        self.store = store
        self.contents = contents
        self.listings = listings
        self.window = window
        self.lookahead = lookahead
        self.hidden_root_names = hidden_root_names
        self.nursery: trio.Nursery | None = None
        self._misses: dict[str, float] = {}
        self._listed: dict[str, float] = {}  # readdir not yet followed by a miss
        self._readdirs: dict[str, float] = {}  # every recent readdir (the walk's top)
        self._running: dict[str, _Prefetch] = {}
        # a walk: where the walker is (its contents fetched in bulk), the highest directory it
        # listed (None until a second directory confirms the walk), what is fetched ahead of it
        self._walk_at: str | None = None
        self._walk_top_dir: str | None = None
        self._ahead: set[str] = set()
        self.prefetches = 0
        self.walk_prefetches = 0
        self.pages = 0

    def run_in(self, nursery: trio.Nursery) -> None:
        """Run background work in ``nursery`` from now on (the daemon's, once it runs)."""
        self.nursery = nursery

    # -- what the filesystem tells us ---------------------------------------------------------

    def listed(self, directory: str) -> None:
        """``directory`` was just read (readdir): a first miss there starts a prefetch, and a
        walk in progress moves on to it."""
        now = time.monotonic()
        self._listed[directory] = now
        self._readdirs[directory] = now
        if len(self._listed) > 1000:
            self._listed.clear()
        if len(self._readdirs) > 10000:
            self._readdirs = {d: t for d, t in self._readdirs.items() if now - t < WALK_MEMORY}
        self._follow_walk(directory)

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
            job = self._start(directory)
            self._end_walk()
            self._walk_at = directory  # a walk starts here if its successor is listed next
            if self.nursery is None:
                await self._run(directory, job)
        while True:
            cached = self.contents.get(sha)
            if cached is not None or sha in job.seen or job.done:
                return cached
            await job.progress.wait()

    async def listing(self, directory: str) -> Listing | None:
        """The listing a running prefetch of ``directory`` is about to bring, or None."""
        job = self._running.get(directory)
        if job is None or job.done:
            return None  # a finished one already put its listing in the cache
        while not job.done:
            await job.progress.wait()
        return self.listings.get(directory) if job.listed else None

    # -- walks --------------------------------------------------------------------------------

    def _follow_walk(self, directory: str) -> None:
        """The walker listed ``directory``: start, continue or end a walk."""
        if self._walk_at is None or self.nursery is None or self.lookahead <= 0:
            return
        if directory == self._walk_at:
            return  # listed again (another reader): no news
        if self._walk_top_dir is None:
            # not a walk yet: it is one if this is exactly what a depth-first walk lists next
            top = self._walk_top(directory)
            try:
                expected = self._next_in_walk(self._walk_at, top)
            except _Unknown:
                expected = None
            if expected != directory:
                self._end_walk()
                return
            self._walk_top_dir = top
        elif directory not in self._ahead and not self._later_in_walk(directory):
            log.debug("walk ends: %s listed after %s", directory, self._walk_at)
            self._end_walk()
            return
        self._walk_at = directory
        self._ahead = {d for d in self._ahead if walk_order(d) > walk_order(directory)}
        if self._recent_job(directory) is None:
            self._start(directory, walk=True)
        self._plan()

    def _later_in_walk(self, directory: str) -> bool:
        assert self._walk_at is not None and self._walk_top_dir is not None
        if not paths.is_below(directory, self._walk_top_dir):
            return False
        return walk_order(directory) > walk_order(self._walk_at)

    def _end_walk(self) -> None:
        self._walk_at = None
        self._walk_top_dir = None
        self._ahead.clear()

    def _plan(self) -> None:
        """Keep ``lookahead`` directories of the walk fetched ahead of the walker."""
        if self._walk_at is None or self._walk_top_dir is None or self.nursery is None:
            return
        for following in self._walk_after(self._walk_at, self._walk_top_dir):
            if len(self._ahead) >= self.lookahead:
                return
            if following in self._ahead:
                continue
            if self._recent_job(following) is None:
                self._start(following, walk=True)
            self._ahead.add(following)

    def _walk_top(self, directory: str) -> str:
        """The highest directory above ``directory`` whose every level the walker listed."""
        now = time.monotonic()
        top = directory
        while top != "/":
            parent = paths.parent(top)
            if now - self._readdirs.get(parent, -math.inf) > WALK_MEMORY:
                break
            top = parent
        return top

    def _subdirectories(self, directory: str) -> list[str]:
        listing = self.listings.stale(directory)
        if listing is None:
            raise _Unknown(directory)
        found = []
        for item in listing.items:
            if isinstance(item, MemoryPrefix):
                path = item.path.rstrip("/")
                if directory == "/" and paths.basename(path) in self.hidden_root_names:
                    continue
                found.append(path)
        return sorted(found)

    def _next_in_walk(self, current: str, top: str) -> str | None:
        """The directory a depth-first walk of ``top`` in name order lists after ``current``."""
        below = self._subdirectories(current)
        if below:
            return below[0]
        while current not in (top, "/"):
            parent = paths.parent(current)
            later = [d for d in self._subdirectories(parent) if d > current]
            if later:
                return later[0]
            current = parent
        return None

    def _walk_after(self, current: str, top: str) -> Iterator[str]:
        """Directories a walk of ``top`` lists after ``current``, in order, as far as listings
        are known: a directory whose listing is not known yet is yielded without its subtree
        (fetching it brings the listing; the next plan goes on from there)."""
        yield from self._subtree(current)
        while current not in (top, "/"):
            parent = paths.parent(current)
            for sibling in self._subdirectories(parent):
                if sibling > current:
                    yield sibling
                    yield from self._subtree(sibling)
            current = parent

    def _subtree(self, directory: str) -> Iterator[str]:
        try:
            below = self._subdirectories(directory)
        except _Unknown:
            return
        for sub in below:
            yield sub
            yield from self._subtree(sub)

    # -- fetching -----------------------------------------------------------------------------

    def _recent_job(self, directory: str) -> _Prefetch | None:
        job = self._running.get(directory)
        if job is not None and job.done and time.monotonic() - job.started > self.window:
            return None
        return job

    def _start(self, directory: str, *, walk: bool = False) -> _Prefetch:
        now = time.monotonic()
        if len(self._running) > 1000:
            recent = now - self.window
            self._running = {
                d: j for d, j in self._running.items() if not j.done or j.started > recent
            }
        job = _Prefetch(started=now)
        log.debug("bulk fetch of %s%s", directory, " (ahead of a walk)" if walk else "")
        self._running[directory] = job
        self.prefetches += 1
        if walk:
            self.walk_prefetches += 1
        if self.nursery is not None:
            self.nursery.start_soon(self._run, directory, job)
        return job

    async def _run(self, directory: str, job: _Prefetch) -> None:
        prefix = None if directory == "/" else paths.as_prefix(directory)
        items: list[ListItem] = []
        try:
            cursor: str | None = None
            while True:
                page = await self.store.list_directory_page(
                    prefix, with_content=True, cursor=cursor, limit=PAGE_SIZE
                )
                self.pages += 1
                for item in page.data:
                    if isinstance(item, Memory) and item.content is not None:
                        self.contents.put(item.content_sha256, item.content.encode("utf-8"))
                        job.seen.add(item.content_sha256)
                        item = dataclasses.replace(item, content=None)
                    items.append(item)
                job.progress.set()
                job.progress = trio.Event()
                cursor = page.next_page
                if not cursor:
                    break
            # the pages are a complete depth=1 listing: readdir needs no request of its own
            job.listed = self.listings.put(directory, Listing(job.started, tuple(items)))
        except (ApiError, ApiConnectionError) as exc:
            log.info("prefetch of %s stopped: %s", directory, exc)
        except Exception:  # a background task must not take the mount down; readers retrieve
            if self.nursery is None:
                raise
            log.warning("prefetch of %s failed", directory, exc_info=True)
        finally:
            job.done = True
            job.progress.set()
        self._plan()  # its sub-directories are known now: the walk can look further
