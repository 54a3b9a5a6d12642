"""The one place the filesystem core is put together: ``build_core``.

The daemon and the FUSE-free tests build a core the same way, from a ``StoreAPI`` (any store
API; see ``memfs.contract.store_api``) and a ``VfsConfig``. Every object of the core is made here
and handed the collaborators it uses; none reaches into another after this (hooks are given at
construction, or through a method meant for it).
"""

from __future__ import annotations

import time
from pathlib import Path

from memfs.contract.cache_budget import CacheBudget, PinnedCharge
from memfs.contract.numbers import SINGLE_STORE, StoreNumbers
from memfs.contract.retry import is_transient
from memfs.contract.store_api import StoreAPI
from memfs.core.fetch.cache import ContentCache, ListingCache
from memfs.core.fetch.orphans import StoreGone
from memfs.core.fetch.prefetch import BulkFetcher
from memfs.core.fetch.usage import StoreUsage
from memfs.core.model.attrs import Attributes
from memfs.core.model.budget import LocalBudget
from memfs.core.model.config import RESERVED_ROOT_NAMES, UNLIMITED_MEMORIES, VfsConfig
from memfs.core.model.handles import OpenFiles
from memfs.core.model.state import CoreState
from memfs.core.ops.commit import Commits
from memfs.core.ops.copies import LocalCopies
from memfs.core.ops.descriptions import Descriptions
from memfs.core.ops.durable import Durable
from memfs.core.ops.identity import Identities
from memfs.core.ops.namespace import Invalidator, Namespace
from memfs.core.ops.parts import CoreParts
from memfs.core.ops.refusals import Refusals
from memfs.core.ops.remote import RemoteChanges
from memfs.core.ops.rename import Renames
from memfs.core.ops.truncate import Truncates
from memfs.core.ops.uploader import Uploader
from memfs.core.ops.vfs import Vfs
from memfs.search.engine import StoreSearch
from memfs.search.tree import SearchTree
from memfs.versions.tree import VersionsConfig, VersionsTree
from memfs.writeback.journal import Journal
from memfs.writeback.queue import WriteBack


def build_core(
    store: StoreAPI,
    config: VfsConfig | None = None,
    *,
    upload_store: StoreAPI | None = None,
    journal: Journal | None = None,
    kept_dir: Path | None = None,
    untouched: int = 0,
    invalidator: Invalidator | None = None,
    numbers: StoreNumbers = SINGLE_STORE,
    cache_budget: CacheBudget | None = None,
) -> Vfs:
    """A core for one store: the mount's door (``memfs.core.store_core.StoreCore``); the parts
    it is made of are reached through ``Vfs.parts`` only (the core's own tests, its reports).

    Args:
        store: answers the calls a syscall waits on (short deadlines).
        config: the core's options (default: ``VfsConfig()``).
        upload_store: runs background uploads (long deadlines; default: ``store``).
        journal: where acknowledged changes are recorded (None: nowhere, tests of the core).
        kept_dir: where refused content is kept (None: not kept).
        untouched: journal records a read-only mount leaves for the next one (reported).
        invalidator: runs the kernel invalidations the core queues (the daemon's, from a
            worker thread).
        numbers: the inode and handle ranges of the store's files, ``.search`` and
            ``.versions`` (the mount's router hands them out: ``memfs.contract.numbers``).
        cache_budget: the bytes of clean data (contents, version contents and logs, listings,
            a local search index) shared with the cores handed the same budget (None: its
            own, of ``config.cache_bytes``; a session's stores share one).
    """
    config = config or VfsConfig()
    uploads = upload_store or store
    capabilities = store.capabilities
    state = CoreState(
        config,
        max_content_bytes=capabilities.max_content_bytes,
        max_memories=capabilities.max_memories or UNLIMITED_MEMORIES,
        refused_characters=capabilities.refused_characters,
        first_ino=numbers.files.first,
    )
    cache_budget = cache_budget or CacheBudget(config.cache_bytes)
    contents = ContentCache(budget=cache_budget)
    listings = ListingCache(ttl=config.listing_ttl, budget=cache_budget)
    bulk = BulkFetcher(
        store,
        contents,
        listings,
        lookahead=config.walk_lookahead,
        hidden_root_names=RESERVED_ROOT_NAMES,
    )
    usage = StoreUsage(store, lambda: time.monotonic() < listings.vouched_until)
    gone = StoreGone(store)
    versions = VersionsTree(
        store,
        VersionsConfig(uid=config.uid, gid=config.gid, enabled=capabilities.versions),
        numbers=numbers.versions,
        cache_budget=cache_budget,
    )

    # The queue runs the uploader's work and tells Durable what it holds, and both of them
    # queue work: the queue is made first, its hooks calling the two made just after it
    # (the queue calls nothing before it runs).
    uploader: Uploader
    durable: Durable
    writeback = WriteBack(
        lambda key: uploader.sync(key),
        is_transient=is_transient,
        on_failure=lambda key, error: uploader.failed(key, error),
        on_queued=lambda key: uploader.queued(key),
        on_done=lambda key, error: uploader.done(key, error),
        on_retry=lambda key, error: uploader.retried(key, error),
        on_cancel=lambda key: durable.cancelled(key),
    )
    budget = LocalBudget(config.local_bytes)
    refusals = Refusals(kept_dir, budget)
    durable = Durable(
        state,
        writeback=writeback,
        upload_store=uploads,
        listings=listings,
        contents=contents,
        refusals=refusals,
        journal=journal,
        untouched=untouched,
        waits_as_file=lambda path, data, description: uploader.waits_as_file(
            path, data, description
        ),
        copy_created=lambda memory, access: uploader.copy_created(memory, access),
    )
    files = OpenFiles(numbers.files.first)
    copies = LocalCopies(state, store, contents, bulk, writeback, refusals)
    namespace = Namespace(state, store, listings, bulk, gone, writeback)
    commits = Commits(state, writeback, refusals, files, namespace)
    identities = Identities(state, writeback, copies)
    uploader = Uploader(
        state,
        store=store,
        upload_store=uploads,
        writeback=writeback,
        durable=durable,
        contents=contents,
        listings=listings,
        gone=gone,
        namespace=namespace,
        identities=identities,
        files=files,
        copies=copies,
        budget=budget,
    )
    remote = RemoteChanges(
        state,
        namespace,
        listings,
        usage,
        room_may_have_appeared=uploader.retry_waiting_for_room,
    )
    renames = Renames(
        state,
        writeback=writeback,
        listings=listings,
        namespace=namespace,
        identities=identities,
        copies=copies,
        commits=commits,
        uploader=uploader,
        budget=budget,
    )
    truncates = Truncates(state, copies=copies, commits=commits, budget=budget)
    parts = CoreParts(
        state,
        store=store,
        contents=contents,
        listings=listings,
        bulk=bulk,
        usage=usage,
        gone=gone,
        versions=versions,
        writeback=writeback,
        durable=durable,
        namespace=namespace,
        remote=remote,
        identities=identities,
        copies=copies,
        commits=commits,
        files=files,
        budget=budget,
        attrs=Attributes(config, state.table),
        uploader=uploader,
        renames=renames,
        truncates=truncates,
        descriptions=Descriptions(state, store, writeback, gone, refusals),
        search=SearchTree(
            # a search after a write finds it: what is pending is uploaded first
            StoreSearch(
                store,
                before=uploader.flush_all,
                by_server=config.server_search,
                contents=contents,
                on_size=PinnedCharge(cache_budget, name="search index").set,
            ),
            uid=config.uid,
            gid=config.gid,
            numbers=numbers.search,
        ),
    )
    return Vfs(parts, invalidator=invalidator)
