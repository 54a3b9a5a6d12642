"""Running the reference server: Hypercorn's trio worker plus the version-retention task.

``serve(settings)`` binds the listening socket, opens the storage (SQLite for a file path,
PostgreSQL for a ``postgresql://`` URL), starts the change feed, ``Retention`` and Hypercorn in one
trio nursery, and shuts them down on SIGINT/SIGTERM (ending open change streams first, so
Hypercorn's graceful shutdown does not wait for them, then closing the database cleanly). This
module owns process-level concerns only; it must not contain routes or SQL.

Start-up failures a person can fix (the address is taken or cannot be resolved, the database
cannot be opened) raise ``StartupError``: one line, never a password. The socket is bound here,
before Hypercorn runs, and handed to it as ``fd://N``, so a bind error is a plain ``OSError``
here rather than one buried in Hypercorn's exception groups. "memfs server listening on …" is
logged only once Hypercorn is accepting connections, followed (the console on) by the console's
URL (``console_urls``: a wildcard address becomes ``localhost``, which a browser can open).

Search: with ``semantic`` the storage's ``SearchIndex`` gets the bundled embedding model, and
documents indexed without it are embedded before the server listens (``backfill_search``).

Change feed: on SQLite the storage publishes each committed write to the hub (every write
passes through this one process); on PostgreSQL a ``PgListener`` relays ``NOTIFY`` from every
replica.

HTTP: Hypercorn speaks HTTP/1.1 only, unless ``h2c`` (``http2``); a request body gets
``body_timeout`` seconds (408 past it), and each API key at most ``max_streams_per_key`` open
change streams (429 past it). Headers are Hypercorn's to bound: a connection that has not sent
a whole request head within ``keep_alive_timeout`` seconds is closed.

Retention rule: a version older than ``retention_days`` is pruned, except the newest version of
each memory (which is also the head of every live memory), so a memory's latest state and the
``deleted`` record of a deleted memory are kept regardless of age. Pruning runs at start-up and
then every ``interval`` seconds.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import trio
from hypercorn.trio import serve as hypercorn_serve

from memfs.contract.errors import ServiceUnavailableError
from memfs.server.app import create_app
from memfs.server.backends.pg_listener import PgListener
from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.backends.storage import Storage
from memfs.server.db.clock import utc_now
from memfs.server.db.notify import (
    DEFAULT_HEARTBEAT,
    DEFAULT_MAX_STREAMS_PER_KEY,
    DEFAULT_STREAM_BUFFER,
    ChangeHub,
)
from memfs.server.http import http2
from memfs.server.http.auth import CONSOLE_PATH
from memfs.server.http.faults import FaultMiddleware, FaultSpec
from memfs.server.http.metrics import Metrics
from memfs.server.http.middleware import DEFAULT_BODY_TIMEOUT
from memfs.server.mcp.endpoint import DEFAULT_MCP_HOSTS
from memfs.server.search import SearchIndex

log = logging.getLogger(__name__)

DEFAULT_RETENTION_DAYS = 30.0
DEFAULT_PRUNE_INTERVAL = 3600.0


class StartupError(Exception):
    """The server cannot start for a reason a person can fix; ``str()`` is one line."""


def bind_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (not yet listening); ``StartupError`` if it cannot be.

    Like Hypercorn's own binding: IPv6 when the host contains ":" (brackets optional), else IPv4;
    a host name is resolved by ``bind``.
    """
    address = host.strip("[]")
    shown = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
    except socket.gaierror as exc:
        sock.close()
        reason = exc.strerror or str(exc)
        raise StartupError(
            f"cannot listen on {shown}: cannot resolve host {address!r} ({reason})"
        ) from None
    except OSError as exc:
        sock.close()
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise StartupError(f"cannot listen on {shown}: {reason[:1].lower()}{reason[1:]}") from None
    except (ValueError, UnicodeError) as exc:  # e.g. a NUL byte, an over-long IDNA label
        sock.close()
        raise StartupError(f"cannot listen on {shown}: invalid host ({exc})") from None
    return sock


def _one_line(text: str) -> str:
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def open_search(settings: ServerSettings) -> SearchIndex:
    """The search engine: BM25, fused with the bundled embedding model with ``--semantic``
    (``StartupError`` naming the extra when it is not installed)."""
    if not settings.semantic:
        return SearchIndex()
    from memfs.server.search.semantic import SemanticUnavailableError, load_embedder

    try:
        return SearchIndex(load_embedder())
    except SemanticUnavailableError as exc:
        raise StartupError(str(exc)) from None


async def open_storage(settings: ServerSettings, hub: ChangeHub) -> Storage:
    """The storage of ``settings.db``; ``StartupError`` if it cannot be opened."""
    backend = "PostgreSQL" if settings.is_postgres else "SQLite"
    where = f"cannot open {backend} database {settings.db_label}"
    search = open_search(settings)
    if settings.is_postgres:
        import psycopg
        import psycopg_pool

        from memfs.server.backends.postgres import PostgresStorage

        try:
            pg = await PostgresStorage.open(
                settings.db, pool_size=settings.pool_size, search=search
            )
            await pg.backfill_search()
            return pg
        except (
            psycopg.Error,
            psycopg_pool.PoolTimeout,
            ServiceUnavailableError,
            RuntimeError,
        ) as exc:
            message = _one_line(str(exc)) or type(exc).__name__
            password = settings.db_password
            if password:
                message = message.replace(password, "***")
            raise StartupError(f"{where}: {message}") from None
    try:
        lite = await SqliteStorage.open(settings.db, search=search, hub=hub)
        await lite.backfill_search()
        return lite
    except (sqlite3.Error, ServiceUnavailableError, RuntimeError, OSError) as exc:
        message = _one_line(str(exc)) or type(exc).__name__
        parent = os.path.dirname(os.path.abspath(settings.db))
        if not os.path.isdir(parent):
            message += f" (directory {parent} does not exist)"
        elif os.path.isdir(settings.db):
            message += " (it is a directory)"
        raise StartupError(f"{where}: {message}") from None


@dataclass(frozen=True)
class ServerSettings:
    db: str
    api_keys: list[str] = field(repr=False)
    host: str = "127.0.0.1"
    port: int = 8700
    retention_days: float = DEFAULT_RETENTION_DAYS
    prune_interval: float = DEFAULT_PRUNE_INTERVAL
    pool_size: int = 10  # PostgreSQL connections per replica
    heartbeat: float = DEFAULT_HEARTBEAT  # seconds between change-stream heartbeats
    body_timeout: float = DEFAULT_BODY_TIMEOUT  # seconds for a request body to arrive (408)
    max_streams_per_key: int = DEFAULT_MAX_STREAMS_PER_KEY  # open change streams (429)
    stream_buffer: int = DEFAULT_STREAM_BUFFER  # recent changes a store's streams share
    h2c: bool = False  # speak HTTP/2 cleartext too (``http2``)
    faults: str | None = None  # a fault spec (memfs.server.http.faults); None: no fault middleware
    admin_key: str | None = field(default=None, repr=False)  # opens fault control at run time
    semantic: bool = False  # fuse BM25 with the embedding model (the semantic extra)
    # the names the MCP endpoints may be reached by (Host and Origin checks: mcp.endpoint)
    mcp_hosts: tuple[str, ...] = DEFAULT_MCP_HOSTS
    console: bool = True  # serve the console at /console (memfs.server.console)

    @property
    def is_postgres(self) -> bool:
        return self.db.startswith(("postgresql://", "postgres://"))

    @property
    def db_label(self) -> str:
        """The database for logs: a PostgreSQL URL without its password."""
        if not self.is_postgres:
            return self.db
        scheme, _, rest = self.db.partition("://")
        userinfo, at, host = rest.rpartition("@")
        if at and ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":***"
        return f"{scheme}://{userinfo}{at}{host}"

    @property
    def db_password(self) -> str:
        """The password in a PostgreSQL URL, "" if none (to scrub it from error messages)."""
        if not self.is_postgres:
            return ""
        userinfo, at, _ = self.db.partition("://")[2].rpartition("@")
        return userinfo.split(":", 1)[1] if at and ":" in userinfo else ""


class Retention:
    """Prunes old versions at start-up and periodically (see the module docstring)."""

    def __init__(
        self,
        storage: Storage,
        *,
        retention_days: float,
        interval: float = DEFAULT_PRUNE_INTERVAL,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.storage = storage
        self.retention = timedelta(days=retention_days)
        self.interval = interval
        self.clock = clock

    async def prune_once(self) -> int:
        pruned = await self.storage.prune_versions(self.clock() - self.retention)
        if pruned:
            log.info("pruned %d memory versions older than %s", pruned, self.retention)
        return pruned

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            try:
                await self.prune_once()
            except ServiceUnavailableError:
                pass  # the storage logged the outage; the next round tries again
            except Exception:
                log.exception("pruning memory versions failed; will retry")
            await trio.sleep(self.interval)


def _first_signal(signals: AsyncIterator[int]) -> Callable[[], Awaitable[None]]:
    """A shutdown trigger that returns at the first signal ``signals`` receives."""

    async def wait() -> None:
        async for signum in signals:
            log.info("received %s, shutting down", signal.Signals(signum).name)
            return

    return wait


WILDCARD_HOSTS = ("0.0.0.0", "[::]")


def console_urls(binds: list[str]) -> list[str]:
    """The console's URL on each of Hypercorn's binds (``http://host:port``); a wildcard host
    (every interface) is no address to browse to, so it is shown as ``localhost``."""
    urls = []
    for bind in binds:
        scheme, _, netloc = bind.partition("://")
        host, _, port = netloc.rpartition(":")
        if host in WILDCARD_HOSTS:
            host = "localhost"
        url = f"{scheme}://{host}:{port}{CONSOLE_PATH}/"
        if url not in urls:
            urls.append(url)
    return urls


async def serve(
    settings: ServerSettings,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
    shutdown_trigger: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM (or ``shutdown_trigger`` returns).

    Raises ``StartupError`` if the address cannot be bound or the database cannot be opened;
    ``task_status.started`` gets Hypercorn's bound URLs once it is accepting connections.
    """
    if shutdown_trigger is not None:
        await _serve(settings, shutdown_trigger, task_status)
        return
    # The handlers go in before anything is served: a SIGTERM that arrives just after the
    # "listening" line must shut down cleanly (database closed), not kill the process.
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        await _serve(settings, _first_signal(signals), task_status)


async def _serve(
    settings: ServerSettings,
    trigger: Callable[[], Awaitable[None]],
    task_status: trio.TaskStatus[list[str]],
) -> None:
    hub = ChangeHub(
        heartbeat=settings.heartbeat,
        max_streams_per_key=settings.max_streams_per_key,
        stream_buffer=settings.stream_buffer,
    )
    sock = bind_socket(settings.host, settings.port)
    try:
        storage = await open_storage(settings, hub)
    except BaseException:
        sock.close()
        raise
    listener = PgListener(settings.db, hub) if settings.is_postgres else None

    async def shutdown() -> None:
        await trigger()
        hub.close()  # end the change streams, so graceful shutdown need not wait for them

    try:
        fault_middleware = None
        if settings.faults is not None:
            fault_middleware = FaultMiddleware.factory(FaultSpec.parse(settings.faults))
        app = create_app(
            storage,
            settings.api_keys,
            metrics=Metrics(),
            change_hub=hub,
            fault_middleware=fault_middleware,
            admin_key=settings.admin_key,
            body_timeout=settings.body_timeout,
            mcp_hosts=settings.mcp_hosts,
            console=settings.console,
        )
        http2.install()
        config = http2.ServerConfig()
        config.h2c = settings.h2c
        # Hypercorn wraps this descriptor in a socket of its own, which owns it from now on.
        config.bind = [f"fd://{sock.detach()}"]
        config.accesslog = None
        config.include_server_header = False  # which server and version: nobody's business
        config.errorlog = logging.getLogger("hypercorn.error")
        config.graceful_timeout = 5
        retention = Retention(
            storage, retention_days=settings.retention_days, interval=settings.prune_interval
        )
        async with trio.open_nursery() as nursery:

            async def run_http(*, task_status: trio.TaskStatus[list[str]]) -> None:
                await hypercorn_serve(
                    app,  # type: ignore[arg-type]
                    config,
                    shutdown_trigger=shutdown,
                    task_status=task_status,
                )
                nursery.cancel_scope.cancel()  # Hypercorn has shut down: stop the other tasks

            if listener is not None:
                await nursery.start(listener.run)
            await nursery.start(retention.run)
            binds: list[str] = await nursery.start(run_http)
            log.info(
                "memfs server listening on %s (database %s)", ", ".join(binds), settings.db_label
            )
            if settings.console:
                log.info(
                    "memfs console at %s (sign in with an API key)",
                    ", ".join(console_urls(binds)),
                )
            task_status.started(binds)
    finally:
        with trio.CancelScope(shield=True):
            await storage.aclose()
