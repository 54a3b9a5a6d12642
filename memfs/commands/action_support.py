"""What the actions of ``memfs stores …`` and ``memfs memories …`` share: their expected
failure (``CommandError``: a message and an exit code), their output (aligned tables, JSON,
UTF-8 text, times) and how a PATH argument names a memory of a store (with the near paths when
none is there)."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from memfs.api import StoreClient
from memfs.api.memory_stores import did_you_mean
from memfs.contract.exit_codes import EXIT_ERROR, EXIT_NOT_FOUND, EXIT_USAGE
from memfs.contract.models import Memory, MemoryStore
from memfs.contract.paths import PathError, validate_path

log = logging.getLogger(__name__)


class CommandError(Exception):
    """An expected failure of a command: a message for a person and an exit code."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def time_text(moment: datetime | None) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if moment else ""


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> None:
    """Aligned columns; column indexes in ``right`` are right-aligned (numbers)."""
    if not rows:
        return
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    for row in [list(headers), *rows]:
        cells = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        print("  ".join(cells).rstrip())


def write_text(text: str) -> None:
    """``text`` on stdout as UTF-8, whatever the locale (a memory is UTF-8 text)."""
    sys.stdout.flush()
    sys.stdout.buffer.write(text.encode("utf-8"))
    sys.stdout.buffer.flush()


def rooted(text: str) -> str:
    """A store path as typed: ``notes/todo.md`` is ``/notes/todo.md`` (a store has no current
    directory, so a path without its leading ``/`` can mean nothing else; ``./x`` stays
    invalid: the path rules refuse its ``.``)."""
    return text if text.startswith("/") else "/" + text


def store_path(text: str) -> str:
    try:
        return validate_path(rooted(text))
    except PathError as exc:
        raise CommandError(f"invalid path {text!r}: {exc}", EXIT_USAGE) from None


async def memory_at(client: StoreClient, store: MemoryStore, path: str) -> Memory:
    memory = await client.find_memory(store.id, path)
    if memory is None:
        raise await not_found(client, store, path)
    return memory


async def not_found(client: StoreClient, store: MemoryStore, path: str) -> CommandError:
    """No memory at ``path``, with the paths of the store near it (a typo's fix), as an unknown
    store's name is answered (``memory_stores.did_you_mean``). Lists the whole store: only on
    this error's way out."""
    paths = [
        item.path
        async for item in client.list_memories(store.id, depth=None, limit=100)
        if isinstance(item, Memory)
    ]
    hint = did_you_mean(path, paths)
    message = f"memory {path!r} not found in store {store.name!r}" + (f";{hint}" if hint else "")
    return CommandError(message, EXIT_NOT_FOUND)
