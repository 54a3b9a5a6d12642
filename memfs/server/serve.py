"""Running the reference server: Hypercorn's trio worker plus the version-retention task.

``serve(settings)`` opens the storage (SQLite for a file path, PostgreSQL for a
``postgresql://`` URL), starts the change feed, ``Retention`` and Hypercorn in one trio nursery,
and shuts them down on SIGINT/SIGTERM (ending open change streams first, so Hypercorn's graceful
shutdown does not wait for them, then closing the database cleanly). This module owns
process-level concerns only; it must not contain routes or SQL.

Change feed: on SQLite the storage is wrapped in ``NotifyingStorage`` (every write passes
through this one process); on PostgreSQL a ``PgListener`` relays ``NOTIFY`` from every replica.

Retention rule: a version older than ``retention_days`` is pruned, except the newest version of
each memory (which is also the head of every live memory), so a memory's latest state and the
``deleted`` record of a deleted memory are kept regardless of age. Pruning runs at start-up and
then every ``interval`` seconds.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import trio
from hypercorn.config import Config
from hypercorn.trio import serve as hypercorn_serve

from memfs.server.app import create_app
from memfs.server.changes import ChangeHub, NotifyingStorage, PgListener
from memfs.server.faults import FaultMiddleware, FaultSpec
from memfs.server.metrics import Metrics
from memfs.server.sqlite import SqliteStorage
from memfs.server.storage import Storage, utc_now

log = logging.getLogger(__name__)

DEFAULT_RETENTION_DAYS = 30.0
DEFAULT_PRUNE_INTERVAL = 3600.0


@dataclass(frozen=True)
class ServerSettings:
    db: str
    api_keys: list[str] = field(repr=False)
    host: str = "127.0.0.1"
    port: int = 8700
    retention_days: float = DEFAULT_RETENTION_DAYS
    prune_interval: float = DEFAULT_PRUNE_INTERVAL
    pool_size: int = 10  # PostgreSQL connections per replica
    heartbeat: float = 15.0  # seconds between change-stream heartbeats
    faults: str | None = None  # a fault spec (memfs.server.faults); None: no fault middleware

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
            except Exception:
                log.exception("pruning memory versions failed; will retry")
            await trio.sleep(self.interval)


async def _wait_for_signal() -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            log.info("received %s, shutting down", signal.Signals(signum).name)
            return


async def serve(
    settings: ServerSettings,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
    shutdown_trigger: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM (or ``shutdown_trigger`` returns)."""
    hub = ChangeHub(heartbeat=settings.heartbeat)
    listener: PgListener | None = None
    storage: Storage
    if settings.is_postgres:
        from memfs.server.postgres import PostgresStorage

        storage = await PostgresStorage.open(settings.db, pool_size=settings.pool_size)
        listener = PgListener(settings.db, hub)
    else:
        storage = NotifyingStorage(await SqliteStorage.open(settings.db), hub)
    trigger = shutdown_trigger or _wait_for_signal

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
        )
        config = Config()
        config.bind = [f"{settings.host}:{settings.port}"]
        config.accesslog = None
        config.errorlog = logging.getLogger("hypercorn.error")
        config.graceful_timeout = 5
        retention = Retention(
            storage, retention_days=settings.retention_days, interval=settings.prune_interval
        )
        log.info(
            "memfs server on %s:%d (database %s)", settings.host, settings.port, settings.db_label
        )
        async with trio.open_nursery() as nursery:
            if listener is not None:
                await nursery.start(listener.run)
            await nursery.start(retention.run)
            await hypercorn_serve(
                app,  # type: ignore[arg-type]
                config,
                shutdown_trigger=shutdown,
                task_status=task_status,
            )
            nursery.cancel_scope.cancel()  # Hypercorn has shut down: stop the retention loop
    finally:
        with trio.CancelScope(shield=True):
            await storage.aclose()
