"""The wire of ``StoreClient``: one logical request, with its retries, and the change stream's GET.

``Transport`` owns the HTTP conversation: the headers, one pooled ``httpx.AsyncClient``,
timeouts, retries with backoff (the waits of ``memfs.contract.retry``), noticing when an answer may
have been lost, and turning error answers into ``memfs.contract.errors`` classes. No httpx exception
leaves it. ``_exchange`` returns an error answer instead of raising it, with ``lost_answer``,
so that the endpoint classes can reconcile a retried write (``StoreClient``'s retry rules, in
``memfs.api.client``); ``_call`` raises it.

How a request is retried:
- transient answers (408, 429, 5xx, 529) and transport failures, with full-jitter exponential
  backoff or the server's ``retry-after`` (capped), at most ``max_retries`` times;
- with a ``deadline``, no retry is made that would start after it;
- ``retry_unsafe=False`` retries only what the server surely did not apply (connection refused,
  408, 429, 529).

It must not know the endpoints' meaning, cache, or log the API key (nor put it in errors or
``repr``). Requests are logged at DEBUG by route template, never by URL, because path prefixes
in URLs may carry personal data.
"""

from __future__ import annotations

import copy
import logging
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import quote

import httpx
import trio

from memfs.api import stats as outcomes
from memfs.api.config import API_VERSION, MEMORY_BETA, ClientConfig
from memfs.api.stats import RequestStats
from memfs.contract.errors import (
    ApiConnectionError,
    ApiError,
    ApiTimeoutError,
    AuthenticationError,
    PermissionDeniedError,
    api_error_class,
)
from memfs.contract.models import SESSION_HEADER, JsonObject, format_time
from memfs.contract.retry import NOT_APPLIED_STATUSES, RetryPolicy, retry_after_seconds

log = logging.getLogger(__name__)

# httpx logs every request at INFO with its full URL (path prefixes may be personal data);
# we log by route template at DEBUG instead. An explicit setting by the application wins.
_httpx_log = logging.getLogger("httpx")
if _httpx_log.level == logging.NOTSET:
    _httpx_log.setLevel(logging.WARNING)

T = TypeVar("T")


@dataclass
class Reply:
    """The final answer of one logical request, after retries."""

    status: int
    data: JsonObject
    error: ApiError | None
    # True if an earlier attempt may have been applied by the server although its answer was
    # lost (broken connection after sending, timeout, 5xx). Only then is reconciliation fair.
    lost_answer: bool


def query_params(**params: Any) -> dict[str, str]:
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


def parse_answer(parse: Callable[[JsonObject], T], data: JsonObject, route: str) -> T:
    """``parse(data)``; a field missing or of the wrong kind is a malformed answer (ApiError)."""
    try:
        return parse(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise ApiError(f"malformed answer from {route}: {exc!r}", status=200) from None


def _request_id(response: httpx.Response, body: Any) -> str | None:
    if isinstance(body, dict) and isinstance(body.get("request_id"), str):
        return str(body["request_id"])
    header = response.headers.get("request-id") or response.headers.get("x-request-id")
    return str(header) if header else None


def _error_from(response: httpx.Response, route: str) -> ApiError:
    """The ``memfs.contract.errors`` exception for an error answer (envelope or not)."""
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


def _json_body(response: httpx.Response, route: str) -> JsonObject:
    if response.status_code == 204 or not response.content:
        return {}
    try:
        data = response.json()
    except ValueError:
        raise ApiError(f"the answer of {route} is not JSON", status=response.status_code) from None
    if not isinstance(data, dict):
        raise ApiError(f"the answer of {route} is not a JSON object", status=200)
    return data


def _url(route: str, path_args: dict[str, str]) -> str:
    return route.format(**{k: quote(v, safe="") for k, v in path_args.items()})


class Transport:
    """The HTTP conversation of one client (module docstring): the base of ``StoreClient``,
    whose endpoint classes send with ``_call`` and ``_exchange``.

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
            **self._api_headers(),
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
        # Plain http with no proxy configured never speaks TLS: httpx's default context would
        # load the CA bundle for nothing, ~0.03 s of CPU at every start (a mount, a command).
        plain = base_url.scheme == "http" and not urllib.request.getproxies()
        self._http = httpx.AsyncClient(
            base_url=base_url.copy_with(username=None, password=None),
            auth=basic,
            verify=not plain,
            headers=headers,
            transport=transport,
            limits=limits,
            timeout=httpx.Timeout(config.timeout, connect=config.connect_timeout),
            follow_redirects=False,
        )

    def _api_headers(self) -> dict[str, str]:
        """The API's own headers on every request (a transport of another API replaces them)."""
        return {"anthropic-version": API_VERSION, "anthropic-beta": MEMORY_BETA}

    def _error_answer(self, response: httpx.Response, route: str) -> ApiError:
        """The exception an error answer means, read from this API's envelope (overridden)."""
        return _error_from(response, route)

    def _explained(self, error: ApiError) -> ApiError:
        """``error``, whose message says, for a refused key, where the key came from and which
        server refused it (the server's own words name neither)."""
        if isinstance(error, AuthenticationError | PermissionDeniedError):
            error.message = self._config.refusal(error.status, error.message)
        return error

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(base_url={self._config.shown_base_url!r}, "
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

    async def __aenter__(self) -> Self:
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
    ) -> Self:
        """A client with other deadlines, sharing this one's connection pool and stats.

        ``timeout`` bounds one attempt, ``deadline`` one request with its retries (no retry
        starts after it). ``None`` keeps the current value. Closing the derived client does not
        close the pool.
        """
        clone = copy.copy(self)
        clone._owns_http = False
        if timeout is not None:
            clone._timeout = timeout
        if max_retries is not None:
            clone._max_retries = max_retries
        if deadline is not None:
            clone._deadline = deadline
        return clone

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
        """``_exchange``, raising its error answer; the answer's JSON object."""
        reply = await self._exchange(
            method, route, path_args, query=query, body=body, retry_unsafe=retry_unsafe
        )
        if reply.error is not None:
            raise reply.error
        return reply.data

    async def _exchange(
        self,
        method: str,
        route: str,
        path_args: dict[str, str],
        *,
        query: dict[str, str] | None = None,
        body: JsonObject | None = None,
        retry_unsafe: bool = True,
    ) -> Reply:
        """Send one logical request with retries; return its final answer.

        Error answers are returned (not raised) so callers can reconcile; a transport failure
        that outlives the retries is raised as ApiConnectionError / ApiTimeoutError.
        ``retry_unsafe=False`` retries only failures where the request surely was not applied.
        """
        url = _url(route, path_args)
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
                failure = self._unreachable(method, route, exc)
                cause = exc
            else:
                status = response.status_code
                elapsed_ms = (time.perf_counter() - started) * 1000
                self.stats.record(method, route, outcomes.outcome_for_status(status), status)
                if status < 400:
                    data = _json_body(response, route)
                    log.debug(
                        "%s %s -> %d in %.1f ms (request_id %s)",
                        method, route, status, elapsed_ms, _request_id(response, data),
                    )  # fmt: skip
                    return Reply(status, data, None, lost_answer)
                error = self._explained(self._error_answer(response, route))
                log.debug(
                    "%s %s -> %d %s in %.1f ms (request_id %s)",
                    method, route, status, error.error_type, elapsed_ms, error.request_id,
                )  # fmt: skip
                retryable = self._retry.should_retry_status(status, response.headers) and (
                    retry_unsafe or status in NOT_APPLIED_STATUSES
                )
                if not retryable or retry_number >= self._max_retries:
                    return Reply(status, {}, error, lost_answer)
                if status not in NOT_APPLIED_STATUSES:
                    lost_answer = True
                retry_number += 1
                if not await self._backoff(method, route, retry_number, error, give_up_at):
                    return Reply(status, {}, error, lost_answer)
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

    def _unreachable(self, method: str, route: str, exc: httpx.HTTPError) -> ApiConnectionError:
        """The error for a request that got no usable answer; the message hides secrets."""
        return ApiConnectionError(
            f"{method} {route}: cannot reach {self._config.shown_base_url}: "
            f"{type(exc).__name__}: {self._config.hide_secrets(str(exc))}"
        )

    @asynccontextmanager
    async def open_stream(
        self,
        route: str,
        path_args: dict[str, str],
        *,
        headers: dict[str, str] | None = None,
        query: dict[str, str] | None = None,
        read_timeout: float,
    ) -> AsyncIterator[httpx.Response]:
        """``GET route`` as a stream (the change stream), on this client's pool, headers and
        stats. One attempt: the caller reconnects, with ``retry``. An error answer is raised as
        its ``memfs.contract.errors`` class; transport failures, then or while reading, as
        ``ApiConnectionError`` / ``ApiTimeoutError``.
        """
        url = _url(route, path_args)
        timeout = httpx.Timeout(read_timeout, connect=self._config.connect_timeout)
        answered = False
        try:
            async with self._http.stream(
                "GET", url, headers=headers, params=query, timeout=timeout
            ) as response:
                answered = True
                status = response.status_code
                self.stats.record("GET", route, outcomes.outcome_for_status(status), status)
                log.debug("GET %s -> %d (stream)", route, status)
                if status != 200:
                    await response.aread()
                    raise self._explained(self._error_answer(response, route))
                yield response
        except httpx.TimeoutException as exc:
            if not answered:
                self.stats.record("GET", route, outcomes.TIMEOUT)
            raise ApiTimeoutError(f"GET {route}: no data within {read_timeout:g} s") from exc
        except httpx.HTTPError as exc:  # broken, or undecodable: a reconnect may fix it
            if not answered:
                self.stats.record("GET", route, outcomes.CONNECTION_ERROR)
            raise self._unreachable("GET", route, exc) from exc
