"""Command groups of the ``memfs`` CLI, one module each (see ``memfs.cli``)."""

from __future__ import annotations

import importlib
from types import ModuleType

_NAMES = ["server", "admin", "mount", "session", "status"]


def _load() -> list[ModuleType]:
    modules = []
    for name in _NAMES:
        try:
            modules.append(importlib.import_module(f"memfs.commands.{name}"))
        except ModuleNotFoundError as exc:  # a command group not written yet
            if exc.name != f"memfs.commands.{name}":
                raise
    return modules


COMMAND_MODULES = _load()
