"""What one mount is made of, and how its parts fit: each store's core and operations built in
its slot of the mount's numbers (``memfs.contract.numbers``), the router over them (in a mount
of several stores, the root and the local scratch in slot 0 and an UNAVAILABLE directory for a
store that could not be opened), the FUSE mount options, what every store keeps locally, and
the status document of them all.

It must not run anything: ``memfs.mount.daemon`` opens the stores, mounts, runs their tasks and
ends the mount (its lifecycle) with these parts.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pyfuse3
import trio

from memfs.contract.cache_budget import CacheBudget
from memfs.contract.numbers import SINGLE_STORE, SLOT, NumberRange, StoreNumbers
from memfs.core import ROOT_INODE, Invalidation, StoreCore, VfsConfig, build_core
from memfs.mount.opening import OpenStore, journals_not_replayed, leave_journal, open_journal
from memfs.mount.options import MountOptions, StoreSpec
from memfs.mount.root import RootTree, StoreDirectory, UnavailableStore
from memfs.mount.router import Router, StoreSlot
from memfs.mount.scratch import Scratch
from memfs.mount.served import ServedStore
from memfs.mount.status import RecentErrors, collect, collect_mount
from memfs.writeback.journal import default_cache_dir

log = logging.getLogger(__name__)


def make_invalidator() -> Callable[[list[Invalidation]], Awaitable[None]]:
    """What hands the core's invalidations to the kernel: from a worker thread, never inside a
    FUSE request handler (that can deadlock: docs/editors.md)."""

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


class Assembly:
    """The parts of one mount (of one store, or of several with scratch) and how they fit."""

    def __init__(self, options: MountOptions) -> None:
        self.options = options
        self.stores: list[ServedStore] = []  # in the plan's order, once opened
        # in a mount of several, the stores that could not be opened: slot -> (spec, why)
        self.unavailable: dict[int, tuple[StoreSpec, str]] = {}
        self.scratch: Scratch | None = None  # a mount of several stores only
        # the bytes every store's clean caches share (--cache-size: memfs.contract.cache_budget)
        self.cache_budget = CacheBudget(int(options.cache_mb * 1024 * 1024))
        self._root: RootTree | None = None  # likewise: its slot 0

    @property
    def several(self) -> bool:
        """A mount of several stores (each a directory at the root, beside scratch)."""
        return bool(self.options.stores)

    def serve_store(self, spec: StoreSpec, store: OpenStore, slot: int) -> ServedStore:
        """Build the core of ``store`` in its slot of the mount (memfs.contract.numbers)."""
        opts = self.options
        read_only = spec.read_only or store.archived
        # a read-only mount never writes, not even a replay: its journal stays untouched
        journal, kept = (None, None) if read_only else open_journal(self.cache_dir(), store, spec)
        untouched = leave_journal(self.cache_dir(), store) if read_only else 0
        journals = journals_not_replayed(self.cache_dir(), store)
        numbers = StoreNumbers.in_slot(slot * SLOT) if self.several else SINGLE_STORE
        core: StoreCore = build_core(
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
                uid=self.uid,
                gid=self.gid,
                umask=opts.owner.umask,
            ),
            upload_store=store.uploads,
            journal=journal,
            kept_dir=kept,
            untouched=untouched,
            invalidator=make_invalidator(),
            numbers=numbers,
            cache_budget=self.cache_budget,
        )
        operations = StoreSlot(core, several=self.several)
        return ServedStore(spec, store, core, operations, journal, journals, slot)

    @property
    def uid(self) -> int:
        return os.getuid() if self.options.owner.uid is None else self.options.owner.uid

    @property
    def gid(self) -> int:
        return os.getgid() if self.options.owner.gid is None else self.options.owner.gid

    def router(self) -> Router:
        """The mount's operations: one store in slot 0, or the root and scratch in slot 0 and
        each store in the next slots (memfs.contract.numbers)."""
        router = Router()
        if not self.several:
            router.serve(0, self.stores[0].operations)  # the store is the mount's root
            return router
        opts = self.options
        self.scratch = Scratch(
            NumberRange(ROOT_INODE, SLOT),
            budget=opts.local_bytes if opts.scratch_bytes is None else opts.scratch_bytes,
            uid=self.uid,
            gid=self.gid,
            mode=0o777 & ~opts.owner.umask,
        )
        directories: dict[str, StoreDirectory] = {}
        for served in self.stores:
            directories[served.spec.slug] = served.operations
            router.serve(served.slot, served.operations, name=served.spec.slug)
        for slot, (spec, why) in self.unavailable.items():
            root_ino = StoreNumbers.in_slot(slot * SLOT).files.first
            unavailable = UnavailableStore(root_ino, why, uid=self.uid, gid=self.gid)
            directories[spec.slug] = unavailable
            router.serve(slot, unavailable, name=spec.slug)
        self._root = RootTree(self.scratch, directories)
        router.serve(0, self._root, statfs=True, name=None)
        return router

    def fuse_options(self) -> set[str]:
        opts = self.options
        options = set(pyfuse3.default_options)
        options |= {"fsname=memfs", "subtype=memfs", "default_permissions"}
        # libfuse's default, said out loud so that no option we add drops it: a file an
        # agent made or chmodded here never runs with its set-user-ID bit, nor is a device.
        options |= {"nosuid", "nodev"}
        # a mount of several stores is never "ro": a read-only store refuses in its subtree
        if not self.several and self.stores[0].read_only:
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
        return options

    def local_bytes(self) -> int:
        scratch = self.scratch.used if self.scratch is not None else 0
        return scratch + sum(served.core.local_bytes for served in self.stores)

    def status(self, errors: RecentErrors) -> dict[str, Any]:
        """The status document (``memfs.mount.status``): one store's, or one section per store."""
        mountpoint = self.options.mountpoint
        if not self.several:
            served = self.stores[0]
            return collect(
                served.core,
                served.feed,
                errors,
                mountpoint=mountpoint,
                store_name=served.store.name,
                journals=served.journals,
            )
        sections = [
            collect(
                served.core,
                served.feed,
                None,
                mountpoint=os.path.join(mountpoint, served.spec.slug),
                store_name=served.store.name,
                journals=served.journals,
            )
            | {"slug": served.spec.slug, "failed": served.failed}
            for served in self.stores
        ]
        sections += [
            {
                "slug": spec.slug,
                "mountpoint": os.path.join(self.options.mountpoint, spec.slug),
                "store_id": None,
                "store_name": spec.store,
                "unavailable": why,
            }
            for spec, why in self.unavailable.values()
        ]
        assert self.scratch is not None
        return collect_mount(sections, self.scratch.status(), errors, mountpoint=mountpoint)

    def cache_dir(self) -> Path:
        return Path(self.options.cache_dir) if self.options.cache_dir else default_cache_dir()
