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
(the order ``readdir`` returns) is walking the tree. From then on the walk is fetched by
*sub-tree*: the walker's directory with everything below it, then each later sibling of it and
of the directories above it, each with ``depth=0`` ``view=full`` pages (20 memories of any
depth a request: a page spans several small directories, so a sub-tree never costs more
requests than its directories one by one). Up to ``lookahead`` sub-trees are fetched ahead of
the walker, at most ``MAX_IN_FLIGHT`` at once. When the directories read so far are small (at
most ``SMALL_DIRECTORY`` entries), sibling sub-trees would cost a page each for a few memories:
the directory that holds them is fetched as one stream instead. A sub-tree's pages bring the
listings of its directories (``memfs.core.fetch.subtree``) as well as their contents: the
walker's ``readdir`` and reads there cost no request, and wait only for the page that completes
what they need.
Walk fetches stop taking pages while they hold more than half the content cache ahead of the
walker (and nobody waits for them): the cache would evict what the walker has not read yet.
The walk never goes above the highest directory the walker listed, and ends when the walker
lists something else. Listing-only walks (``ls -R``, ``find``) read no file and trigger nothing.

Clean data only: contents go into ``ContentCache`` by sha, complete listings into
``ListingCache`` (without contents). A failed fetch only means readers ask for themselves. This
module must not know about inodes, dirty data or FUSE.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import trio

from memfs.contract import paths
from memfs.contract.errors import ApiConnectionError, ApiError
from memfs.contract.models import ListItem, Memory, MemoryPrefix
from memfs.contract.store_api import StoreAPI
from memfs.core.fetch.cache import ContentCache, Listing, ListingCache
from memfs.core.fetch.subtree import SubTreeListings
from memfs.core.model.config import DEFAULT_LOOKAHEAD

log = logging.getLogger(__name__)

PAGE_SIZE = 20  # the API's limit with view=full
WALK_MEMORY = 300.0  # seconds a readdir counts as part of a walk (the walk's top)
# Walk fetches in flight at once. A few overlap the server's latency, and its work with ours,
# so a walk is not one request after another; more would take a larger share of a server that
# serves a fleet of mounts, for little: four keep a walker reading from the cache busy.
MAX_IN_FLIGHT = 4
# At most this many entries a directory: MAX_IN_FLIGHT fetches of one directory each bring no
# more per round trip than one stream of pages of PAGE_SIZE over them all, for more requests.
SMALL_DIRECTORY = PAGE_SIZE // MAX_IN_FLIGHT
WALKER_PATIENCE = 30.0  # seconds a fetch far ahead waits for the walker, then stops


@dataclass
class _Prefetch:
    directory: str
    started: float
    subtree: bool = False  # every memory below ``directory`` (depth=0), not only its own
    walk: bool = False  # fetched ahead of a walk
    done: bool = False
    stopped: bool = False  # a walk fetch that ended early: it brought only what it ``listed``
    ended: float = 0.0
    listed: set[str] = field(default_factory=set)  # complete listings put in the cache
    seen: set[str] = field(default_factory=set)  # shas delivered so far
    # a directory fetch's sub-directories, once complete (a whole-store fetch goes on to them)
    subdirectories: tuple[str, ...] = ()
    waiters: int = 0  # readers waiting for it: it never pauses for the walker then
    progress: trio.Event = field(default_factory=trio.Event)

    def covers(self, directory: str) -> bool:
        if self.stopped and directory not in self.listed:
            return False
        return directory == self.directory or (
            self.subtree and paths.is_below(directory, self.directory)
        )

    def woke(self) -> None:
        self.progress.set()
        self.progress = trio.Event()


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
        self._running: dict[str, _Prefetch] = {}  # by the directory each fetches
        # a walk: where the walker is (its contents fetched in bulk), the highest directory it
        # listed (None until a second directory confirms the walk), the sub-trees fetched
        # ahead of it, and the bytes walk fetches brought for directories it has not listed
        self._walk_at: str | None = None
        self._walk_top_dir: str | None = None
        self._ahead: set[str] = set()
        self._bytes_ahead: dict[str, int] = {}
        self._nudge = trio.Event()  # the walker moved on, or waits: paused fetches look again
        self.prefetches = 0
        self.walk_prefetches = 0
        self.pages = 0
        self.most_in_flight = 0  # walk fetches running at once, at most (status, tests)

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
        job = self._job_for(directory)
        if job is None:
            now = time.monotonic()
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
                await self._run(job)
        while True:
            cached = self.contents.get(sha)
            if cached is not None or sha in job.seen or job.done or directory in job.listed:
                return cached
            await self._wait(job)

    async def listing(self, directory: str) -> Listing | None:
        """The listing a running prefetch of ``directory`` is about to bring, or None."""
        job = self._job_for(directory)
        if job is None or job.done:
            return None  # a finished one already put its listing in the cache
        while not job.done and directory not in job.listed:
            await self._wait(job)
        return self.listings.get(directory) if directory in job.listed else None

    async def _wait(self, job: _Prefetch) -> None:
        job.waiters += 1
        self._nudged()  # a fetch paused for the walker goes on: someone needs it
        try:
            await job.progress.wait()
        finally:
            job.waiters -= 1

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
            # small siblings: one stream of the directory that holds them (never above the
            # walk's top, nor above where the walker is: its top may be an earlier ``ls``)
            holder = paths.parent(directory)
            small = paths.is_below(directory, top) and self._small_directories(holder)
            if small and self._job_for(holder) is None:
                self._start(holder, walk=True, subtree=True)
        elif directory not in self._ahead and not self._later_in_walk(directory):
            log.debug("walk ends: %s listed after %s", directory, self._walk_at)
            self._end_walk()
            return
        self._walk_at = directory
        order = walk_order(directory)
        self._ahead = {d for d in self._ahead if walk_order(d) > order}
        self._bytes_ahead = {d: n for d, n in self._bytes_ahead.items() if walk_order(d) > order}
        self._nudged()
        if self._job_for(directory) is None:
            self._start(directory, walk=True, subtree=True)
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
        self._bytes_ahead.clear()
        self._nudged()

    def _nudged(self) -> None:
        self._nudge.set()
        self._nudge = trio.Event()

    def _plan(self) -> None:
        """Keep ``lookahead`` sub-trees of the walk fetched ahead of the walker, at most
        ``MAX_IN_FLIGHT`` walk fetches at once."""
        if self._walk_at is None or self._walk_top_dir is None or self.nursery is None:
            return
        in_flight = sum(1 for job in self._running.values() if job.walk and not job.done)
        for following in self._subtrees_after(self._walk_at, self._walk_top_dir):
            if len(self._ahead) >= self.lookahead or in_flight >= MAX_IN_FLIGHT:
                return
            if following in self._ahead:
                continue
            job = self._job_for(following)
            if job is not None and job.directory != following:
                continue  # inside a sub-tree fetched already
            if job is None:
                self._start(following, walk=True, subtree=True)
                in_flight += 1
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

    def _small_directories(self, holder: str) -> bool:
        """Whether the directories the walker listed below ``holder`` hold at most
        ``SMALL_DIRECTORY`` entries on average (then one stream of ``holder`` serves best)."""
        sizes = []
        for directory in self._readdirs:
            if paths.is_below(directory, holder):
                listing = self.listings.stale(directory)
                if listing is not None:
                    sizes.append(len(listing.items))
        return bool(sizes) and sum(sizes) <= SMALL_DIRECTORY * len(sizes)

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

    def _subtrees_after(self, current: str, top: str) -> Iterator[str]:
        """The sub-trees a walk of ``top`` reads after ``current``'s own files, in order:
        ``current``'s sub-directories, then the later siblings of ``current`` and of each
        directory above it up to ``top``, as far as listings are known."""
        try:
            yield from self._subdirectories(current)
            while current not in (top, "/"):
                parent = paths.parent(current)
                yield from (d for d in self._subdirectories(parent) if d > current)
                current = parent
        except _Unknown:
            return  # a listing not known (yet): a later plan goes on

    # -- fetching -----------------------------------------------------------------------------

    def _job_for(self, directory: str) -> _Prefetch | None:
        """The running or recent fetch that brings ``directory``: its own, or a sub-tree's."""
        for candidate in (directory, *reversed(paths.ancestors(directory)), "/"):
            job = self._running.get(candidate)
            if job is None or not job.covers(directory):
                continue
            if job.done and time.monotonic() - max(job.started, job.ended) > self.window:
                return None
            return job
        return None

    async def fetch_tree(self, *, in_flight: int) -> None:
        """Fetch the whole store now (a synced directory's first copy): the root's ``depth=1``
        ``view=full`` pages, then each of its directories as a sub-tree (``depth=0``), at most
        ``in_flight`` at once; their contents into the cache, their listings too. Returns when
        every fetch has ended (one that failed only means readers ask for themselves)."""
        root = self._start("/", background=False)
        await self._run(root)
        limiter = trio.CapacityLimiter(in_flight)

        async def subtree(directory: str) -> None:
            async with limiter:
                await self._run(self._start(directory, subtree=True, background=False))

        async with trio.open_nursery() as nursery:
            for directory in root.subdirectories:
                nursery.start_soon(subtree, directory)

    def _start(
        self,
        directory: str,
        *,
        walk: bool = False,
        subtree: bool = False,
        background: bool = True,
    ) -> _Prefetch:
        now = time.monotonic()
        if len(self._running) > 1000:
            recent = now - self.window
            self._running = {
                d: j for d, j in self._running.items() if not j.done or j.ended > recent
            }
        job = _Prefetch(directory, started=now, subtree=subtree, walk=walk)
        log.debug("bulk fetch of %s%s", directory, " (ahead of a walk)" if walk else "")
        self._running[directory] = job
        self.prefetches += 1
        if walk:
            self.walk_prefetches += 1
            in_flight = sum(1 for j in self._running.values() if j.walk and not j.done)
            self.most_in_flight = max(self.most_in_flight, in_flight)
        if self.nursery is not None and background:
            self.nursery.start_soon(self._run, job)
        return job

    async def _run(self, job: _Prefetch) -> None:
        try:
            if job.subtree:
                await self._fetch_subtree(job)
            else:
                await self._fetch_directory(job)
        except (ApiError, ApiConnectionError) as exc:
            log.info("prefetch of %s stopped: %s", job.directory, exc)
            job.stopped = job.walk  # the walk fetches again what a reader reaches next
        except Exception:  # a background task must not take the mount down; readers retrieve
            if self.nursery is None:
                raise
            log.warning("prefetch of %s failed", job.directory, exc_info=True)
            job.stopped = job.walk
        finally:
            job.done = True
            job.ended = time.monotonic()
            job.woke()
        self._plan()  # its sub-directories are known now: the walk can look further

    async def _fetch_directory(self, job: _Prefetch) -> None:
        """The ``depth=1`` pages of one directory: its memories and sub-directories."""
        prefix = None if job.directory == "/" else paths.as_prefix(job.directory)
        items: list[ListItem] = []
        cursor: str | None = None
        while True:
            page = await self.store.list_directory_page(
                prefix, with_content=True, cursor=cursor, limit=PAGE_SIZE
            )
            self.pages += 1
            items.extend(self._keep(job, item) for item in page.data)
            job.woke()
            cursor = page.next_page
            if not cursor:
                break
        # the pages are a complete depth=1 listing: readdir needs no request of its own
        self._put_listing(job, job.directory, tuple(items), job.started)
        job.subdirectories = tuple(
            item.path.rstrip("/") for item in items if isinstance(item, MemoryPrefix)
        )

    async def _fetch_subtree(self, job: _Prefetch) -> None:
        """The ``depth=0`` pages of a sub-tree, each directory's listing put once complete."""
        prefix = None if job.directory == "/" else paths.as_prefix(job.directory)
        tree = SubTreeListings(job.directory)
        asked: list[float] = []  # when each page's request began
        cursor: str | None = None
        while True:
            asked.append(time.monotonic())
            page = await self.store.list_subtree_page(prefix, cursor=cursor, limit=PAGE_SIZE)
            self.pages += 1
            for memory in page.data:
                kept = self._keep(job, memory)
                if isinstance(kept, Memory):
                    tree.add(kept)
            for directory, items, first in tree.passed():
                self._put_listing(job, directory, items, asked[max(0, first - 1)])
            job.woke()
            cursor = page.next_page
            if not cursor:
                break
            tree.next_page()
            if job.walk and not await self._room_ahead(job):
                log.debug("walk fetch of %s stopped: the walker stopped", job.directory)
                job.stopped = True
                return
        for directory, items, first in tree.rest():
            self._put_listing(job, directory, items, asked[max(0, first - 1)])
        if tree.disordered:  # the server's pages were not in path order: trust none of them
            log.info("pages of %s came out of path order: listings not kept", job.directory)
            for directory in job.listed:
                self.listings.drop(directory)
            job.listed.clear()

    def _keep(self, job: _Prefetch, item: ListItem) -> ListItem:
        """``item`` without its content, which goes into the content cache."""
        if not isinstance(item, Memory) or item.content is None:
            return item
        data = item.content.encode("utf-8")
        self.contents.put(item.content_sha256, data)
        job.seen.add(item.content_sha256)
        directory = paths.parent(item.path)
        walker = self._walk_at
        if job.walk and walker is not None and walk_order(directory) > walk_order(walker):
            self._bytes_ahead[directory] = self._bytes_ahead.get(directory, 0) + len(data)
        return dataclasses.replace(item, content=None)

    def _put_listing(
        self, job: _Prefetch, directory: str, items: tuple[ListItem, ...], started: float
    ) -> None:
        if self.listings.put(directory, Listing(started, items)):
            job.listed.add(directory)

    async def _room_ahead(self, job: _Prefetch) -> bool:
        """Wait while walk fetches hold more than half the content cache ahead of the walker
        (more would evict what it has not read yet), unless a reader waits for ``job``; False:
        the walker stopped (``job`` stops: what it did not bring is fetched when asked)."""
        while sum(self._bytes_ahead.values()) > self.contents.max_bytes // 2 and not job.waiters:
            nudge = self._nudge
            with trio.move_on_after(WALKER_PATIENCE):
                await nudge.wait()
            if not nudge.is_set():
                return False
        return True
