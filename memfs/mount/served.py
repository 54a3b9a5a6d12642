"""One store of a running mount daemon, as the daemon and its final flush see it.

It must not run anything: ``memfs.mount.daemon`` fills and runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memfs.core import StoreCore
from memfs.mount.changefeed import ChangeFeed
from memfs.mount.opening import OpenStore
from memfs.mount.options import StoreSpec
from memfs.mount.router import StoreSlot
from memfs.mount.status import JournalsOfStore
from memfs.writeback.journal import Journal


@dataclass(eq=False)
class ServedStore:
    """One store of a running daemon: how it was opened, its core, and how it is doing."""

    spec: StoreSpec
    store: OpenStore
    core: StoreCore
    operations: StoreSlot  # its trees, as the router serves them
    journal: Journal | None
    journals: JournalsOfStore
    slot: int  # of the router (memfs.contract.numbers): 0 for a mount of one store
    feed: ChangeFeed | None = None
    # its background tasks failed (the others keep running): why, for ``memfs status``
    failed: str | None = None
    flush_errors: list[str] = field(default_factory=list)  # its final flush's, for the report

    @property
    def read_only(self) -> bool:
        return self.core.read_only
