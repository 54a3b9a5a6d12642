"""Fixtures for session tests: the API view, an isolated state dir, a root that is cleaned up."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .helpers import Api, stop_and_unmount


@pytest.fixture
def api(server: Any) -> Api:
    return Api(server)


@pytest.fixture
def session_env(server: Any, tmp_path: Path) -> dict[str, str]:
    env = server.client_env()
    env["MEMFS_STATE_DIR"] = str(tmp_path / "state")
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg-cache")  # journals never in ~/.cache
    return env


@pytest.fixture
def root(tmp_path: Path, session_env: dict[str, str]) -> Iterator[Path]:
    """A session root; teardown always stops the session and unmounts whatever is left."""
    path = tmp_path / "memory"
    try:
        yield path
    finally:
        stop_and_unmount(path, session_env)
