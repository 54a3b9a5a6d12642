"""List pages of the API: reading one page's answer, and following the pages of a listing.

A list endpoint answers ``{"data": [...], "next_page": cursor or null}``. ``page_from`` turns
such an answer into a ``memfs.contract.models.Page`` (a missing list is a malformed answer);
``Pager`` iterates over the items of every page, fetching the next one when it needs it, and
stops with an ApiError if the server hands out the same cursor twice (a loop, not a listing).

It must not send anything itself: the endpoint modules give it their ``fetch(cursor)``.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from memfs.api.transport import parse_answer
from memfs.contract.errors import ApiError
from memfs.contract.models import JsonObject, Page

log = logging.getLogger(__name__)

T = TypeVar("T")


def page_from(parse: Callable[[JsonObject], T], data: JsonObject, route: str) -> Page[T]:
    """One page of a list answer of ``route``, each item read by ``parse``."""
    items = data.get("data")
    if not isinstance(items, list):
        raise ApiError(f"malformed answer from {route}: no data list", status=200)
    next_page = data.get("next_page")
    return Page(
        data=[parse_answer(parse, item, route) for item in items],
        next_page=next_page if isinstance(next_page, str) and next_page else None,
    )


class Pager(Generic[T]):
    """Async iterator over the items of every page; fetches the next page when needed."""

    def __init__(self, fetch: Callable[[str | None], Awaitable[Page[T]]]) -> None:
        self._fetch = fetch
        self._buffer: deque[T] = deque()
        self._cursor: str | None = None
        self._done = False

    def __aiter__(self) -> Pager[T]:
        return self

    async def __anext__(self) -> T:
        while not self._buffer:
            if self._done:
                raise StopAsyncIteration
            page = await self._fetch(self._cursor)
            if page.next_page is not None and page.next_page == self._cursor:
                raise ApiError("the server returned the same page cursor twice", status=200)
            self._buffer.extend(page.data)
            self._cursor = page.next_page
            self._done = page.next_page is None
        return self._buffer.popleft()
