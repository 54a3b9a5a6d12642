"""Command groups of the ``memfs`` CLI, one module each (see ``memfs.cli``).

Each module exposes ``register(subparsers)``; the order here is the order of ``memfs --help``
(``completion`` comes last: it completes the whole parser). Importing a command module and
registering its parsers must stay cheap: a module imports only the standard library and
``memfs.commands`` at its top, and what its commands run on (trio, httpx, ``memfs.api``, the
daemon, the server) inside the functions that run them.
"""

from __future__ import annotations

from types import ModuleType

from memfs.commands import (
    admin,
    completion,
    export,
    import_tree,
    mcp,
    mount,
    search,
    server,
    session,
    status,
    sync,
    umount,
)

COMMAND_MODULES: list[ModuleType] = [
    server,
    admin,
    search,
    export,
    import_tree,
    mount,
    umount,
    status,
    sync,
    session,
    mcp,
]

__all__ = ["COMMAND_MODULES", "completion"]
