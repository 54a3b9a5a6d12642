"""Fixtures for real FUSE mounts: ``mount``, a fresh store mounted at a temp directory.

``mount`` is a ``kit.mounts.MountedStore``: ``.path``, ``.store_id``, ``.sdk`` (the official
SDK), and synchronous helpers to read the store (``memories()``, ``content(path)``,
``versions()``), to write it from outside (``put``), to wait for the daemon's uploads
(``settle()``) and to unmount/remount. ``mount_factory`` (``tests/conftest.py``) mounts with
options (read-only, another store, extra arguments); ``private_mount`` does the same on
``fresh_server``, a server of the test's own (to fill its store, stop or restart it).
Teardown always unmounts: ``memfs umount``, then ``fusermount3 -uz`` and killing the daemon,
even when the test failed.

Every test in this directory is marked ``fuse``. Editor/tool matrices can build on these.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from kit.mounts import MountedStore, MountMaker


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.fuse)


@pytest.fixture
def mount(mount_factory: Callable[..., MountedStore]) -> MountedStore:
    return mount_factory()


@pytest.fixture
def private_mount(fresh_server: Any, tmp_path: Path) -> Iterator[Callable[..., MountedStore]]:
    """Like ``mount_factory``, on ``fresh_server`` (which a test may stop or restart)."""
    sdk = anthropic.Anthropic(
        api_key=fresh_server.api_key, base_url=fresh_server.base_url, max_retries=0
    )
    maker = MountMaker.with_cache(sdk, fresh_server.client_env(), tmp_path, "errno")
    try:
        yield maker
    finally:
        maker.close()
        sdk.close()
