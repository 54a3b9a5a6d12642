"""The options of one filesystem core (``VfsConfig``) and the names the core reserves.

It must not hold state: the objects of a core read these, nothing changes them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from memfs.core.model.budget import DEFAULT_LOCAL_BYTES
from memfs.core.model.localfiles import LocalNames
from memfs.host.portable import user_id

# here, not beside the cache and the prefetcher they bound: the model floor imports nothing above
DEFAULT_CONTENT_BYTES = 64 * 1024 * 1024  # the clean content cache (--cache-size)
DEFAULT_LOOKAHEAD = 4  # directories fetched ahead of a walk, concurrently (--readahead-dirs)

# a store API without a count limit: statfs shows this many files (statfs needs a number)
UNLIMITED_MEMORIES = 1_000_000
RESERVED_ROOT_NAMES = frozenset({".versions", ".search"})  # the read-only trees of a mount


@dataclass(frozen=True)
class VfsConfig:
    read_only: bool = False
    grace: float = 2.0  # deferred delete / move window (rule 3)
    update_delay: float = 0.5  # upload of an existing memory after a save
    new_file_delay: float = 1.0  # a new file must be closed and left alone this long
    listing_ttl: float = 1.0  # without a change feed vouching for listings (memfs.core.fetch.cache)
    cache_bytes: int = DEFAULT_CONTENT_BYTES  # clean content cache bound
    # local-only files, refused content, kept copies, files waiting for the store: past it,
    # ENOSPC (memfs.core.model.budget)
    local_bytes: int = DEFAULT_LOCAL_BYTES
    walk_lookahead: int = DEFAULT_LOOKAHEAD  # directories fetched ahead of grep -r (prefetch)
    server_search: bool = True  # .search asks the server if it offers search, else a local index
    fsync_timeout: float = 30.0  # fsync retries transient upload failures this long, then EIO
    # the owner and modes of what the store has no mode for (memories, derived directories);
    # created files take the creator's, and chmod/chown change them, locally (docs/semantics.md)
    uid: int = field(default_factory=lambda: user_id() or 0)
    gid: int = field(default_factory=os.getgid)
    umask: int = 0o022
    local_names: LocalNames = field(default_factory=LocalNames)

    @property
    def file_mode(self) -> int:
        return 0o666 & ~self.umask

    @property
    def dir_mode(self) -> int:
        return 0o777 & ~self.umask
