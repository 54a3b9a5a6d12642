"""The real-mount fixtures of ``tests/mount`` (``mount_factory``, ``sdk``) for the model test."""

from mount.conftest import mount_factory, sdk

__all__ = ["mount_factory", "sdk"]
