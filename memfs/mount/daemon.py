"""The mount daemon: one process, one mount of one store.

Owns the startup checks (credentials, store, mount point), ``pyfuse3.init``, the trio nursery
(FUSE loop, write-back queue, change feed, signals), the readiness report to the parent
process, the pid file that ``memfs umount`` reads, and the final flush (bounded) before the
filesystem goes away. Kernel invalidations run here, from a worker thread only.

It must not implement file semantics (``vfs``) or errno mapping (``fuse_ops``).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pyfuse3
import trio

from memfs.api import AmbiguousStoreError, StoreClient
from memfs.api.config import ClientConfig, ConfigError
from memfs.api.store import MemoryStoresAPI, memory_stores_capabilities
from memfs.core.build import build_core
from memfs.core.model.budget import DEFAULT_LOCAL_BYTES
from memfs.core.model.config import VfsConfig
from memfs.core.store_core import Invalidation, StoreCore
from memfs.errors import (
    ApiConnectionError,
    ApiError,
    AuthenticationError,
    NotFoundError,
    PermissionDeniedError,
)
from memfs.mount.changefeed import ChangeFeed, choose_source
from memfs.mount.fuse_ops import FuseOperations
from memfs.mount.memory import MemoryReturn
from memfs.mount.owner import Owner
from memfs.mount.router import Router
from memfs.mount.statedir import MountError, check_mountpoint, is_dead_mount, state_path
from memfs.mount.status import (
    JournalsOfStore,
    RecentErrors,
    StatusWriter,
    render_report,
    report_problems,
    unmount_report,
)
from memfs.numbers import SINGLE_STORE
from memfs.private import NotPrivateError, private_dir, replace_file
from memfs.store_api import StoreAPI
from memfs.writeback.journal import Journal, JournalError, default_cache_dir
from memfs.writeback.workspace import WorkspaceId

log = logging.getLogger(__name__)

FINAL_FLUSH_SECONDS = 30.0
# transient failures at unmount are retried this long (a blip, a server restart), so that the
# report reaches those who wait for it in time: `memfs umount` (45 s), a session stop (30 s in all)
FINAL_RETRY_SECONDS = 10.0
DATABRICKS_API = "Databricks Agent Memory API"


@dataclass(frozen=True)
class MountOptions:
    store: str
    mountpoint: str
    read_only: bool = False
    debug: bool = False
    allow_other: bool = False
    owner: Owner = field(default_factory=Owner)  # of the files (--uid, --gid, --umask)
    api_key_file: str | None = None
    base_url: str | None = None  # else ANTHROPIC_BASE_URL, else the hosted API
    session_id: str | None = None
    grace: float = 2.0
    update_delay: float = 0.5
    fsync_timeout: float = FINAL_FLUSH_SECONDS  # fsync retries transient failures this long
    cache_dir: str | None = None  # journal (and later caches); default $XDG_CACHE_HOME/memfs
    cache_mb: float = 64.0  # clean content cache bound
    local_bytes: int = DEFAULT_LOCAL_BYTES  # local-only, refused, waiting files: else ENOSPC
    readahead_dirs: int = 4  # directories fetched ahead of a walk (memfs.core.fetch.prefetch)
    poll_interval: float = 1.0  # change feed while in use
    idle_poll_interval: float = 10.0  # change feed while idle
    change_stream: bool = True  # use the server's change stream when it offers one
    server_search: bool = True  # .search asks the server when it offers search
    # --api databricks: the entries of ``actor`` (and ``dbx_session``) of a Databricks store,
    # in the workspace of DATABRICKS_HOST/DATABRICKS_TOKEN or of ``profile``
    api: str = "memory-stores"
    actor: str | None = None
    dbx_session: str | None = None
    profile: str | None = None
    # upload the records of a journal of an earlier memfs, which recorded no workspace, to this
    # mount's workspace (never done unasked: they may have been written for another server)
    replay_legacy_journal: bool = False


@dataclass(frozen=True)
class OpenStore:
    """The mounted store, however it was opened: its two adapters (short deadlines for what a
    syscall waits on, long ones for uploads), names, and where its journal lives."""

    quick: StoreAPI
    uploads: StoreAPI
    name: str  # for log lines and ``memfs status``
    journal_key: str  # the journal's directory: one per (store, actor, session) on Databricks
    workspace: WorkspaceId  # the server: the journal's directory below the store's
    archived: bool = False

    @property
    def described(self) -> str:
        """The store in a log line: its name, and its id if that is not already in it."""
        store_id = self.quick.store_id
        return self.name if store_id in self.name else f"{self.name} ({store_id})"


def databricks_journal_key(store: str, actor: str, session: str | None) -> str:
    """One journal per mounted (store, actor, session): their paths are not each other's."""
    who = hashlib.sha256(f"{actor}\0{session or ''}".encode()).hexdigest()[:12]
    return f"databricks-{store}-{who}"


def describe_api_error(
    exc: BaseException, store: str, base_url: str, api: str = "Memory Stores API"
) -> str:
    key = "the Databricks token" if api == DATABRICKS_API else "the API key"
    if isinstance(exc, NotFoundError):
        return f"memory store {store!r} not found"
    if isinstance(exc, AmbiguousStoreError):
        return exc.message  # it names the matches
    if isinstance(exc, AuthenticationError):
        return f"{key} was refused (401 {exc.error_type})"
    if isinstance(exc, PermissionDeniedError):
        return f"{key} may not access this store (403 {exc.error_type})"
    if isinstance(exc, ApiConnectionError):
        return f"cannot reach the {api} at {base_url}"
    if isinstance(exc, ApiError):
        return f"the API refused the request: {exc}"
    return str(exc)


def make_invalidator() -> Callable[[list[Invalidation]], Awaitable[None]]:
    def work(items: list[Invalidation]) -> None:
        for kind, ino, name in items:
            try:
                if kind == "inode":
                    pyfuse3.invalidate_inode(ino, attr_only=False)
                else:
                    pyfuse3.invalidate_entry(ino, name)
            except OSError:  # FileNotFoundError: the kernel does not know it
                pass
            except Exception:
                log.exception("invalidation of %s %s failed", kind, ino)

    async def invalidate(items: list[Invalidation]) -> None:
        await trio.to_thread.run_sync(work, items)

    return invalidate


class Daemon:
    """Runs one mount until it is unmounted or signalled."""

    def __init__(self, options: MountOptions, ready: Callable[[str], None]) -> None:
        self.options = options
        self._ready = ready
        self.vfs: StoreCore | None = None
        self._stopping = False
        self._report_file = Path("/nonexistent")
        self._about: dict[str, str] = {}  # the report's mountpoint and store name, once known
        # the flushes of a signal and of the end of the FUSE loop: one at a time, one deadline
        self._flush_lock = trio.Lock()
        self._flush_deadline: float | None = None
        self._retry_deadline = 0.0
        self._flush_errors: list[str] = []
        self._requests_flushed: int | None = None  # the queue's ``requests`` a pass saw

    async def run(self) -> int:
        opts = self.options
        async with self._open_store() as store:
            read_only = opts.read_only or store.archived
            # a read-only mount never writes, not even a replay: its journal stays untouched
            journal, kept = (None, None) if read_only else self._open_journal(store)
            untouched = self._leave_journal(store) if read_only else 0
            journals = self._journals_not_replayed(store)
            vfs: StoreCore = build_core(
                store.quick,
                VfsConfig(
                    read_only=read_only,
                    grace=opts.grace,
                    update_delay=opts.update_delay,
                    fsync_timeout=opts.fsync_timeout,
                    cache_bytes=int(opts.cache_mb * 1024 * 1024),
                    local_bytes=opts.local_bytes,
                    walk_lookahead=opts.readahead_dirs,
                    server_search=opts.server_search,
                    uid=os.getuid() if opts.owner.uid is None else opts.owner.uid,
                    gid=os.getgid() if opts.owner.gid is None else opts.owner.gid,
                    umask=opts.owner.umask,
                ),
                upload_store=store.uploads,
                journal=journal,
                kept_dir=kept,
                untouched=untouched,
                invalidator=make_invalidator(),
                numbers=SINGLE_STORE,
            )
            if journal is not None:
                await self._replay(vfs)  # before mounting: nobody waits on a mount not serving
            self.vfs = vfs
            options = set(pyfuse3.default_options)
            options |= {"fsname=memfs", "subtype=memfs", "default_permissions"}
            # libfuse's default, said out loud so that no option we add drops it: a file an
            # agent made or chmodded here never runs with its set-user-ID bit, nor is a device.
            options |= {"nosuid", "nodev"}
            if read_only:
                options.add("ro")
            if opts.debug:
                options.add("debug")
            if opts.allow_other:
                # root needs no user_allow_other in /etc/fuse.conf; other users do (fusermount3)
                options.add("allow_other")
                log.warning(
                    "allow_other: every user of this machine can read the store through %s",
                    opts.mountpoint,
                )
            elif opts.owner.uid not in (None, os.getuid()):
                log.warning(
                    "the files belong to uid %d, but without --allow-other only uid %d can use "
                    "the mount",
                    opts.owner.uid,
                    os.getuid(),
                )
            ops = Router()
            ops.serve(0, FuseOperations(vfs))  # slot 0: the store is the mount's root
            # computed before init: once mounted, a syscall on the mount point from this process
            # would wait for the FUSE loop that has not started yet
            pid_file = state_path(opts.mountpoint, "pid")
            self._report_file = state_path(opts.mountpoint, "report.json")
            self._report_file.unlink(missing_ok=True)  # an earlier daemon's: not ours to leave
            status_file = state_path(opts.mountpoint, "status")
            try:
                pyfuse3.init(ops, opts.mountpoint, options)
            except RuntimeError as exc:
                raise MountError(f"cannot mount on {opts.mountpoint}: {exc}") from None
            replace_file(pid_file, f"{os.getpid()}\n{opts.mountpoint}\n".encode(), "pid file")
            log.info(
                "mounted store %s on %s%s",
                store.described,
                opts.mountpoint,
                " read-only" if read_only else "",
            )
            unmounted = False
            try:
                async with trio.open_nursery() as nursery:
                    await vfs.start(nursery)
                    errors = RecentErrors()
                    logging.getLogger("memfs").addHandler(errors)
                    self._about = {"mountpoint": opts.mountpoint, "store_name": store.name}
                    writer = StatusWriter(
                        status_file,
                        vfs,
                        None,  # the change feed's, once it has started
                        errors,
                        mountpoint=opts.mountpoint,
                        store_name=store.name,
                        journals=journals,
                    )
                    await nursery.start(writer.run)
                    # removed local-only or refused files: their memory goes back to the system
                    await nursery.start(MemoryReturn(lambda: vfs.local_bytes).run)
                    # started (handlers installed) before "ok": a SIGTERM right after a mount
                    # reports ready must flush and unmount, not kill the process
                    await nursery.start(self._signals)
                    # the feed starts while the mount serves: its probe and the stream's
                    # "ready" (up to 10 s) never delay the mount
                    nursery.start_soon(self._start_change_feed, vfs, writer, nursery)
                    self._ready("ok")
                    unmounted = await self._serve() and not self._stopping
                    if unmounted and is_dead_mount(opts.mountpoint):  # its connection is gone
                        log.warning(
                            "the kernel connection of %s was aborted; the mount point stays "
                            "disconnected until: memfs umount %s",
                            opts.mountpoint,
                            opts.mountpoint,
                        )
                    await self._final_flush(vfs)
                    nursery.cancel_scope.cancel()
            finally:
                pyfuse3.close(unmount=not unmounted)
                pid_file.unlink(missing_ok=True)
                if journal is not None:
                    journal.close()
                log.info("unmounted %s", opts.mountpoint)
        return 0

    @asynccontextmanager
    async def _open_store(self) -> AsyncIterator[OpenStore]:
        """The store named by the options, opened (a ``MountError`` with a one-line message if
        it cannot be), for the lifetime of the mount."""
        opts = self.options
        if opts.api == "databricks":
            async with self._open_databricks() as store:
                yield store
            return
        try:
            config = ClientConfig.from_env(
                api_key_file=opts.api_key_file, base_url=opts.base_url, session_id=opts.session_id
            )
        except ConfigError as exc:
            raise MountError(str(exc)) from None
        check_mountpoint(opts.mountpoint)
        async with StoreClient(config) as client:
            # syscalls wait on these clients: a long retry-after is an error, not a wait
            quick = client.with_options(timeout=5.0, max_retries=1, deadline=10.0)
            try:
                found = await quick.resolve_store(opts.store)
            except (ApiError, ApiConnectionError) as exc:
                raise MountError(
                    describe_api_error(exc, opts.store, config.shown_base_url)
                ) from None
            capabilities = await memory_stores_capabilities(quick)
            yield OpenStore(
                quick=MemoryStoresAPI(
                    client.with_options(timeout=10.0, max_retries=2, deadline=30.0),
                    found.id,
                    capabilities,
                ),
                uploads=MemoryStoresAPI(
                    client.with_options(timeout=60.0, max_retries=4), found.id, capabilities
                ),
                name=found.name,
                journal_key=found.id,
                workspace=WorkspaceId.of(opts.api, config.base_url),
                archived=found.archived,
            )

    @asynccontextmanager
    async def _open_databricks(self) -> AsyncIterator[OpenStore]:
        from memfs.api.databricks import open_store

        opts = self.options
        assert opts.actor is not None, "the command line requires --actor"
        check_mountpoint(opts.mountpoint)
        async with contextlib.AsyncExitStack() as stack:
            try:
                opened = await stack.enter_async_context(
                    open_store(opts.store, opts.actor, opts.dbx_session, profile=opts.profile)
                )
            except ConfigError as exc:
                raise MountError(str(exc)) from None
            except (ApiError, ApiConnectionError) as exc:
                raise MountError(
                    describe_api_error(exc, opts.store, "the Databricks workspace", DATABRICKS_API)
                ) from None
            session = f", session {opts.dbx_session}" if opts.dbx_session else ""
            yield OpenStore(
                quick=opened.quick,
                uploads=opened.uploads,
                name=f"{opts.store} (actor {opts.actor}{session})",
                journal_key=databricks_journal_key(opts.store, opts.actor, opts.dbx_session),
                workspace=WorkspaceId.of(opts.api, opened.base_url),
            )

    async def _start_change_feed(
        self, vfs: StoreCore, writer: StatusWriter, nursery: trio.Nursery
    ) -> None:
        """Choose and start the change feed, then run it in ``nursery``."""
        opts = self.options
        source = await choose_source(vfs, nursery, use_stream=opts.change_stream)
        vfs.feed_starts()  # what was fetched before it is not vouched for
        feed = ChangeFeed(
            vfs, source, interval=opts.poll_interval, idle_interval=opts.idle_poll_interval
        )
        await nursery.start(feed.run)
        await nursery.start(feed.run_due_invalidations)
        writer.feed = feed
        with contextlib.suppress(OSError):  # else at the next second
            writer.write()  # `memfs status` names the feed at once

    def _cache_dir(self) -> Path:
        return Path(self.options.cache_dir) if self.options.cache_dir else default_cache_dir()

    def _open_journal(self, store: OpenStore) -> tuple[Journal, Path]:
        """The journal of the store on this workspace, and this mount's directory of refused
        files beside it (one per journal slot: no other running mount writes there or removes
        what is in it)."""
        try:
            journal = Journal.open(
                self._cache_dir(),
                store.journal_key,
                store.workspace,
                replay_legacy=self.options.replay_legacy_journal,
            )
        except (JournalError, OSError) as exc:
            raise MountError(f"write-back journal: {exc}") from None
        kept = journal.directory.parent / "kept" / journal.directory.name
        try:
            for directory in (kept.parent, kept):
                if os.path.lexists(directory):
                    why = ": refused content copied there would be theirs to read"
                    private_dir(directory, "directory of refused files", why=why, create=False)
        except NotPrivateError as exc:
            journal.close()
            raise MountError(f"write-back journal: {exc}") from None
        log.info("write-back journal of %s in %s", store.workspace, journal.directory)
        return journal, kept

    def _leave_journal(self, store: OpenStore) -> int:
        """Read-only: leave the journal as it is (records for the next read-write mount);
        returns how many records it holds."""
        directory, count = Journal.pending(self._cache_dir(), store.journal_key, store.workspace)
        if count:
            log.warning(
                "read-only mount: %d write-back journal record(s) of an earlier mount in %s are "
                "left untouched (not uploaded); the next read-write mount of the store uploads "
                "them",
                count,
                directory,
            )
        else:
            log.info("read-only mount: no write-back journal (nothing is ever written)")
        return count

    def _journals_not_replayed(self, store: OpenStore) -> JournalsOfStore:
        """The store's journals that this mount leaves alone (other workspaces', and one of an
        earlier memfs that recorded none), each said once in the log; for ``memfs status``."""
        waiting = Journal.not_replayed(self._cache_dir(), store.journal_key, store.workspace)
        for journal in waiting:
            if journal.workspace is not None:
                log.warning(
                    "%d write-back journal record(s) in %s were written for %s, not this "
                    "mount's %s: not uploaded here; a mount of that workspace uploads them",
                    journal.records,
                    journal.directory,
                    journal.workspace,
                    store.workspace,
                )
            else:
                log.warning(
                    "%d write-back journal record(s) in %s were written by an earlier memfs, "
                    "which recorded no workspace: not uploaded; if they are for %s, mount with "
                    "--replay-legacy-journal to upload them",
                    journal.records,
                    journal.directory,
                    store.workspace,
                )
        return JournalsOfStore(store.workspace, waiting)

    async def _replay(self, vfs: StoreCore) -> None:
        """Upload what an earlier daemon acknowledged and did not upload (before mounting)."""
        count = vfs.load_journal()
        if not count:
            return
        log.info("replaying %d journal records of an earlier mount", count)
        with trio.move_on_after(FINAL_FLUSH_SECONDS):
            errors = await vfs.flush_all()
            for error in errors:
                log.warning("replay: %s (kept, retried in the background)", error)

    async def _serve(self) -> bool:
        """Run the FUSE loop until the mount ends, however it ends (unmounted, the connection
        aborted, a signal, an error): what is pending is uploaded next all the same. True if
        the kernel connection is gone (a syscall on the mount point cannot wait for us then)."""
        try:
            await pyfuse3.main()
        except Exception as exc:  # an ExceptionGroup of pyfuse3's nursery, or one error
            if not _connection_lost(exc):
                log.error("the FUSE loop failed; flushing before exiting", exc_info=exc)
                return False
            log.warning("the kernel connection ended (%s); flushing before exiting", exc)
        return True

    async def _flush(self, vfs: StoreCore) -> None:
        """Upload what is pending, deferred renames and deletes included, retrying transient
        failures for ``FINAL_RETRY_SECONDS``; every flush of this daemon ends by one deadline
        (``FINAL_FLUSH_SECONDS`` from the first). A signal flushes while the mount still serves,
        and ``run`` again once the FUSE loop has ended (what was changed meanwhile); their
        outcome is the report's."""
        async with self._flush_lock:
            if self._requests_flushed == vfs.upload_requests:
                return  # nothing was asked for since the last pass began: its outcome stands
            if self._flush_deadline is None:
                self._flush_deadline = trio.current_time() + FINAL_FLUSH_SECONDS
                self._retry_deadline = trio.current_time() + FINAL_RETRY_SECONDS
            vfs.retry_waiting_for_room()  # room may have appeared unseen (a slow change feed)
            if not vfs.pending_uploads or trio.current_time() >= self._flush_deadline:
                return  # nothing left, or no time: the report lists what is pending
            log.info("flushing %d pending uploads", vfs.pending_uploads)
            self._requests_flushed = vfs.upload_requests  # what this pass was asked for
            self._flush_errors = []  # a later pass supersedes: what it left is what counts
            with trio.move_on_at(self._flush_deadline) as scope:
                patience = max(0.0, self._retry_deadline - trio.current_time())
                for failure in await vfs.flush_all(patience=patience):
                    self._flush_errors.append(f"final upload failed: {failure}")
            if scope.cancelled_caught:
                self._flush_errors.append(
                    f"final flush did not finish within {FINAL_FLUSH_SECONDS:.0f} s"
                )

    async def _final_flush(self, vfs: StoreCore) -> None:
        """Upload what is left (``_flush``), then write the report: once the mount has ended."""
        await self._flush(vfs)
        for line in self._flush_errors:  # the report carries them too: no need to read our log
            log.error("%s", line)
        self._write_report(vfs, self._flush_errors)

    def _write_report(self, vfs: StoreCore, errors: list[str]) -> None:
        """Leave the unmount report (``memfs.mount.status.unmount_report``) for ``memfs umount``."""
        orphaned = None
        if vfs.gone_since is not None:
            try:
                orphaned = vfs.hand_over()
            except OSError as exc:
                errors.append(
                    f"pending changes not handed over as files (kept in the journal): {exc}"
                )
                log.error("%s", errors[-1])
        report = unmount_report(vfs, orphaned=orphaned, errors=errors, **self._about)
        if report_problems(report):
            log.error("%s", render_report(report).rstrip())
        try:
            report_bytes = json.dumps(report, indent=1).encode("utf-8")
            replace_file(self._report_file, report_bytes, "unmount report", durable=True)
        except OSError as exc:
            log.error("unmount report not written to %s: %s", self._report_file, exc)

    async def _signals(self, *, task_status: trio.TaskStatus[None]) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            task_status.started()
            async for signum in signals:
                log.info("signal %s: flushing and unmounting", signal.Signals(signum).name)
                self._stopping = True
                if self.vfs is not None:
                    await self._flush(self.vfs)  # while it still serves; ``run`` reports
                pyfuse3.terminate()
                return


def _connection_lost(exc: BaseException) -> bool:
    """True if ``exc`` (or every error of a group) says the kernel connection is gone."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_connection_lost(inner) for inner in exc.exceptions)
    lost = (errno.ECONNABORTED, errno.ENODEV, errno.ENOTCONN)
    return isinstance(exc, OSError) and exc.errno in lost


def run_foreground(options: MountOptions, ready: Callable[[str], None]) -> int:
    daemon = Daemon(options, ready)
    try:
        return trio.run(daemon.run)
    except MountError as exc:
        ready(f"error: {exc}")
        log.error("%s", exc)
        return 1
