"""Search of one store: by the server when it ranks queries itself, else by a local index of
the store's content; and the one text format of the results (``.search/`` files and
``memfs search`` print it).

``StoreSearch.search`` asks the store (``StoreAPI.search``) if it ``offers_search`` (asked
once), else ``LocalSearch``: a ``memfs.search.index.SearchIndex`` filled on the first search
from the same ``view=full`` directory pages as the mount's bulk fetch (20 memories a request,
the API's maximum), then brought up to date before each search by the store's recent changes
(one request; a memory whose content changed is read again, a moved one only re-pathed, a
deleted one dropped). More changes than one page holds (a gap) rebuild it. So a search sees
every change the store had when it started, the mount's own uploads included, whichever change
feed the mount runs (``docs/semantics.md``, ``.search``).

Results are ``Hit``s: path, score, description, memory id and the line of the content that
matches best (``best_line``). The text format (``render``, read back by ``parse``): one hit per
line, best first, four fields separated by a tab: path, relevance (``relevance``: 100 for the
best hit, the others their score as a percentage of its score), description (empty when there
is none), the best line; tabs and line breaks inside a field are spaces (``cut -f1`` lists paths).

It must not import pyfuse3 or know inodes (``memfs.search.tree`` serves the files).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Protocol

import trio

from memfs.contract import paths
from memfs.contract.errors import NotFoundError
from memfs.contract.models import Memory, MemoryPrefix, MemoryVersion
from memfs.contract.search_words import best_line, one_line, query_terms, relevance_of
from memfs.contract.store_api import StoreAPI
from memfs.search.index import SearchIndex

log = logging.getLogger(__name__)


class ContentCache(Protocol):
    """What the local index uses of a mount's content cache (``memfs.core.fetch.cache``, a floor
    above this package): contents by their sha256, shared so that a memory is fetched once."""

    def get(self, sha: str | None) -> bytes | None: ...

    def peek(self, sha: str | None) -> bool: ...

    def put(self, sha: str, content: bytes) -> None: ...


DEFAULT_LIMIT = 10
PAGE_SIZE = 20  # the API's limit with view=full (as the bulk fetch's)
CHANGES_PAGE = 100  # recent changes asked before a search; a full page is a gap: rebuild
OVERLAP = timedelta(seconds=2)  # versions committed out of order are not missed
BEFORE_TIMEOUT = 5.0  # seconds a search waits for the mount's pending uploads (server away)


@dataclass(frozen=True)
class Hit:
    """One result: where, how good (higher is better), and the line that matches best."""

    path: str
    score: float
    description: str = ""
    memory_id: str = ""
    line: str = ""

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def relevance(hits: list[Hit]) -> list[int]:
    """Each hit's score as people read it, a percentage of the best's (``relevance_of``)."""
    return relevance_of([hit.score for hit in hits])


def render(hits: list[Hit]) -> str:
    """The text of a result file: ``path<TAB>relevance<TAB>description<TAB>line``, one hit a
    line."""
    return "".join(
        f"{hit.path}\t{shown}\t{one_line(hit.description)}\t{one_line(hit.line)}\n"
        for hit, shown in zip(hits, relevance(hits), strict=True)
    )


def parse(text: str) -> list[Hit]:
    """The hits of a text ``render`` made: their relevance is their score (the text holds no
    other), no memory ids."""
    hits = []
    for row in text.splitlines():
        path, score, description, line = ([*row.split("\t", 3), "", "", ""])[:4]
        hits.append(Hit(path, float(score or 0), description, "", line))
    return hits


class LocalSearch:
    """A local index of one store, brought up to date before each search (module docstring)."""

    def __init__(
        self,
        store: StoreAPI,
        contents: ContentCache | None = None,
        *,
        on_size: Callable[[int], None] | None = None,
    ) -> None:
        self.store = store
        # told the index's size after each change of it (a mount charges it to its cache
        # budget: memfs.contract.cache_budget.PinnedCharge)
        self._on_size = on_size
        # a mount's clean contents by sha: what the fetch brings goes there too (reading a hit
        # costs no request), and a changed memory whose content is there (the mount's own
        # upload) is not read again
        self.contents = contents
        self.index = SearchIndex()
        self.built = False
        self.builds = 0  # full fetches of the store (the first search, and after a gap)
        self._since: datetime | None = None  # newest change applied
        self._seen: dict[str, datetime] = {}  # versions applied within OVERLAP of it
        self._lock = trio.Lock()  # one refresh at a time; searches wait for it

    async def search(
        self, query: str, *, limit: int = DEFAULT_LIMIT, path_prefix: str | None = None
    ) -> list[Hit]:
        async with self._lock:
            await self._refresh()
            if self._on_size is not None:
                self._on_size(self.index.bytes)
            found = self.index.search(query, limit=limit, path_prefix=path_prefix)
        return [
            Hit(hit.path, hit.score, hit.description, hit.memory_id, best_line(hit.content, query))
            for hit in found
        ]

    async def _refresh(self) -> None:
        if not self.built:
            await self._build()
            return
        gte = None if self._since is None else self._since - OVERLAP
        page = await self.store.recent_changes(since=gte, limit=CHANGES_PAGE)
        if page.next_page is not None or len(page.data) >= CHANGES_PAGE:
            log.info("search index: more changes than one page; fetching the store again")
            await self._build()
            return
        await self._apply([v for v in page.data if v.id not in self._seen])

    async def _build(self) -> None:
        """Fetch every memory with its content, directory by directory."""
        newest = await self.store.recent_changes(since=None, limit=1)  # before the fetch
        self.index.clear()
        self.built = False
        self._since = None
        self._seen = {}
        self._note(newest.data)
        directories: list[str | None] = [None]
        while directories:
            prefix = directories.pop()
            cursor: str | None = None
            while True:
                page = await self.store.list_directory_page(
                    prefix, with_content=True, cursor=cursor, limit=PAGE_SIZE
                )
                for item in page.data:
                    if isinstance(item, MemoryPrefix):
                        directories.append(paths.as_prefix(item.path))
                    else:
                        self._put(item)
                cursor = page.next_page
                if not cursor:
                    break
        self.built = True
        self.builds += 1
        log.debug("search index: %d memories fetched", len(self.index))

    def _put(self, memory: Memory) -> None:
        content = memory.content or ""
        self.index.put(memory.id, memory.path, content, sha=memory.content_sha256)
        if self.contents is not None and memory.content is not None:
            self.contents.put(memory.content_sha256, content.encode("utf-8"))

    def _cached(self, version: MemoryVersion) -> str | None:
        """The content of ``version`` from the mount's cache, if it is there and is text."""
        sha = version.content_sha256
        if self.contents is None or not self.contents.peek(sha):
            return None
        data = self.contents.get(sha)
        try:
            return None if data is None else data.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def _note(self, versions: list[MemoryVersion]) -> None:
        for version in versions:
            self._seen[version.id] = version.created_at
            if self._since is None or version.created_at > self._since:
                self._since = version.created_at
        if self._since is not None:
            horizon = self._since - OVERLAP
            self._seen = {k: t for k, t in self._seen.items() if t >= horizon}

    async def _apply(self, versions: list[MemoryVersion]) -> None:
        latest: dict[str, MemoryVersion] = {}
        for version in sorted(versions, key=lambda v: v.created_at):
            latest[version.memory_id] = version
        shas = self.index.shas() if latest else {}
        for memory_id, version in latest.items():
            if version.operation == "deleted":
                self.index.remove(memory_id)
            elif version.content_sha256 is not None and shas.get(memory_id) == (
                version.content_sha256
            ):
                if version.path is not None:
                    self.index.move(memory_id, version.path)  # moved, content unchanged
            elif version.path is not None and (cached := self._cached(version)) is not None:
                assert version.content_sha256 is not None  # _cached found it by that hash
                self.index.put(memory_id, version.path, cached, sha=version.content_sha256)
            else:
                try:
                    self._put(await self.store.read(memory_id))
                except NotFoundError:  # deleted since: its delete is among the next changes
                    self.index.remove(memory_id)
        self._note(versions)


class StoreSearch:
    """Search of one store, by the server if it can, else locally (module docstring).

    ``before``: awaited before each search, for at most ``BEFORE_TIMEOUT`` seconds (a mount
    uploads what it has pending, so that a search right after a write finds it).
    ``by_server=False``: never ask the server (``memfs mount --search local``); ``contents``:
    the mount's content cache (``LocalSearch``); ``on_size``: told the local index's size."""

    def __init__(
        self,
        store: StoreAPI,
        *,
        before: Callable[[], Awaitable[object]] | None = None,
        by_server: bool = True,
        contents: ContentCache | None = None,
        on_size: Callable[[int], None] | None = None,
    ) -> None:
        self.store = store
        self.local = LocalSearch(store, contents, on_size=on_size)
        self._before = before
        # None until the first search asks the store; False: always the local index
        self.by_server: bool | None = None if by_server else False

    async def search(
        self, query: str, *, limit: int = DEFAULT_LIMIT, path_prefix: str | None = None
    ) -> list[Hit]:
        if self._before is not None:
            # cancelling an upload is safe (it stays queued); the search goes on without it
            with trio.move_on_after(BEFORE_TIMEOUT):
                await self._before()
        if self.by_server is None:
            self.by_server = await self.store.offers_search()
        if not self.by_server:
            return await self.local.search(query, limit=limit, path_prefix=path_prefix)
        if not query_terms(query):
            return []  # the server refuses a query without a word; it finds nothing anyway
        results = await self.store.search(query, limit=limit, path_prefix=path_prefix)
        return [
            Hit(
                result.path,
                result.score,
                result.description,
                result.memory_id,
                best_line(result.content or "", query),
            )
            for result in results
        ]
