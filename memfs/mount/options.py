"""What a mount daemon is asked to serve: one store at the root of its mount, or several (a
session's), each the directory named by its slug (``MountOptions``, ``StoreSpec``).

Plain data, checked here (``check_slugs``) and read by ``memfs.mount.daemon``; the command
line (``memfs.commands.mount``) and the session runner build it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memfs.core import DEFAULT_LOCAL_BYTES
from memfs.mount.owner import Owner
from memfs.mount.statedir import MountError

FINAL_FLUSH_SECONDS = 30.0


@dataclass(frozen=True)
class StoreSpec:
    """One store of a mount of several (``MountOptions.stores``): the directory ``slug`` at
    the mount's root, and how to reach the store (as the single-store options say it)."""

    slug: str
    store: str
    read_only: bool = False
    api: str = "memory-stores"
    api_key_file: str | None = None
    base_url: str | None = None
    session_id: str | None = None
    actor: str | None = None
    dbx_session: str | None = None
    profile: str | None = None
    replay_legacy_journal: bool = False


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
    # a mount of several stores (a session): each a directory at the root, every other name
    # there local scratch of at most ``scratch_bytes`` (None: ``local_bytes``); when set, the
    # single-store fields above (store, read_only, api, ...) are not used
    stores: tuple[StoreSpec, ...] = ()
    scratch_bytes: int | None = None

    def store_specs(self) -> list[StoreSpec]:
        """The stores to serve: ``stores``, or the one the single-store fields name (its slug
        is empty: it is the mount's root)."""
        if self.stores:
            return list(self.stores)
        return [
            StoreSpec(
                slug="",
                store=self.store,
                read_only=self.read_only,
                api=self.api,
                api_key_file=self.api_key_file,
                base_url=self.base_url,
                session_id=self.session_id,
                actor=self.actor,
                dbx_session=self.dbx_session,
                profile=self.profile,
                replay_legacy_journal=self.replay_legacy_journal,
            )
        ]


def check_slugs(specs: list[StoreSpec]) -> None:
    """Refuse slugs that are not one distinct name each (a directory at the mount's root)."""
    seen: set[str] = set()
    for spec in specs:
        slug = spec.slug
        # a name at the root, and the prefix of log lines: no control characters either
        bad = any(ord(c) < 0x20 or ord(c) == 0x7F for c in slug)
        if slug in ("", ".", "..") or "/" in slug or bad or len(slug.encode()) > 255:
            raise MountError(f"{slug!r} cannot name a store's directory")
        if slug in seen:
            raise MountError(f"two stores are named {slug!r}")
        seen.add(slug)
