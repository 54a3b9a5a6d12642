"""``CoreParts``: the objects one store's core is made of, in one bundle.

``memfs.core.build`` makes each part with its own collaborators and hands the bundle to
``Vfs`` (the file operations) and to ``reports`` (what the core says about itself). It holds
references only: the state they share is ``memfs.core.model.state``'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from memfs.contract.store_api import StoreAPI
from memfs.core.fetch.cache import ContentCache, ListingCache
from memfs.core.fetch.orphans import StoreGone
from memfs.core.fetch.prefetch import BulkFetcher
from memfs.core.fetch.usage import StoreUsage
from memfs.core.model.attrs import Attributes
from memfs.core.model.budget import LocalBudget
from memfs.core.model.handles import OpenFiles
from memfs.core.model.state import CoreState
from memfs.core.ops.commit import Commits
from memfs.core.ops.copies import LocalCopies
from memfs.core.ops.descriptions import Descriptions
from memfs.core.ops.durable import Durable
from memfs.core.ops.identity import Identities
from memfs.core.ops.namespace import Namespace
from memfs.core.ops.remote import RemoteChanges
from memfs.core.ops.rename import Renames
from memfs.core.ops.truncate import Truncates
from memfs.core.ops.uploader import Uploader
from memfs.search.tree import SearchTree
from memfs.versions.tree import VersionsTree
from memfs.writeback.queue import WriteBack


@dataclass(frozen=True)
class CoreParts:
    """The objects a core is made of (``memfs.core.build`` makes them, each with its own
    collaborators), handed to ``Vfs`` in one bundle."""

    state: CoreState
    store: StoreAPI  # short deadlines: a syscall waits on these calls
    contents: ContentCache
    listings: ListingCache
    bulk: BulkFetcher
    usage: StoreUsage  # memories and bytes for statfs: counted once, then kept by the feed
    gone: StoreGone  # the store deleted while mounted
    versions: VersionsTree  # the read-only /.versions tree (fuse_ops dispatches to it)
    search: SearchTree  # the read-only /.search tree (likewise)
    writeback: WriteBack
    durable: Durable  # the journal of acknowledged changes, conflict copies, replay
    namespace: Namespace
    remote: RemoteChanges
    identities: Identities
    copies: LocalCopies
    commits: Commits
    files: OpenFiles
    # local-only files, refused content, kept copies, content the store could not take:
    # past it ENOSPC
    budget: LocalBudget
    attrs: Attributes
    uploader: Uploader
    renames: Renames
    truncates: Truncates
    descriptions: Descriptions  # user.description (fuse_ops dispatches to it)
