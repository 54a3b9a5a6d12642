"""Fixtures of the ``memfs sync`` tests: ``sync_factory`` makes synced directories of fresh
stores on the session's server (``kit.synced.SyncMaker``) and stops them all in teardown."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import anthropic
import pytest

from kit.servers import ServerProcess
from kit.synced import SyncedDir, SyncMaker


@pytest.fixture
def sync_factory(
    server: ServerProcess, sdk: anthropic.Anthropic, tmp_path: Path
) -> Iterator[Callable[..., SyncedDir]]:
    env = server.client_env()
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg-cache")  # journals never in ~/.cache
    maker = SyncMaker(sdk, env, tmp_path)
    try:
        yield maker
    finally:
        maker.close()
