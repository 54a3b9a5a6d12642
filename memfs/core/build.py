"""The one place the filesystem core is put together: ``build_core``.

The daemon and the FUSE-free tests build a core the same way, from a ``StoreAPI`` (any store
API; see ``memfs.store_api``) and a ``VfsConfig``. Every collaborator is made here and handed
to the objects that use it.
"""

from __future__ import annotations

from memfs.core.vfs import Vfs, VfsConfig
from memfs.store_api import StoreAPI


def build_core(
    store: StoreAPI, config: VfsConfig | None = None, *, upload_store: StoreAPI | None = None
) -> Vfs:
    """A core for one store. ``store`` answers the calls a syscall waits on (short deadlines);
    ``upload_store`` (default: ``store``) runs background uploads (long deadlines)."""
    return Vfs(store, config, upload_store=upload_store)
