"""``memfs memories log``, ``cat --version`` and ``diff``: a memory's versions, one old
version's text, and the unified diff of two (coloured on a terminal without ``NO_COLOR``)."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from memfs.api import StoreClient
from memfs.commands.action_support import (
    CommandError,
    not_found,
    print_json,
    print_table,
    store_path,
    time_text,
    write_text,
)
from memfs.contract.errors import NotFoundError
from memfs.contract.exit_codes import EXIT_DIFFERENT, EXIT_NOT_FOUND, EXIT_OK
from memfs.contract.models import Memory, MemoryStore, MemoryVersion
from memfs.contract.unified_diff import unified_diff

log = logging.getLogger(__name__)


async def memories_log(client: StoreClient, args: argparse.Namespace) -> int:
    path = store_path(args.path) if args.path else None
    store = await client.resolve_store(args.store)
    versions: list[MemoryVersion] = []
    memory = await client.find_memory(store.id, path) if path else None
    if memory is not None:
        source = client.list_versions(store.id, memory_id=memory.id, limit=100)
    else:
        source = client.list_versions(store.id, limit=100)
    async for version in source:
        # For a path with no live memory, show the versions written at that path.
        if path is None or memory is not None or version.path == path:
            versions.append(version)
            if args.limit is not None and len(versions) >= args.limit:
                break
    if path is not None and not versions:
        raise await not_found(client, store, path)
    if args.json:
        print_json([v.to_json(full=False) for v in versions])
        return EXIT_OK
    rows = [
        [
            time_text(v.created_at),
            v.operation,
            v.created_by.describe() if v.created_by else "",
            "(redacted)" if v.redacted else (v.path or ""),
            "-" if v.content_size_bytes is None else str(v.content_size_bytes),
            v.id,
        ]
        for v in versions
    ]
    print_table(["TIME", "OPERATION", "ACTOR", "PATH", "SIZE", "ID"], rows, right={4})
    return EXIT_OK


async def cat_version(
    client: StoreClient, store: MemoryStore, path: str, args: argparse.Namespace
) -> int:
    """``cat --version V``: version V's content, V one of the versions of the memory at
    ``path`` now or of the last one there (a deleted memory's versions stay)."""
    version = await _version(client, store, args.version)
    if version.path != path:
        memory = await client.find_memory(store.id, path)
        if memory is None:
            raise await not_found(client, store, path)
        if memory.id != version.memory_id:
            raise _not_a_version_of(version, path)
    if version.operation == "deleted":  # diff shows it as an empty text; cat has nothing
        raise CommandError(
            f"version {version.id} of {path} is its deletion: it holds no content", EXIT_NOT_FOUND
        )
    if args.json:
        print_json(version.to_json())
    else:
        write_text(_content(version, path))
    return EXIT_OK


# diff's colours (SGR): on a terminal only, never with NO_COLOR set (no-color.org)
_BOLD, _RED, _GREEN, _CYAN, _RESET = "\x1b[1m", "\x1b[31m", "\x1b[32m", "\x1b[36m", "\x1b[0m"
_LINE_COLOURS = {"@": _CYAN, "-": _RED, "+": _GREEN}


async def _version(client: StoreClient, store: MemoryStore, version_id: str) -> MemoryVersion:
    """Version ``version_id`` of the store, with its content."""
    try:
        return await client.get_version(store.id, version_id)
    except NotFoundError:
        raise CommandError(
            f"no version {version_id!r} in store {store.name!r}; "
            "`memfs memories log STORE PATH` lists a memory's versions",
            EXIT_NOT_FOUND,
        ) from None


def _not_a_version_of(version: MemoryVersion, path: str) -> CommandError:
    where = f"of {version.path}" if version.path else f"of memory {version.memory_id}"
    return CommandError(
        f"version {version.id} is not a version of {path} (it is one {where})", EXIT_NOT_FOUND
    )


def _content(version: MemoryVersion, path: str) -> str:
    """A version's text: a deletion's is empty; a redacted one's is gone (not found)."""
    if version.redacted:
        raise CommandError(
            f"version {version.id} of {path} was redacted: its content is gone", EXIT_NOT_FOUND
        )
    return version.content or ""


async def _history(
    client: StoreClient, store: MemoryStore, path: str
) -> tuple[Memory | None, list[MemoryVersion]]:
    """The memory at ``path`` (None if deleted) and its versions, newest first: the live one's,
    else those of the last memory written there."""
    memory = await client.find_memory(store.id, path)
    memory_id = memory.id if memory is not None else None
    if memory_id is None:
        async for version in client.list_versions(store.id, limit=100):
            if version.path == path:
                memory_id = version.memory_id
                break
        else:
            raise await not_found(client, store, path)
    versions = [v async for v in client.list_versions(store.id, memory_id=memory_id, limit=100)]
    if not versions:  # the server's retention keeps a live memory's newest: only if it went now
        raise CommandError(
            f"no versions of {path} are kept in store {store.name!r}", EXIT_NOT_FOUND
        )
    return memory, versions


def _side(version: MemoryVersion, path: str, memory: Memory | None) -> tuple[str, str]:
    """A diff header's label and date: the version's path and id; its time and writer."""
    label = f"{version.path or path} @ {version.id}"
    if memory is not None and memory.memory_version_id == version.id:
        label += " (current)"
    elif version.operation == "deleted":
        label += " (deleted)"
    writer = version.created_by.describe() if version.created_by else "unknown writer"
    return label, f"{time_text(version.created_at)} UTC by {writer}"


def _coloured(lines: list[str]) -> list[str]:
    """The diff's lines in colour: the two headers bold, hunks cyan, removed red, added green."""
    out = []
    for i, line in enumerate(lines):
        colour = _BOLD if i < 2 else _LINE_COLOURS.get(line[:1])
        out.append(f"{colour}{line.rstrip(chr(10))}{_RESET}\n" if colour else line)
    return out


def _wants_colour() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


async def memories_diff(client: StoreClient, args: argparse.Namespace) -> int:
    """A unified diff of two versions of the memory at PATH: ``--to`` (default: the newest, the
    current content) against ``--from`` (default: the version before ``--to``; before the first
    one, nothing). Exit 0, or with ``--exit-code`` 1 when they differ (as git diff)."""
    path = store_path(args.path)
    store = await client.resolve_store(args.store)
    memory, versions = await _history(client, store, path)
    ids = [v.id for v in versions]
    for wanted in (args.to_version, args.from_version):
        if wanted is not None and wanted not in ids:
            raise _not_a_version_of(await _version(client, store, wanted), path)
    to_id = args.to_version or ids[0]
    from_id = args.from_version
    if from_id is None and ids.index(to_id) + 1 < len(ids):
        from_id = ids[ids.index(to_id) + 1]
    new = await client.get_version(store.id, to_id)
    old = await client.get_version(store.id, from_id) if from_id is not None else None
    new_label, new_date = _side(new, path, memory)
    old_label, old_date = _side(old, path, memory) if old is not None else ("/dev/null", "")
    old_text = _content(old, path) if old is not None else ""
    lines = unified_diff(old_text, _content(new, path), old_label, new_label, old_date, new_date)
    if args.json:
        print_json(
            {
                "from": old.to_json(full=False) if old is not None else None,
                "to": new.to_json(full=False),
                "diff": "".join(lines),
            }
        )
    else:
        write_text("".join(_coloured(lines) if _wants_colour() else lines))
    return EXIT_DIFFERENT if args.exit_code and lines else EXIT_OK
