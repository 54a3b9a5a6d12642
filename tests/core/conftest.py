"""Fixtures of the FUSE-free core tests: a ``FakeStore`` and a private cache directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from kit.fake_store import FakeStore


@pytest.fixture
def store() -> FakeStore:
    return FakeStore()


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "cache"
    directory.mkdir(mode=0o700)
    return directory
