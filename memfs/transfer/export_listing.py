"""The listing of ``memfs export --git``: every version the repository lacks, with its content,
fetched page by page on the event loop and handled by one worker thread.

The loop only asks for pages and parses them; the worker streams each page's contents into
fast-import as blobs, hands each memory's newest content to ``TreeAhead`` and keeps the versions
without their contents. So the next page is asked for while the last one is handled: the export
lists about as fast as a bare listing, the server's time hiding the export's own work. At most
``PAGES_BEHIND`` pages wait for the worker (memory stays bounded when git is slower than the
server).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from datetime import datetime

import trio

from memfs.api import StoreClient
from memfs.contract.models import MemoryVersion
from memfs.transfer import export_git as git
from memfs.transfer.export_ahead import TreeAhead
from memfs.transfer.layout import file_path, unsafe

LIST_PAGE = 20  # the most a listing with contents returns (view=full)
PAGES_BEHIND = 8  # pages listed and not yet handled by the worker, at most


@dataclass
class Listing:
    """What the listing brought: ``pages`` counted on the loop, the rest filled by the worker
    thread alone and read once it is done."""

    pages: int = 0  # listing requests

    versions: list[MemoryVersion] = field(default_factory=list)  # newest first, no contents
    marks: dict[str, int] = field(default_factory=dict)  # version id -> fast-import blob mark
    newest: dict[str, bytes] = field(default_factory=dict)  # version id -> its content
    redacted_in_history: list[str] = field(default_factory=list)  # exported, redacted since
    seen: set[str] = field(default_factory=set)  # memories whose newest version was listed


async def list_new_versions(
    client: StoreClient,
    store_id: str,
    since: datetime | None,
    history: git.History,
    stream: git.FastImport,
    ahead: TreeAhead,
    on_page: Callable[[int], None],
) -> Listing:
    """The versions made at or after ``since`` that the repository lacks, newest first,
    without their contents: those went into git as blobs (``marks``); the content of each
    memory's newest version is kept (``newest``), for the working tree (as much as the store
    holds now, as a plain export). ``on_page(versions listed so far)`` after each page."""
    listing = Listing()
    handle = _PageHandler(listing, history, stream, ahead)
    behind: deque[Future[None]] = deque()
    pool = ThreadPoolExecutor(1, thread_name_prefix="memfs-export-pages")
    try:
        listed = 0
        cursor: str | None = None
        while True:
            page = await client.list_versions_page(
                store_id, created_gte=since, limit=LIST_PAGE, view="full", page=cursor
            )
            listing.pages += 1
            behind.append(pool.submit(handle, page.data))
            while behind and (behind[0].done() or len(behind) > PAGES_BEHIND):
                await _result(behind.popleft())
            listed += len(page.data)
            on_page(listed)
            if page.next_page is None:
                break
            cursor = page.next_page
        while behind:
            await _result(behind.popleft())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return listing


async def _result(future: Future[None]) -> None:
    """The worker's outcome for one page (its error raised here), waited for in a thread."""
    if not future.done():
        await trio.to_thread.run_sync(wait, [future])
    future.result()


class _PageHandler:
    """The worker's part: one page of versions at a time, in listing order."""

    def __init__(
        self, listing: Listing, history: git.History, stream: git.FastImport, ahead: TreeAhead
    ) -> None:
        self.listing = listing
        self.exported = history.exported
        self.stream = stream
        self.ahead = ahead

    def __call__(self, versions: list[MemoryVersion]) -> None:
        listing = self.listing
        files: list[tuple[str, bytes]] = []  # for ``ahead``: memories' newest contents
        for version in versions:
            first = version.memory_id not in listing.seen
            listing.seen.add(version.memory_id)
            if version.id in self.exported:
                if version.redacted:
                    listing.redacted_in_history.append(version.id)
                continue
            if version.content is not None:
                data = version.content.encode("utf-8")
                listing.marks[version.id] = self.stream.blob(data)  # may wait for git
                if first:
                    listing.newest[version.id] = data
                    if version.path is not None and unsafe(version.path) is None:
                        files.append((file_path(version.path), data))
                version = replace(version, content=None)  # memory holds metadata only
            listing.versions.append(version)
        self.ahead.submit(files)
