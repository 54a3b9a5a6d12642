"""The local budget of one mount: the bytes it keeps for files the store does not hold.

Local-only files (``localfiles``: ``.git/``, editor swaps) live in the daemon's memory; refused
content (``refusals``) lives in its kept copy on disk, and in memory too while the file is
open; content the store could not take when asked (full, or away) waits in memory and in the
journal. An agent, or another local user of an ``--allow-other`` mount, can make as many of
each as it likes, so they count against one budget per mount (``--local-bytes``, 64 MiB by
default; docs/semantics.md, "Local bytes"):

- a file is charged what it holds: its content in memory or its kept copy, whichever is larger
  (the same bytes, counted once), plus ``NODE_BYTES`` for a local-only name. Any file changed
  while open counts too until its last close (its content is not known to be text before;
  after, it is refused, or queued for the store, whose limits bound it); a directory made
  by ``mkdir`` is charged ``NODE_BYTES`` (a million empty files or directories cost memory
  too). A node nobody can reach any more (removed and closed) is charged nothing: ``vfs``
  drops its content;
- a closed file the store could not take (``Node.held_back``: a full store, a create waiting
  for room; an outage or a 429, an upload being retried; and any file queued while the store
  is known to be full, for a new file, or the server away) is charged its content, and a new
  one ``NODE_BYTES`` as well (``touch`` makes empty files that wait), until the upload
  succeeds or the file is removed (``uploader``). A file in its update delay or first
  upload to a store that answers is not: it takes it within seconds, and a ``cp -r`` of more
  than the budget must not fail because the uploads lag behind it (docs/semantics.md).
  Content already accepted is never dropped: a charge may take the budget past its limit (a
  journal replayed at mount), which then reads full until room is made;
- kept copies that earlier mounts left in this mount's kept directory count too; they are
  dropped, oldest first, when a write or create needs their room (``reclaim``, from
  ``refusals``);
- past the budget, every create and every write or truncate that grows a file gets ENOSPC, as
  on a full disk, until files are removed; a write that would take a charged file past it gets
  ENOSPC as well;
- that the budget is full is logged once (again at most once a minute, with the count of
  ENOSPC answered meanwhile), never once per write; ``memfs status`` shows the figures.

It holds numbers only: it must not touch content, disks or FUSE. ``charge`` is told a node's
state after each change that may alter what it holds (by ``vfs`` and ``refusals``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from memfs.contract.errors import NoSpaceError
from memfs.core.model.inodes import Kind, Node

log = logging.getLogger(__name__)

DEFAULT_LOCAL_BYTES = 64 * 1024 * 1024
NODE_BYTES = 2048  # what a name costs the daemon besides its content (a node, its indexes)
FULL_LOG_INTERVAL = 60.0  # seconds between two "the budget is full" lines


class LocalBudget:
    """See the module docstring."""

    def __init__(self, limit: int = DEFAULT_LOCAL_BYTES) -> None:
        self.limit = limit
        self.used = 0  # the sum of ``_charges``
        self._charges: dict[int, int] = {}  # by inode: what each charged node holds
        self._kept: dict[int, int] = {}  # by inode: the size of its kept copy on disk
        self._made_dirs: set[int] = set()  # directories made by mkdir, by inode
        self.earlier = 0  # bytes of kept copies earlier mounts left (``refusals`` keeps it)
        # frees at least the bytes asked of earlier mounts' kept copies if it can (refusals)
        self.reclaim: Callable[[int], None] | None = None
        self.enospc = 0  # writes and creates answered ENOSPC
        self.full_since: str | None = None  # UTC time of the first ENOSPC since room was made
        self._logged_at: float | None = None  # monotonic
        self._enospc_logged = 0

    @property
    def total(self) -> int:
        return self.used + self.earlier

    @property
    def full(self) -> bool:
        """Past the budget, or a write or create was refused and nothing was freed since."""
        return self.total >= self.limit or self.full_since is not None

    def charge(self, node: Node) -> None:
        """Charge ``node`` what it holds now (nothing if it holds nothing the budget counts).
        Never refuses: what ``node`` holds is accepted already (refusals come before, from
        ``check_create`` and ``check_growth``)."""
        held = 0
        counted = self._counted(node)
        reachable = node.path is not None or node.open_count > 0
        if node.kind is Kind.DIR:
            if node.ino in self._made_dirs:
                held = NODE_BYTES if reachable else 0
                if not reachable:
                    self._made_dirs.discard(node.ino)
        elif counted and reachable:
            if node.kind is Kind.SYMLINK:
                memory = len(node.target)
            else:
                memory = len(node.data) if node.data is not None else 0
            held = max(memory, self._kept.get(node.ino, 0))
            if node.local_only or (node.held_back and node.memory_id is None):
                held += NODE_BYTES  # a name only this mount has (an empty file costs too)
        old = self._charges.pop(node.ino, 0)
        if held:
            self._charges[node.ino] = held
        self.used += held - old
        if held < old and self.total < self.limit:
            self.full_since = None  # room was made: the next ENOSPC says so again

    def made_dir(self, node: Node) -> None:
        """``node`` is a directory made by ``mkdir`` (charged until it is removed)."""
        self._made_dirs.add(node.ino)
        self.charge(node)

    def kept(self, node: Node, size: int) -> None:
        """``node``'s kept copy now holds ``size`` bytes (0: it has none)."""
        if size:
            self._kept[node.ino] = size
        else:
            self._kept.pop(node.ino, None)
        self.charge(node)

    def check_create(self, node_bytes: int = 0) -> None:
        """Before a create: ENOSPC past the budget (``node_bytes``: what the new node costs)."""
        self._check(node_bytes, "a create")

    def check_growth(self, node: Node, growth: int) -> None:
        """Before ``node`` grows by ``growth`` bytes (a write or truncate): ENOSPC if the budget
        is full, or if ``node`` is charged and this would take it past the budget."""
        if growth <= 0:
            return
        self._check(growth if self._counted(node) else 0, f"a write to {node.path}")

    @staticmethod
    def _counted(node: Node) -> bool:
        """Whether what ``node`` holds counts: local-only, refused, written while open, or
        content the store could not take."""
        if node.local_only or node.refused is not None:
            return True
        return node.dirty and (node.open_count > 0 or node.held_back)

    def _check(self, extra: int, what: str) -> None:
        if self._fits(extra):
            return
        if self.earlier and self.reclaim is not None:
            self.reclaim(self.total + max(extra, 1) - self.limit)
            if self._fits(extra):
                return
        self.enospc += 1
        if self.full_since is None:
            self.full_since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        now = time.monotonic()
        if self._logged_at is None or now - self._logged_at >= FULL_LOG_INTERVAL:
            log.warning(
                "the local budget of this mount is full (%s of %s bytes: local-only files, "
                "refused content, kept copies, files the store could not take yet; "
                "--local-bytes): %s and %d more write(s) or create(s) got ENOSPC; remove such "
                "files, or make room in the store, to make room (memfs status)",
                f"{self.total:,}",
                f"{self.limit:,}",
                what,
                self.enospc - self._enospc_logged - 1,
            )
            self._logged_at = now
            self._enospc_logged = self.enospc
        raise NoSpaceError(
            f"{what}: the mount's local budget ({self.limit:,} bytes, --local-bytes) is full"
        )

    def _fits(self, extra: int) -> bool:
        return self.total + extra <= self.limit if extra else self.total < self.limit

    def status(self) -> dict[str, object]:
        return {
            "limit_bytes": self.limit,
            "used_bytes": self.total,
            "earlier_kept_bytes": self.earlier,
            "full": self.full,
            "full_since": self.full_since,
            "enospc": self.enospc,
        }
