"""A store deleted while mounted: noticing it once, and handing pending changes over as files.

A 404 from a request about the store (an upload, a listing, the change feed) may mean that one
memory is gone or that the whole store is: ``StoreGone.confirm`` asks for the store itself, and
only its own 404 counts. From then on nothing can ever be uploaded: the write-back queue stops
trying (``StoreGoneError`` is permanent, ENODEV for the writer), the change feed stops, the
mount refuses changes with ENODEV, and ``memfs status`` says so. At unmount, the content of
every journal record is written as a plain file ``<cache dir>/<store id>/orphaned-<UTC
time>/<memory path>`` (``hand_over``) and the record is dropped, so no later mount ever tries
to replay it (docs/semantics.md, "A store deleted while mounted").

This module must not decide POSIX semantics (``vfs``) nor touch FUSE.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from memfs.contract import paths
from memfs.contract.errors import ApiConnectionError, ApiError, NotFoundError, StoreGoneError
from memfs.contract.store_api import StoreAPI
from memfs.core.model.clashes import derived_name
from memfs.host.private import create_file, private_dir

log = logging.getLogger(__name__)


class StoreGone:
    """Whether the mounted store still exists (see the module docstring)."""

    def __init__(self, store: StoreAPI) -> None:
        self.store = store
        self.store_id = store.store_id
        self.since: str | None = None  # UTC time it was noticed

    @property
    def gone(self) -> bool:
        return self.since is not None

    def error(self) -> StoreGoneError:
        return StoreGoneError(
            f"the memory store {self.store_id} no longer exists (deleted while mounted)"
        )

    async def confirm(self, exc: BaseException) -> bool:
        """After ``exc`` from a request about the store: True if the store itself is gone."""
        if self.gone:
            return True
        if not isinstance(exc, NotFoundError):
            return False
        try:
            exists = await self.store.store_exists()
        except (ApiError, ApiConnectionError):
            return False  # cannot tell now: the next 404 asks again
        if not exists:
            self.since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            log.error(
                "the memory store %s no longer exists (deleted while mounted): nothing can be "
                "uploaded any more, changes fail with ENODEV; pending changes are handed over "
                "as plain files at unmount",
                self.store_id,
            )
            return True
        return False


def hand_over(
    base: Path, items: list[tuple[str, bytes | None]], when: str | None = None
) -> tuple[Path, list[str]]:
    """Write each ``(memory path, content)`` as a plain file below ``base/orphaned-<time>/``;
    returns the directory and one line per item (content None: nothing to hand over).

    Deepest paths first, so that a file and a directory of one name (``/x`` and ``/x/y``) both
    fit: the file then takes the derived name of ``memfs.core.model.clashes`` (``x.file-clash``)."""
    stamp = when or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    directory = base / f"orphaned-{stamp}"
    private_dir(directory, "directory of orphaned copies")
    lines = []
    for path, data in sorted(items, key=lambda item: (-item[0].count("/"), item[0])):
        if data is None:
            lines.append(f"{path}: no local content to hand over")
            continue
        target = _target(directory, path)
        create_file(target, data, "orphaned copy", create_mode=0o700)
        lines.append(f"{path} -> {target}")
    return directory, lines


def _target(directory: Path, path: str) -> Path:
    """Where ``path`` goes below ``directory`` (never outside it, never over another file)."""
    segments = path.strip("/").split("/")
    if not paths.is_valid_path(path):  # not a memory path: one plain name, nothing above it
        flat = "_".join(segments)
        segments = [flat if flat not in ("", ".", "..") else "unnamed"]
    parent = directory.joinpath(*segments[:-1])  # made by create_file

    def taken(candidate: str) -> bool:
        return os.path.lexists(parent / candidate)

    name = segments[-1]
    if taken(name):
        name = derived_name(name, taken)
    return parent / name
