"""Command groups of the ``memfs`` CLI, one module each (see ``memfs.cli``).

Each module exposes ``register(subparsers)``; the order here is the order of ``memfs --help``.
"""

from __future__ import annotations

from types import ModuleType

from memfs.commands import admin, mount, server, session, status

COMMAND_MODULES: list[ModuleType] = [server, admin, mount, status, session]
