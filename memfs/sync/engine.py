"""The sync engine: keeps a directory and a store's core in step, both ways.

The core (``memfs.core``) holds the store as a mount does, with every rule a mount follows; the
engine is what the kernel and the programs are to a mount: it looks at each path that may have
changed on either side and makes the other side the same, through ``CoreFiles`` (the core by
path) and ``LocalDir`` (DIR without following links). The upload path, the journal, the
precondition on every upload, the refusals, the conflict copies: all are the core's.

Which side changed is decided three-way, against the ``Basis`` (what both last agreed on):

======================  ======================  =============================================
local (vs the basis)    core (vs the basis)     what happens
======================  ======================  =============================================
changed                 same                    the core takes the local file (an upload)
same                    changed                 DIR takes the core's file (a write, atomic)
changed                 changed                 the core's version stays; the local text is
                                                saved by the core as a conflict copy, which
                                                comes back into DIR like any new memory
deleted                 changed                 nothing is deleted: the core's file comes back
changed                 deleted                 the local file is uploaded again
======================  ======================  =============================================

A read-only store never takes a local change: the core's file is put back and the local text
kept as a copy outside DIR (``kept_dir``), reported in ``memfs status``.

What may have changed reaches the engine as paths: from the file watcher (``mark_local``),
from the core's invalidations (``invalidate``: the change feed applied a remote change, a
conflict re-based a file) and from full comparisons (``rescan``: at start, after the watcher
lost events, and slowly as a safety net). A comparison of an unchanged file reads no content
(``Seen`` against the basis), and of an unchanged memory asks nothing of the server (the
core's listings, vouched for by the change feed).

Concurrency: one trio task runs passes one after the other (``run``); inside a pass the paths
are reconciled side by side, each by one task, so no path is ever reconciled twice at once.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import trio

from memfs.contract import paths
from memfs.contract.errors import ApiConnectionError, ApiError, FsError, NoEntryError, NotFoundError
from memfs.core import Invalidation, StoreCore
from memfs.host.private import create_file
from memfs.sync.basis import Basis
from memfs.sync.corefiles import CoreFile, CoreFiles
from memfs.sync.descriptions import DESCRIPTIONS_PATH, DescriptionsFile
from memfs.sync.localdir import LocalDir, Seen, Unusable, sha256_bytes

log = logging.getLogger(__name__)

FIRST_COPY_IN_FLIGHT = 8  # sub-trees fetched at once by a first copy (each a chain of pages)
PARALLEL = 8  # paths reconciled at once (first copy: reads of the core ride its bulk fetches)
RETRY_AFTER = 2.0  # a pass that met an unreachable or busy server runs again after this
SETTLE = 0.02  # events arriving this close together are one pass (an editor's save)


@dataclass
class SyncStats:
    """What ``memfs status DIR`` says about the engine (besides the core's own figures)."""

    passes: int = 0
    uploads: int = 0  # local changes handed to the core
    downloads: int = 0  # core files written into DIR
    local_deletes: int = 0
    remote_deletes: int = 0
    renames: int = 0
    conflicts: int = 0
    last_pass: float = 0.0  # wall time
    last_rescan: float = 0.0
    last_rescan_seconds: float | None = None  # how long the last full comparison took
    first_copy_seconds: float | None = None
    directory_gone: bool = False  # DIR vanished or was replaced: syncing paused
    # names that stay local, with why: not a file, a path the store refuses...
    not_synced: dict[str, str] = field(default_factory=dict)
    # read-only: local changes put back, each kept as a copy (path -> where)
    put_back: dict[str, str] = field(default_factory=dict)


@dataclass
class _Sides:
    """One path as both sides have it now (``None``: absent)."""

    path: str
    local: Seen | None
    local_sha: str | None
    core: CoreFile | None
    core_sha: str | None
    moved_from: str | None = None  # a local rename: the name this content left (same task)
    moved_away: bool = False  # the old name of a local rename (its new name's task moves it)


class SyncEngine:
    """See the module docstring."""

    def __init__(
        self,
        core: StoreCore,
        local: LocalDir,
        basis: Basis,
        *,
        max_bytes: int,
        kept_dir: Path | None = None,
    ) -> None:
        self.core = core
        self.files = CoreFiles(core)
        self.local = local
        self.basis = basis
        self.max_bytes = max_bytes
        self.kept_dir = kept_dir
        self.read_only = core.read_only
        self.stats = SyncStats()
        self._one_pass = trio.Lock()
        self._retry_later = False  # a path failed because of the server: a pass again soon
        self.descriptions = DescriptionsFile(core, local)  # Databricks stores only
        self._dirty: set[str] = set()
        self._rescan = True  # compare everything, both sides, at the next pass (the first too)
        self._walk_core = False  # compare the core's whole tree at the next pass
        self._wake = trio.Event()
        self._paths_by_ino: dict[int, str] = {}  # the core's files and directories, last walk
        # set once a pass ends with nothing waiting; replaced (unset) at the next wake-up
        self._idle = trio.Event()
        self._wrote_locally = False
        # store paths this file system cannot tell from another one (``LocalDir.name_key``):
        # never written here nor uploaded from here, each with why
        self._clashes: dict[str, str] = {}
        # files the store refused, as they were when refused: left alone (both sides) until
        # they change here; their reason is in ``stats.not_synced``
        self._refused: dict[str, Seen] = {}

    # -- what may have changed ---------------------------------------------------------------

    def mark_local(self, local_paths: list[Path]) -> None:
        """The watcher saw these names of DIR change (a directory: all below it)."""
        for local_path in local_paths:
            path = self.local.store_path(local_path)
            if path == DESCRIPTIONS_PATH:
                self._walk_core = True  # the pass compares the file with the store's side
                continue
            if path is None or self.local.is_local_only(path):
                continue
            self._dirty.add(path)
            below = paths.as_prefix(path)
            self._dirty.update(p for p in self.basis.entries if p.startswith(below))
            if os.path.isdir(local_path) and not os.path.islink(local_path):
                self._rescan = True  # a directory arrived whole (moved in): look inside it
        self._wake_up()

    def rescan_soon(self) -> None:
        """Compare everything at the next pass (the watcher lost events, or it is time)."""
        self._rescan = True
        self._wake_up()

    async def invalidate(self, items: list[Invalidation]) -> None:
        """The core's invalidations (``StoreCore.invalidator``): what the kernel would be told
        to look up again, the engine looks at again."""
        for kind, ino, name in items:
            where = self._paths_by_ino.get(ino)
            if kind == "inode" and where is not None:
                self._dirty.add(where)  # its content or attributes changed
            else:
                # a name appeared, went or moved (perhaps a whole directory): the core's tree
                # is compared again (its listings, no request while the feed vouches for them)
                self._walk_core = True
                if where is not None:
                    self._dirty.add(paths.join(where, name.decode("utf-8", "surrogateescape")))
        self._wake_up()

    def _wake_up(self) -> None:
        if self._idle.is_set():  # waiters of the last idle moment were released already
            self._idle = trio.Event()
        self._wake.set()

    async def idle(self) -> None:
        """Return once nothing waits to be reconciled (for ``--once`` and tests)."""
        await self._idle.wait()

    # -- passes --------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await self._wake.wait()
            await trio.sleep(SETTLE)
            self._wake = trio.Event()
            try:
                await self.sync_pass()
            except (ApiError, ApiConnectionError) as exc:  # listing the core's tree failed
                log.warning("sync pass: %s (tried again in %g s)", exc, RETRY_AFTER)
                self._rescan = self._retry_later = True
            if self._retry_later:  # what failed for the server's sake waits a little
                self._retry_later = False
                await trio.sleep(RETRY_AFTER)
                self._wake_up()
                continue
            if not self._wake.is_set():
                self._idle.set()

    async def sync_pass(self) -> None:
        """Reconcile every path that may have changed since the last pass (one pass at a
        time: the end's last pass waits for the running one)."""
        async with self._one_pass:
            await self._pass()

    async def _pass(self) -> None:
        if not self.local.intact():
            # gone or replaced: its missing files are not deletions. Nothing moves until it is
            # back (the safety net's rescan looks again)
            if not self.stats.directory_gone:
                log.error("%s is gone or was replaced: syncing paused", self.local.root)
            self.stats.directory_gone = True
            return
        if self.stats.directory_gone:
            log.info("%s is back: syncing again", self.local.root)
            self.stats.directory_gone = False
            self._rescan = True
        started = time.monotonic()
        first = self.stats.passes == 0
        candidates = set(self._dirty)
        self._dirty.clear()
        if self.descriptions.enabled:
            self._walk_core = True  # the descriptions file is the whole store's
        walked: dict[str, CoreFile] | None = None
        full = False
        if first and not self.basis.entries:
            # a first copy reads everything: whole sub-trees side by side, in bulk pages
            await self.core.fetch_everything(in_flight=FIRST_COPY_IN_FLIGHT)
        if self._rescan or self._walk_core:
            full = self._rescan
            self._rescan = self._walk_core = False
            walked, directories = await self.files.walk()
            self._paths_by_ino = {self.core.root_ino: "/"} | {
                ino: path for path, ino in directories.items()
            }
            self._paths_by_ino.update((f.ino, path) for path, f in walked.items())
            for path, core_file in walked.items():
                agreed = self.basis.get(path)
                if agreed is None or core_file.sha != agreed.sha:
                    candidates.add(path)
            candidates.update(p for p in self.basis.entries if p not in walked)
            if full:
                candidates |= self._local_candidates()
                self.stats.last_rescan = time.time()
        candidates = {p for p in candidates if not self.local.is_local_only(p)}
        if walked is not None and self.local.case_insensitive:
            self._clashes = name_clashes(walked, self.local.name_key)
        for path in candidates & self._clashes.keys():
            self.stats.not_synced[path] = self._clashes[path]
        candidates -= self._clashes.keys()
        if candidates:
            await self._reconcile_all(sorted(candidates), walked)
        if walked is not None and self.descriptions.enabled:
            if await self.descriptions.take_local_edits(walked):
                self._wake_up()  # the next pass writes the file from the store's side
            else:
                self.descriptions.write_store_side(walked)
        if self._wrote_locally:
            # the basis must never say a file was written that a crash could lose (an empty
            # file would read as a local change and be uploaded): the writes reach the disk first
            await trio.to_thread.run_sync(self.local.make_durable)
            self._wrote_locally = False
        self.basis.save()
        self.stats.passes += 1
        self.stats.last_pass = time.time()
        if full:
            self.stats.last_rescan_seconds = round(time.monotonic() - started, 4)
        if first:
            self.stats.first_copy_seconds = round(time.monotonic() - started, 3)

    def _local_candidates(self) -> set[str]:
        """The local names that moved since the basis (no content read), and the ones the
        basis has that are gone from DIR."""
        files, unusable, _ = self.local.scan()
        changed = {p for p, seen in files.items() if _moved(self.basis.get(p), seen)}
        changed.update(p for p in self.basis.entries if p not in files)
        for path, why in unusable.items():
            self.stats.not_synced[path] = why.why
        for path in list(self.stats.not_synced):
            if path in files and path not in unusable:
                changed.add(path)
        return changed

    async def _reconcile_all(
        self, candidates: list[str], walked: dict[str, CoreFile] | None
    ) -> None:
        sides = await self._look(candidates, walked)
        self._pair_renames(sides)
        limiter = trio.CapacityLimiter(PARALLEL)
        async with trio.open_nursery() as nursery:
            for side in sides.values():
                nursery.start_soon(self._reconcile_limited, limiter, side)

    async def _reconcile_limited(self, limiter: trio.CapacityLimiter, sides: _Sides) -> None:
        async with limiter:
            try:
                await self._reconcile(sides)
            except FsError as exc:
                log.warning("%s: %s", paths.shown(sides.path), exc)
            except (ApiError, ApiConnectionError) as exc:  # the server away or busy: later
                self._dirty.add(sides.path)
                self._retry_later = True
                log.info("%s: %s (tried again in %g s)", paths.shown(sides.path), exc, RETRY_AFTER)
            except OSError as exc:  # a name this file system refuses (Windows), no room...
                self.stats.not_synced[sides.path] = f"cannot be written here: {exc.strerror}"
                log.warning("%s: %s", paths.shown(sides.path), exc)

    async def _look(
        self, candidates: list[str], walked: dict[str, CoreFile] | None
    ) -> dict[str, _Sides]:
        """Both sides of each candidate, local contents read where they moved."""
        result: dict[str, _Sides] = {}
        for path in candidates:
            state = self.local.stat(path)
            local: Seen | None = None
            local_sha: str | None = None
            if isinstance(state, Unusable):
                self.stats.not_synced[path] = state.why
                continue
            if isinstance(state, Seen):
                agreed = self.basis.get(path)
                if agreed is not None and not _moved(agreed, state):
                    local, local_sha = state, agreed.sha
                else:  # hashed, not kept: a pass holds no more than it uploads at once
                    got = self.local.read(path, self.max_bytes)
                    if got is not None:
                        local_sha, local = sha256_bytes(got[0]), got[1]
            if walked is not None:
                core_file = walked.get(path)
            else:
                core_file = await self.files.find(path)
            core_sha = core_file.sha if core_file is not None else None
            result[path] = _Sides(path, local, local_sha, core_file, core_sha)
        return result

    def _pair_renames(self, sides: dict[str, _Sides]) -> None:
        """A file gone from one name of DIR and the same content new at another, while the
        core still has the old name as agreed: a rename (its memory keeps its id)."""
        gone = {
            s.path: agreed.sha
            for s in sides.values()
            if s.local is None
            and s.core is not None
            and (agreed := self.basis.get(s.path)) is not None
            and s.core.sha in (None, agreed.sha)
        }
        if not gone:
            return
        by_sha: dict[str, list[str]] = {}
        for path, sha in gone.items():
            by_sha.setdefault(sha, []).append(path)
        for side in sides.values():
            if side.local is None or side.core is not None or self.basis.get(side.path):
                continue
            olds = by_sha.get(side.local_sha or "")
            if olds:
                old = olds.pop()
                sides[old].moved_away = True
                side.moved_from = old

    async def _reconcile(self, side: _Sides) -> None:
        path = side.path
        if side.moved_from is not None:
            await self._rename(side.moved_from, side)
            return
        if side.moved_away:
            return  # its new name's task moves it
        refused = self._refused.get(path)
        if refused is not None:
            if side.local == refused:
                return  # refused as it is: it stays here, and the core's side is not its own
            del self._refused[path]  # changed here: tried again
            self.stats.not_synced.pop(path, None)
            # the core holds our own refused text, not the store's: the store's side is what
            # the basis says (a change there meanwhile is met by the upload's precondition)
            agreed = self.basis.get(path)
            side.core_sha = agreed.sha if agreed is not None else None
            if agreed is None:
                side.core = None
        if side.core is not None and side.core_sha is None:
            side.core_sha = sha256_bytes(await self.files.content(side.core.ino))
        agreed = self.basis.get(path)
        base_sha = agreed.sha if agreed is not None else None
        if side.local_sha == side.core_sha:
            self.basis.agree(path, side.local_sha, side.local)
            self.stats.not_synced.pop(path, None)
            return
        local_changed = side.local_sha != base_sha
        core_changed = side.core_sha != base_sha
        if self.read_only and local_changed:
            await self._put_back(side)
            return
        if local_changed and not core_changed:
            await self._upload(side)
        elif core_changed and not local_changed:
            await self._download(side)
        elif side.local is None:
            await self._download(side)  # deleted here, changed there: it stays
        elif side.core is None:
            await self._upload(side)  # changed here, deleted there: it comes back
        else:
            await self._conflict(side)

    # -- the moves -----------------------------------------------------------------------------

    def _read_local(self, side: _Sides) -> bytes | None:
        """The local file's content now (``side.local`` becomes what was read); None if it is
        no longer a file here (looked at again next pass)."""
        got = self.local.read(side.path, self.max_bytes)
        if got is None:
            self._dirty.add(side.path)
            self._wake_up()
            return None
        data, side.local = got
        return data

    async def _upload(self, side: _Sides) -> None:
        path = side.path
        if side.local is None:
            await self.files.remove(path)
            self.basis.agree(path, None, None)
            self.stats.local_deletes += 1
            log.info("%s: deleted here, deleted in the store", paths.shown(path))
            return
        data = self._read_local(side)
        if data is None:
            return
        try:
            await self.files.put(path, data)
        except FsError as exc:
            # refused (not UTF-8, too large, a name the store refuses, the store full...): the
            # file stays here, listed; tried again when it changes. The basis stays as it was:
            # the store never had this text
            self.stats.not_synced[path] = str(exc)
            if side.local is not None:
                self._refused[path] = side.local
            log.warning("%s stays local: %s", paths.shown(path), exc)
            return
        self.stats.not_synced.pop(path, None)
        self.basis.agree(path, sha256_bytes(data), side.local)
        self.stats.uploads += 1

    async def _download(self, side: _Sides) -> None:
        path = side.path
        if side.core is None:
            if side.local is not None and self.local.remove(path, side.local):
                self.stats.remote_deletes += 1
                self.basis.agree(path, None, None)
            elif side.local is None:
                self.basis.agree(path, None, None)
            else:
                self._dirty.add(path)  # changed meanwhile: looked at again
            return
        try:
            data = await self.files.content(side.core.ino)
        except (NoEntryError, NotFoundError):
            self._dirty.add(path)
            return
        written = self.local.write(path, data, side.local, read_only=self.read_only)
        if written is None:
            self._dirty.add(path)  # a program wrote meanwhile: its text is looked at next
            self._wake_up()
            return
        self._wrote_locally = True
        self.basis.agree(path, sha256_bytes(data), written)
        self.stats.downloads += 1

    async def _conflict(self, side: _Sides) -> None:
        """Changed on both sides: the core's version stays; the local text becomes the core's
        conflict copy (the rule a lost upload follows), then DIR takes the core's file."""
        data = self._read_local(side)
        if data is None:
            return
        self.core.save_conflict(side.path, data)
        self.stats.conflicts += 1
        await self._download(side)

    async def _rename(self, old: str, side: _Sides) -> None:
        try:
            await self.files.rename(old, side.path)
        except FsError as exc:
            log.info("rename %s -> %s as a copy: %s", paths.shown(old), paths.shown(side.path), exc)
            side.core_sha = None
            await self._upload(side)
            return
        agreed = self.basis.get(old)
        self.basis.agree(old, None, None)
        self.basis.agree(side.path, agreed.sha if agreed else side.local_sha, side.local)
        self.stats.renames += 1

    async def _put_back(self, side: _Sides) -> None:
        """Read-only: the local change is not the store's; its text is kept outside DIR and
        the core's file put back."""
        if side.local is not None and self.kept_dir is not None:
            data = self._read_local(side)
            if data is not None:
                stamp = time.strftime("%Y%m%dT%H%M%S")
                name = side.path.strip("/").replace("/", "%2F") + f".{stamp}"
                kept = self.kept_dir / name
                try:
                    create_file(kept, data, "kept copy of a read-only change")
                    self.stats.put_back[side.path] = str(kept)
                except OSError as exc:
                    log.warning("local change of %s not kept: %s", paths.shown(side.path), exc)
        log.warning(
            "%s changed here, but the store is read-only: the store's version is put back",
            paths.shown(side.path),
        )
        await self._download(side)


def name_clashes(store_paths: Iterable[str], key: Callable[[str], str]) -> dict[str, str]:
    """The store paths that would land on another's file in a directory whose file system
    gives them one ``key`` (the first in order keeps the name), each with why."""
    owners: dict[str, str] = {}
    clashes: dict[str, str] = {}
    for path in sorted(store_paths):
        owner = owners.setdefault(key(path), path)
        if owner != path:
            clashes[path] = (
                f"this file system cannot hold it beside {owner} (names that differ only in case)"
            )
    return clashes


def _moved(agreed: object, seen: Seen) -> bool:
    """True if ``seen`` is not the file the basis recorded (its content must be read)."""
    return getattr(agreed, "seen", None) != seen
