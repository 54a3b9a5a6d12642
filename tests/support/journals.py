"""What a cache directory's write-back journals hold, as the next mount would count it."""

from __future__ import annotations

from pathlib import Path

from memfs.writeback.journal import Journal


def journal_records(cache: Path) -> int:
    """The live records of every store's journal slots under ``cache`` (any format)."""
    if not cache.is_dir():
        return 0
    return sum(Journal.pending(cache, store.name)[1] for store in cache.iterdir() if store.is_dir())
