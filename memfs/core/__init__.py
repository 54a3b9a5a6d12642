"""The filesystem without FUSE: POSIX operations on store paths and what they need.

Three floors, each importing only from its own and those below (import-linter checks it):

- ``ops``: the behaviour. ``vfs`` (the file operations, one method each), ``namespace``,
  ``remote``, ``identity``, ``rename``, ``truncate``, ``commit``, ``copies``, ``uploader``,
  ``refusals``, ``durable``, ``descriptions``.
- ``fetch``: fetching and caching clean, re-fetchable data. ``cache``, ``prefetch``, ``usage``,
  ``orphans``.
- ``model``: the nodes and the state they share, with its invariants. ``state``, ``inodes``,
  ``config``, ``attrs``, ``handles``, ``localfiles``, ``clashes``, ``budget``.

``build`` (``build_core``) makes them all and hands each its collaborators. Each sub-package's
``__init__`` says what its modules hold. Below the core: ``memfs.writeback``,
``memfs.versions``, ``memfs.search`` and ``memfs.contract.store_api``; above it: ``memfs.mount``,
which adapts it to pyfuse3, and ``memfs.sync``, which drives it by path.

The face
--------
This package's namespace is the only thing of the core its clients (the mount, sync, sessions,
commands) import: an import-linter contract forbids them its sub-modules. It is the door
(``StoreCore``), the builder (``build_core`` and its ``VfsConfig``), ``Tree`` (what a mount
serves of any tree: the store's files as ``FilesTree``, and ``.versions``, ``.search`` and the
local scratch, which have the same shape), and the few types and constants a client names.
Everything else stays the core's own.

The concurrency rule
--------------------
- **The trio thread owns all core state.** FUSE handlers, write-back uploads, the change feed
  and the status writer are trio tasks of the daemon's one event loop; nothing here takes a
  lock, and no other thread touches a ``Vfs``, its ``CoreState`` (inode table, pending
  deletes...), caches or queue. Code between two ``await`` points runs without interruption, so
  a change made there (for example a conflict's copy, re-base and journal record in
  ``Uploader._lost_race``) is seen by other tasks whole or not at all.
- **Every ``await`` is a point where other operations may have run** (a write, a rename, an
  unlink, a remote change, another upload). State read before it is checked again after it,
  never assumed: the usual form is the *generation check*, ``gen = node.gen`` before an upload
  and ``node.gen != gen`` after it (``Node.gen`` is bumped by every local change of data, so
  the answer is only taken as the file's state if nothing was written meanwhile, else the file
  is queued again); likewise a node's path and the holder of a memory id
  (``table.by_id.get(memory_id) is node``) are looked up again after a request ("changed while
  fetching", "renamed elsewhere meanwhile"); a rename that loaded content checks its names
  again and, if the change feed moved one meanwhile, changes nothing and starts over
  (``rename.NamesChanged``). tests/core/test_races.py holds a race for each such place.
- **Disk I/O on the event loop, on purpose**: it is small, and the operation that asked must not
  return before it is done.
  - Journal records (``memfs.writeback.journal.Journal.put``: one entry appended to the slot's
    log, ``fdatasync``ed), written synchronously by ``durable.Durable.queued`` from the queue's
    ``schedule`` hook, so ``close``/``fsync``/``rename``/``unlink`` return only once the change
    is durable, and no other task runs between the state being decided and being recorded.
  - Kept copies of refused files (``refusals.Refusals.keep``: written and fsynced before the
    refusal is answered; read back by ``Refusals.load`` when a closed refused file is opened)
    and the files ``orphans`` hands over when a store is deleted.
  - The status file (``memfs.mount.status.StatusWriter``, every second, not fsynced) and the
    unmount report (``memfs.mount.report``): collected and written with no ``await`` between,
    so each is a consistent snapshot of the state.
- **In worker threads**: the kernel invalidations (``pyfuse3.invalidate_inode`` /
  ``invalidate_entry``, through the ``invalidator`` the daemon passes in, which uses
  ``trio.to_thread.run_sync``): called on the loop while a related request is in flight they
  can deadlock the mount (docs/editors.md §5). The core only queues them. Outside the mount, the
  reference server runs every SQLite and PostgreSQL transaction in a worker thread
  (``memfs.server.backends.sqlite``, ``memfs.server.backends.postgres``).
"""

from memfs.core.build import build_core as build_core
from memfs.core.model.attrs import Attr as Attr
from memfs.core.model.budget import DEFAULT_LOCAL_BYTES as DEFAULT_LOCAL_BYTES
from memfs.core.model.config import VfsConfig as VfsConfig
from memfs.core.model.inodes import ROOT_INODE as ROOT_INODE
from memfs.core.model.localfiles import DEFAULT_LOCAL_DIRS as DEFAULT_LOCAL_DIRS
from memfs.core.model.localfiles import DEFAULT_PATTERNS as DEFAULT_PATTERNS
from memfs.core.model.localfiles import LocalNames as LocalNames
from memfs.core.store_core import ConflictInfo as ConflictInfo
from memfs.core.store_core import CoreReport as CoreReport
from memfs.core.store_core import CoreStatus as CoreStatus
from memfs.core.store_core import Descriptions as Descriptions
from memfs.core.store_core import FeedPort as FeedPort
from memfs.core.store_core import FileFacts as FileFacts
from memfs.core.store_core import Invalidation as Invalidation
from memfs.core.store_core import Lifecycle as Lifecycle
from memfs.core.store_core import Listed as Listed
from memfs.core.store_core import ListedFile as ListedFile
from memfs.core.store_core import StoreCore as StoreCore
from memfs.core.store_core import StoreFiles as StoreFiles
from memfs.core.store_core import decode_name as decode_name
from memfs.core.tree import AttrChange as AttrChange
from memfs.core.tree import FilesTree as FilesTree
from memfs.core.tree import Tree as Tree
from memfs.core.tree import Xattrs as Xattrs
