"""The async client of the Memory Stores API: ``StoreClient``.

Owns the HTTP conversation: headers, one pooled ``httpx.AsyncClient``, timeouts, retries with
backoff, turning error envelopes into ``memfs.errors`` classes, following list pages, and making
retried writes safe (a create or delete whose answer was lost is reconciled, never duplicated).
It is the only module of memfs that imports httpx; no httpx exception leaves it.

It must not cache, know about files or inodes, or log the API key (nor put it in errors or
``repr``). Requests are logged at DEBUG by route template, never by URL, because path prefixes
in URLs may carry personal data.

Retry rules (attempts = 1 + ``max_retries``, waits from ``memfs.api.retry``, the policy the
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
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from types import TracebackType
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
import trio

from memfs.api import stats as outcomes
from memfs.api.config import API_VERSION, MEMORY_BETA, ClientConfig
from memfs.api.retry import NOT_APPLIED_STATUSES, RetryPolicy, retry_after_seconds
from memfs.api.stats import RequestStats
from memfs.errors import (
    ApiConnectionError,
    ApiError,
    ApiTimeoutError,
    BadRequestError,
    NotFoundError,
    PathConflictError,
    api_error_class,
)
from memfs.models import (
    SESSION_HEADER,
    JsonObject,
    ListItem,
    Memory,
    MemoryPrefix,
    MemoryStore,
    MemoryVersion,
    Page,
    format_time,
    list_item_from_json,
    sha256_hex,
)
from memfs.paths import as_prefix, parent

log = logging.getLogger(__name__)

# httpx logs every request at INFO with its full URL (path prefixes may be personal data);
# we log by route template at DEBUG instead. An explicit setting by the application wins.
_httpx_log = logging.getLogger("httpx")
if _httpx_log.level == logging.NOTSET:
    _httpx_log.setLevel(logging.WARNING)

T = TypeVar("T")

# Route templates: the keys of RequestStats and of the DEBUG log.
STORES = "/v1/memory_stores"
STORE = "/v1/memory_stores/{store}"
STORE_ARCHIVE = "/v1/memory_stores/{store}/archive"
MEMORIES = "/v1/memory_stores/{store}/memories"
MEMORY = "/v1/memory_stores/{store}/memories/{memory}"
VERSIONS = "/v1/memory_stores/{store}/memory_versions"
VERSION = "/v1/memory_stores/{store}/memory_versions/{version}"
VERSION_REDACT = "/v1/memory_stores/{store}/memory_versions/{version}/redact"
CAPABILITIES = "/v1/memfs/capabilities"  # a memfs extension (the hosted API answers 404)

STORE_ID_PREFIX = "memstore_"


class AmbiguousStoreError(BadRequestError):
    """A store name given where an id was expected matches more than one store."""


@dataclass
class _Reply:
    """The final answer of one logical request, after retries."""

    status: int
    data: JsonObject
    error: ApiError | None
    # True if an earlier attempt may have been applied by the server although its answer was
    # lost (broken connection after sending, timeout, 5xx). Only then is reconciliation fair.
    lost_answer: bool


class _Pager(Generic[T]):
    """Async iterator over the items of every page; fetches the next page when needed."""

    def __init__(self, fetch: Callable[[str | None], Awaitable[Page[T]]]) -> None:
        self._fetch = fetch
        self._buffer: deque[T] = deque()
        self._cursor: str | None = None
        self._done = False

    def __aiter__(self) -> _Pager[T]:
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


def _query(**params: Any) -> dict[str, str]:
    """Query parameters without the unset ones; booleans as ``true``/``false``."""
    out: dict[str, str] = {}
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, datetime):
            out[key] = format_time(value)
        else:
            out[key] = str(value)
    return out


def _request_id(response: httpx.Response, body: Any) -> str | None:
    if isinstance(body, dict) and isinstance(body.get("request_id"), str):
        return str(body["request_id"])
    header = response.headers.get("request-id") or response.headers.get("x-request-id")
    return str(header) if header else None


def _error_from(response: httpx.Response, route: str) -> ApiError:
    """The ``memfs.errors`` exception for an error answer (envelope or not)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    error_type: str | None = None
    message = f"HTTP {response.status_code} from {route}"
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        inner = body["error"]
        error_type = inner.get("type") if isinstance(inner.get("type"), str) else None
        if isinstance(inner.get("message"), str) and inner["message"]:
            message = inner["message"]
    cls = api_error_class(response.status_code, error_type, message)
    return cls(
        message,
        status=response.status_code,
        error_type=error_type,
        request_id=_request_id(response, body),
        body=body if isinstance(body, dict) else None,
        retry_after=retry_after_seconds(response.headers),
    )


def _with_content(memory: Memory, content: str | None) -> Memory:
    """Fill in ``content`` the server left out (view=basic) when we know it is what we sent."""
    known = content is not None and memory.content_sha256 == sha256_hex(content)
    return replace(memory, content=content) if memory.content is None and known else memory


class StoreClient:
    """Async client of one Memory Stores API endpoint (see the module docstring for retries).

    ``transport`` replaces the network (tests use ``httpx.MockTransport`` for faults the real
    server cannot produce); ``retry`` replaces the backoff settings.
    """

    def __init__(
        self,
        config: ClientConfig,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self._config = config
        self._timeout = config.timeout
        self._max_retries = config.max_retries
        self._deadline: float | None = None  # seconds for one request, retries included
        self._retry = retry or RetryPolicy()
        self.stats = RequestStats()
        self._owns_http = True
        headers = {
            **config.auth_headers(),
            "anthropic-version": API_VERSION,
            "anthropic-beta": MEMORY_BETA,
            "user-agent": config.user_agent,
            "accept": "application/json",
        }
        if config.session_id:
            headers[SESSION_HEADER] = config.session_id
        limits = httpx.Limits(
            max_connections=config.max_connections,
            max_keepalive_connections=config.max_connections,
        )
        # A user:password part of the base URL travels as Basic auth (as httpx would send it),
        # never in the URLs that httpx logs and puts in its errors.
        base_url = httpx.URL(config.base_url)
        basic = httpx.BasicAuth(base_url.username, base_url.password) if base_url.userinfo else None
        self._http = httpx.AsyncClient(
            base_url=base_url.copy_with(username=None, password=None),
            auth=basic,
            headers=headers,
            transport=transport,
            limits=limits,
            timeout=httpx.Timeout(config.timeout, connect=config.connect_timeout),
            follow_redirects=False,
        )

    def __repr__(self) -> str:
        return (
            f"StoreClient(base_url={self._config.shown_base_url!r}, "
            f"session_id={self._config.session_id!r}, timeout={self._timeout}, "
            f"max_retries={self._max_retries})"
        )

    @property
    def config(self) -> ClientConfig:
        return self._config

    @property
    def retry(self) -> RetryPolicy:
        """The retry policy (the change stream reconnects with it too)."""
        return self._retry

    async def aclose(self) -> None:
        """Close the connection pool (a client from ``with_options`` leaves it to its origin)."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> StoreClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def with_options(
        self,
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
        deadline: float | None = None,
    ) -> StoreClient:
        """A client with other deadlines, sharing this one's connection pool and stats.

        ``timeout`` bounds one attempt, ``deadline`` one request with its retries (no retry
        starts after it). ``None`` keeps the current value. Closing the derived client does not
        close the pool.
        """
        clone = object.__new__(StoreClient)
        clone.__dict__.update(self.__dict__)
        clone._owns_http = False
        if timeout is not None:
            clone._timeout = timeout
        if max_retries is not None:
            clone._max_retries = max_retries
        if deadline is not None:
            clone._deadline = deadline
        return clone

    # -----------------------------------------------------------------------------------------
    # The wire

    async def _exchange(
        self,
        method: str,
        route: str,
        path_args: dict[str, str],
        *,
        query: dict[str, str] | None = None,
        body: JsonObject | None = None,
        retry_unsafe: bool = True,
    ) -> _Reply:
        """Send one logical request with retries; return its final answer.

        Error answers are returned (not raised) so callers can reconcile; a transport failure
        that outlives the retries is raised as ApiConnectionError / ApiTimeoutError.
        ``retry_unsafe=False`` retries only failures where the request surely was not applied.
        """
        url = route.format(**{k: quote(v, safe="") for k, v in path_args.items()})
        # The whole attempt gets ``timeout`` seconds; connecting alone gets at most
        # ``connect_timeout`` of them.
        connect = min(self._config.connect_timeout, self._timeout)
        timeout = httpx.Timeout(self._timeout, connect=connect)
        lost_answer = False
        retry_number = 0
        give_up_at = None if self._deadline is None else trio.current_time() + self._deadline
        while True:
            started = time.perf_counter()
            try:
                with trio.fail_after(self._timeout):
                    response = await self._http.request(
                        method, url, params=query, json=body, timeout=timeout
                    )
                    await response.aread()
            except (trio.TooSlowError, httpx.TimeoutException) as exc:
                maybe_applied = not isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout)
                self.stats.record(method, route, outcomes.TIMEOUT)
                failure: ApiConnectionError = ApiTimeoutError(
                    f"{method} {route}: no answer within {self._timeout:g} s"
                )
                cause: BaseException = exc
            except httpx.TransportError as exc:
                maybe_applied = not isinstance(exc, httpx.ConnectError)
                self.stats.record(method, route, outcomes.CONNECTION_ERROR)
                failure = ApiConnectionError(
                    f"{method} {route}: cannot reach {self._config.shown_base_url}: "
                    f"{type(exc).__name__}: {self._config.hide_secrets(str(exc))}"
                )
                cause = exc
            else:
                status = response.status_code
                elapsed_ms = (time.perf_counter() - started) * 1000
                self.stats.record(method, route, outcomes.outcome_for_status(status), status)
                if status < 400:
                    data = self._json_body(response, route)
                    log.debug(
                        "%s %s -> %d in %.1f ms (request_id %s)",
                        method, route, status, elapsed_ms, _request_id(response, data),
                    )  # fmt: skip
                    return _Reply(status, data, None, lost_answer)
                error = _error_from(response, route)
                log.debug(
                    "%s %s -> %d %s in %.1f ms (request_id %s)",
                    method, route, status, error.error_type, elapsed_ms, error.request_id,
                )  # fmt: skip
                retryable = self._retry.should_retry_status(status, response.headers) and (
                    retry_unsafe or status in NOT_APPLIED_STATUSES
                )
                if not retryable or retry_number >= self._max_retries:
                    return _Reply(status, {}, error, lost_answer)
                if status not in NOT_APPLIED_STATUSES:
                    lost_answer = True
                retry_number += 1
                if not await self._backoff(method, route, retry_number, error, give_up_at):
                    return _Reply(status, {}, error, lost_answer)
                continue
            # A transport failure.
            log.debug("%s %s -> %s", method, route, failure)
            if retry_number >= self._max_retries or (maybe_applied and not retry_unsafe):
                raise failure from cause
            lost_answer = lost_answer or maybe_applied
            retry_number += 1
            if not await self._backoff(method, route, retry_number, failure, give_up_at):
                raise failure from cause

    async def _backoff(
        self,
        method: str,
        route: str,
        retry_number: int,
        error: BaseException,
        give_up_at: float | None,
    ) -> bool:
        """Wait before retry ``retry_number``; False (no wait) if it would start too late."""
        delay = self._retry.delay_after(retry_number, error)
        if not self._retry.within(give_up_at, trio.current_time(), delay):
            log.info("%s %s: no retry, it would start past the deadline: %s", method, route, error)
            return False
        self.stats.record_retry()
        log.info(
            "retry %d/%d of %s %s in %.2f s after: %s",
            retry_number, self._max_retries, method, route, delay, error,
        )  # fmt: skip
        await trio.sleep(delay)
        return True

    @asynccontextmanager
    async def open_stream(
        self,
        route: str,
        path_args: dict[str, str],
        *,
        headers: dict[str, str] | None = None,
        read_timeout: float,
    ) -> AsyncIterator[httpx.Response]:
        """``GET route`` as a stream (the change stream), on this client's pool, headers and
        stats. One attempt: the caller reconnects, with ``retry``. An error answer is raised as
        its ``memfs.errors`` class; transport failures, then or while reading, as
        ``ApiConnectionError`` / ``ApiTimeoutError``.
        """
        url = route.format(**{k: quote(v, safe="") for k, v in path_args.items()})
        timeout = httpx.Timeout(read_timeout, connect=self._config.connect_timeout)
        answered = False
        try:
            async with self._http.stream("GET", url, headers=headers, timeout=timeout) as response:
                answered = True
                status = response.status_code
                self.stats.record("GET", route, outcomes.outcome_for_status(status), status)
                log.debug("GET %s -> %d (stream)", route, status)
                if status != 200:
                    await response.aread()
                    raise _error_from(response, route)
                yield response
        except httpx.TimeoutException as exc:
            if not answered:
                self.stats.record("GET", route, outcomes.TIMEOUT)
            raise ApiTimeoutError(f"GET {route}: no data within {read_timeout:g} s") from exc
        except httpx.HTTPError as exc:  # broken, or undecodable: a reconnect may fix it
            if not answered:
                self.stats.record("GET", route, outcomes.CONNECTION_ERROR)
            raise ApiConnectionError(
                f"GET {route}: cannot reach {self._config.shown_base_url}: "
                f"{type(exc).__name__}: {self._config.hide_secrets(str(exc))}"
            ) from exc

    async def capabilities(self) -> JsonObject:
        """``GET /v1/memfs/capabilities``: the memfs extensions the server offers (one try)."""
        return await self.with_options(max_retries=0)._call("GET", CAPABILITIES, {})

    @staticmethod
    def _json_body(response: httpx.Response, route: str) -> JsonObject:
        if response.status_code == 204 or not response.content:
            return {}
        try:
            data = response.json()
        except ValueError:
            raise ApiError(
                f"the answer of {route} is not JSON", status=response.status_code
            ) from None
        if not isinstance(data, dict):
            raise ApiError(f"the answer of {route} is not a JSON object", status=200)
        return data

    async def _call(
        self,
        method: str,
        route: str,
        path_args: dict[str, str],
        *,
        query: dict[str, str] | None = None,
        body: JsonObject | None = None,
        retry_unsafe: bool = True,
    ) -> JsonObject:
        reply = await self._exchange(
            method, route, path_args, query=query, body=body, retry_unsafe=retry_unsafe
        )
        if reply.error is not None:
            raise reply.error
        return reply.data

    @staticmethod
    def _parse(parse: Callable[[JsonObject], T], data: JsonObject, route: str) -> T:
        try:
            return parse(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise ApiError(f"malformed answer from {route}: {exc!r}", status=200) from None

    def _page(self, parse: Callable[[JsonObject], T], data: JsonObject, route: str) -> Page[T]:
        items = data.get("data")
        if not isinstance(items, list):
            raise ApiError(f"malformed answer from {route}: no data list", status=200)
        next_page = data.get("next_page")
        return Page(
            data=[self._parse(parse, item, route) for item in items],
            next_page=next_page if isinstance(next_page, str) and next_page else None,
        )

    # -----------------------------------------------------------------------------------------
    # Stores

    async def create_store(
        self,
        name: str,
        *,
        description: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> MemoryStore:
        body: JsonObject = {"name": name}
        if description is not None:
            body["description"] = description
        if metadata is not None:
            body["metadata"] = metadata
        data = await self._call("POST", STORES, {}, body=body, retry_unsafe=False)
        return self._parse(MemoryStore.from_json, data, STORES)

    async def get_store(self, store_id: str) -> MemoryStore:
        data = await self._call("GET", STORE, {"store": store_id})
        return self._parse(MemoryStore.from_json, data, STORE)

    async def update_store(
        self,
        store_id: str,
        *,
        name: str | None = None,
        description: str | None = None,
        metadata: dict[str, str | None] | None = None,
    ) -> MemoryStore:
        """Patch a store; a metadata value of None deletes that key."""
        body: JsonObject = {}
        if name is not None:
            body["name"] = name
        if description is not None:
            body["description"] = description
        if metadata is not None:
            body["metadata"] = metadata
        data = await self._call("POST", STORE, {"store": store_id}, body=body)
        return self._parse(MemoryStore.from_json, data, STORE)

    async def archive_store(self, store_id: str) -> MemoryStore:
        data = await self._call("POST", STORE_ARCHIVE, {"store": store_id})
        return self._parse(MemoryStore.from_json, data, STORE_ARCHIVE)

    async def delete_store(self, store_id: str) -> None:
        reply = await self._exchange("DELETE", STORE, {"store": store_id})
        if reply.error is not None:
            if reply.lost_answer and isinstance(reply.error, NotFoundError):
                log.info("store %s was deleted by an attempt whose answer was lost", store_id)
                return
            raise reply.error

    async def list_stores_page(
        self,
        *,
        include_archived: bool = False,
        limit: int | None = None,
        page: str | None = None,
    ) -> Page[MemoryStore]:
        query = _query(include_archived=include_archived or None, limit=limit, page=page)
        data = await self._call("GET", STORES, {}, query=query)
        return self._page(MemoryStore.from_json, data, STORES)

    def list_stores(
        self, *, include_archived: bool = False, limit: int | None = None
    ) -> AsyncIterator[MemoryStore]:
        """Every store, following pages; ``limit`` is the page size."""

        async def fetch(cursor: str | None) -> Page[MemoryStore]:
            return await self.list_stores_page(
                include_archived=include_archived, limit=limit, page=cursor
            )

        return _Pager(fetch)

    async def resolve_store(self, id_or_name: str) -> MemoryStore:
        """The store with this id (``memstore_…``), else the one store with this exact name.

        Archived stores count. No match: NotFoundError; several: AmbiguousStoreError.
        """
        if id_or_name.startswith(STORE_ID_PREFIX):
            try:
                return await self.get_store(id_or_name)
            except NotFoundError:
                pass  # perhaps a store is named like an id
        matches = [
            store
            async for store in self.list_stores(include_archived=True, limit=100)
            if store.name == id_or_name
        ]
        if not matches:
            raise NotFoundError(f"no memory store with id or name {id_or_name!r}")
        if len(matches) > 1:
            ids = ", ".join(store.id for store in matches)
            raise AmbiguousStoreError(
                f"{len(matches)} memory stores are named {id_or_name!r} ({ids}); use an id"
            )
        return matches[0]

    # -----------------------------------------------------------------------------------------
    # Memories

    async def list_memories_page(
        self,
        store_id: str,
        *,
        path_prefix: str | None = None,
        depth: int | None = None,
        limit: int | None = None,
        view: str | None = None,
        page: str | None = None,
    ) -> Page[Memory | MemoryPrefix]:
        query = _query(path_prefix=path_prefix, depth=depth, limit=limit, view=view, page=page)
        data = await self._call("GET", MEMORIES, {"store": store_id}, query=query)
        return self._page(list_item_from_json, data, MEMORIES)

    def list_memories(
        self,
        store_id: str,
        *,
        path_prefix: str | None = None,
        depth: int | None = None,
        limit: int | None = None,
        view: str | None = None,
    ) -> AsyncIterator[Memory | MemoryPrefix]:
        """Every memory (and, with ``depth=1``, prefix) below ``path_prefix``, in path order."""

        async def fetch(cursor: str | None) -> Page[ListItem]:
            return await self.list_memories_page(
                store_id, path_prefix=path_prefix, depth=depth, limit=limit, view=view, page=cursor
            )

        return _Pager(fetch)

    async def find_memory(self, store_id: str, path: str) -> Memory | None:
        """The live memory at ``path`` (``view=basic``), or None. Lists the parent directory."""
        directory = as_prefix(parent(path))
        async for item in self.list_memories(
            store_id, path_prefix=None if directory == "/" else directory, depth=1, limit=100
        ):
            if isinstance(item, Memory) and item.path == path:
                return item
        return None

    async def create_memory(self, store_id: str, path: str, content: str) -> Memory:
        """Create a memory; never overwrites (PathConflictError if the path is taken)."""
        body: JsonObject = {"path": path, "content": content}
        reply = await self._exchange("POST", MEMORIES, {"store": store_id}, body=body)
        if reply.error is None:
            memory = self._parse(Memory.from_json, reply.data, MEMORIES)
            return _with_content(memory, content)
        error = reply.error
        if reply.lost_answer and isinstance(error, PathConflictError):
            existing = await self._created_by_lost_attempt(store_id, path, content, error)
            if existing is not None:
                return existing
        raise error

    async def _created_by_lost_attempt(
        self, store_id: str, path: str, content: str, error: PathConflictError
    ) -> Memory | None:
        """The memory an earlier attempt created, if the conflicting one is exactly ours."""
        if error.conflicting_memory_id:
            try:
                existing: Memory | None = await self.get_memory(
                    store_id, error.conflicting_memory_id, view="basic"
                )
            except NotFoundError:
                return None
        else:
            existing = await self.find_memory(store_id, path)
        if existing is None or existing.path != path:
            return None
        if existing.content_sha256 != sha256_hex(content):
            return None
        log.info("create of %s was applied by an attempt whose answer was lost", existing.id)
        return _with_content(existing, content)

    async def get_memory(self, store_id: str, memory_id: str, *, view: str = "full") -> Memory:
        data = await self._call(
            "GET", MEMORY, {"store": store_id, "memory": memory_id}, query=_query(view=view)
        )
        return self._parse(Memory.from_json, data, MEMORY)

    async def update_memory(
        self,
        store_id: str,
        memory_id: str,
        *,
        content: str | None = None,
        path: str | None = None,
        expected_sha256: str | None = None,
    ) -> Memory:
        """Change content and/or path (a rename keeps the id).

        With ``expected_sha256`` the update applies only if the stored content has that hash
        (else PreconditionFailedError), unless the memory already is as requested.
        """
        body: JsonObject = {}
        if content is not None:
            body["content"] = content
        if path is not None:
            body["path"] = path
        if expected_sha256 is not None:
            body["precondition"] = {"type": "content_sha256", "content_sha256": expected_sha256}
        data = await self._call("POST", MEMORY, {"store": store_id, "memory": memory_id}, body=body)
        return _with_content(self._parse(Memory.from_json, data, MEMORY), content)

    async def delete_memory(
        self, store_id: str, memory_id: str, *, expected_sha256: str | None = None
    ) -> None:
        reply = await self._exchange(
            "DELETE",
            MEMORY,
            {"store": store_id, "memory": memory_id},
            query=_query(expected_content_sha256=expected_sha256),
        )
        if reply.error is not None:
            if reply.lost_answer and isinstance(reply.error, NotFoundError):
                log.info("memory %s was deleted by an attempt whose answer was lost", memory_id)
                return
            raise reply.error

    # -----------------------------------------------------------------------------------------
    # Versions

    async def list_versions_page(
        self,
        store_id: str,
        *,
        memory_id: str | None = None,
        operation: str | None = None,
        session_id: str | None = None,
        api_key_id: str | None = None,
        created_gte: datetime | None = None,
        created_lte: datetime | None = None,
        limit: int | None = None,
        view: str | None = None,
        page: str | None = None,
    ) -> Page[MemoryVersion]:
        """One page of the store's versions, newest first."""
        query = _query(
            memory_id=memory_id,
            operation=operation,
            session_id=session_id,
            api_key_id=api_key_id,
            limit=limit,
            view=view,
            page=page,
            **{"created_at[gte]": created_gte, "created_at[lte]": created_lte},
        )
        data = await self._call("GET", VERSIONS, {"store": store_id}, query=query)
        return self._page(MemoryVersion.from_json, data, VERSIONS)

    def list_versions(
        self,
        store_id: str,
        *,
        memory_id: str | None = None,
        operation: str | None = None,
        session_id: str | None = None,
        api_key_id: str | None = None,
        created_gte: datetime | None = None,
        created_lte: datetime | None = None,
        limit: int | None = None,
        view: str | None = None,
    ) -> AsyncIterator[MemoryVersion]:
        """Every matching version, newest first, following pages."""

        async def fetch(cursor: str | None) -> Page[MemoryVersion]:
            return await self.list_versions_page(
                store_id,
                memory_id=memory_id,
                operation=operation,
                session_id=session_id,
                api_key_id=api_key_id,
                created_gte=created_gte,
                created_lte=created_lte,
                limit=limit,
                view=view,
                page=cursor,
            )

        return _Pager(fetch)

    async def get_version(self, store_id: str, version_id: str) -> MemoryVersion:
        data = await self._call("GET", VERSION, {"store": store_id, "version": version_id})
        return self._parse(MemoryVersion.from_json, data, VERSION)

    async def redact_version(self, store_id: str, version_id: str) -> MemoryVersion:
        args = {"store": store_id, "version": version_id}
        reply = await self._exchange("POST", VERSION_REDACT, args)
        if reply.error is not None:
            if reply.lost_answer and isinstance(reply.error, BadRequestError):
                version = await self.get_version(store_id, version_id)
                if version.redacted:
                    return version
            raise reply.error
        return self._parse(MemoryVersion.from_json, reply.data, VERSION_REDACT)
