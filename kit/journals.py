"""What a cache directory's write-back journals hold, as the next mount would count it, and
where a mount keeps its journal."""

from __future__ import annotations

from pathlib import Path

from memfs.writeback.journal import count_records
from memfs.writeback.workspace import PREFIX, WorkspaceId


def journal_records(cache: Path) -> int:
    """The live records of every journal under ``cache`` (any format, any workspace, and the
    journals of earlier versions that recorded none)."""
    if not cache.is_dir():
        return 0
    stores = [store for store in cache.iterdir() if store.is_dir()]
    homes = [home for store in stores for home in store.glob(f"{PREFIX}*")]
    return sum(count_records(directory) for directory in stores + homes)


def journal_home(cache: Path, store_key: str, base_url: str, api: str = "memory-stores") -> Path:
    """The directory of the journal (its slots, kept copies, orphaned changes) of a mount of
    ``store_key`` on the server at ``base_url``."""
    return cache / store_key / WorkspaceId.of(api, base_url).directory_name(store_key)
