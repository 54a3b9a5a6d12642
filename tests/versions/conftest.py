"""Fixtures for the .versions tests: the real-mount fixtures of ``tests/mount`` are reused."""

from __future__ import annotations

from mount.conftest import mount_factory, sdk  # noqa: F401  (fixtures)
