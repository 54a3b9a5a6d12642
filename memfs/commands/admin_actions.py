"""What ``memfs stores …`` and ``memfs memories …`` do: each action against the API, its output
(aligned tables, or ``--json`` for scripts) and its exit code.

``memfs.commands.admin`` parses the command line and imports this module only to run an action
(it brings trio and httpx). It talks to the API only through ``memfs.api.StoreClient`` and must
not import httpx or print tracebacks for expected errors: those become one line
``memfs: <message>`` on stderr. The API key comes from ``ANTHROPIC_API_KEY`` or
``--api-key-file``, never from argv, and is scrubbed from anything printed.

STORE arguments are a store id (``memstore_…``) or an exact store name.

Exit codes: ``memfs.contract.exit_codes`` (the same for every command).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import trio

from memfs.api import StoreClient
from memfs.api.config import ClientConfig, ConfigError
from memfs.api.memory_stores import did_you_mean
from memfs.commands.api_options import DATABRICKS
from memfs.contract.errors import ApiConnectionError, ApiError, NotFoundError, PathConflictError
from memfs.contract.exit_codes import (
    EXIT_CONFLICT,
    EXIT_DIFFERENT,
    EXIT_ERROR,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    exit_code_for,
)
from memfs.contract.models import Memory, MemoryPrefix, MemoryStore, MemoryVersion
from memfs.contract.paths import PathError, as_prefix, validate_path, validate_prefix
from memfs.contract.unified_diff import unified_diff

log = logging.getLogger(__name__)

# A command-line tool should fail fast when the server is down: fewer retries than a mount.
CLI_MAX_RETRIES = 2

_SHA256 = re.compile(r"^[0-9a-f]{64}$")

Command = Callable[[StoreClient, argparse.Namespace], Awaitable[int]]


class CommandError(Exception):
    """An expected failure of a command: a message for a person and an exit code."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


# ---------------------------------------------------------------------------------------------
# Output


def _time(moment: datetime | None) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if moment else ""


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def _print_table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> None:
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


def _shorten(text: str, width: int = 40) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= width else one_line[: width - 1] + "…"


def _print_store(store: MemoryStore) -> None:
    rows = [
        ("id", store.id),
        ("name", store.name),
        ("description", store.description),
        ("created", _time(store.created_at)),
        ("updated", _time(store.updated_at)),
        ("archived", _time(store.archived_at) or "no"),
    ]
    rows += [("metadata", f"{key}={value}") for key, value in sorted(store.metadata.items())]
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label.ljust(width)}  {value}".rstrip())


# ---------------------------------------------------------------------------------------------
# Argument helpers


def _rooted(text: str) -> str:
    """A store path as typed: ``notes/todo.md`` is ``/notes/todo.md`` (a store has no current
    directory, so a path without its leading ``/`` can mean nothing else; ``./x`` stays
    invalid: the path rules refuse its ``.``)."""
    return text if text.startswith("/") else "/" + text


def _path(text: str) -> str:
    try:
        return validate_path(_rooted(text))
    except PathError as exc:
        raise CommandError(f"invalid path {text!r}: {exc}", EXIT_USAGE) from None


def _prefix(text: str | None) -> str | None:
    if text is None or text == "/" or text == "":
        return None
    try:
        return validate_prefix(as_prefix(_rooted(text)))
    except PathError as exc:
        raise CommandError(f"invalid prefix {text!r}: {exc}", EXIT_USAGE) from None


def _sha(text: str | None) -> str | None:
    if text is not None and not _SHA256.match(text):
        raise CommandError("--if-sha needs 64 lowercase hexadecimal characters", EXIT_USAGE)
    return text


def _metadata(pairs: Sequence[str] | None, *, allow_delete: bool) -> dict[str, str | None] | None:
    """``k=v`` pairs; with ``allow_delete``, ``k=`` means delete key ``k`` (None)."""
    if not pairs:
        return None
    out: dict[str, str | None] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CommandError(f"--metadata wants KEY=VALUE, got {pair!r}", EXIT_USAGE)
        out[key] = None if (allow_delete and value == "") else value
    return out


async def _memory_at(client: StoreClient, store: MemoryStore, path: str) -> Memory:
    memory = await client.find_memory(store.id, path)
    if memory is None:
        raise await _not_found(client, store, path)
    return memory


async def _not_found(client: StoreClient, store: MemoryStore, path: str) -> CommandError:
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


def _read_input(source: str) -> str:
    """The text of FILE, or of stdin for ``-`` (a blocking read: the CLI has nothing else to do)."""
    try:
        if source == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(source, "rb") as handle:
                data = handle.read()
    except OSError as exc:
        raise CommandError(f"cannot read {source}: {exc.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        name = "standard input" if source == "-" else source
        raise CommandError(f"{name} is not UTF-8 text; memories hold UTF-8 text only") from None


# ---------------------------------------------------------------------------------------------
# Stores


async def _stores_create(client: StoreClient, args: argparse.Namespace) -> int:
    metadata = _metadata(args.metadata, allow_delete=False)
    store = await client.create_store(
        args.name,
        description=args.description,
        metadata={k: v or "" for k, v in metadata.items()} if metadata else None,
    )
    if args.json:
        _print_json(store.to_json())
    else:
        print(f"created store {store.name!r} ({store.id})")
    return EXIT_OK


async def _stores_list(client: StoreClient, args: argparse.Namespace) -> int:
    stores = [s async for s in client.list_stores(include_archived=args.archived, limit=100)]
    if args.json:
        _print_json([s.to_json() for s in stores])
        return EXIT_OK
    rows = [
        [s.id, s.name, _time(s.created_at), _time(s.archived_at), _shorten(s.description)]
        for s in stores
    ]
    headers = ["ID", "NAME", "CREATED", "ARCHIVED", "DESCRIPTION"]
    if not args.archived:
        headers = headers[:3] + headers[4:]
        rows = [row[:3] + row[4:] for row in rows]
    _print_table(headers, rows, right=set())
    return EXIT_OK


async def _stores_show(client: StoreClient, args: argparse.Namespace) -> int:
    store = await client.resolve_store(args.store)
    if args.json:
        _print_json(store.to_json())
    else:
        _print_store(store)
    return EXIT_OK


async def _stores_update(client: StoreClient, args: argparse.Namespace) -> int:
    metadata = _metadata(args.metadata, allow_delete=True)
    if args.name is None and args.description is None and metadata is None:
        raise CommandError(
            "nothing to update: give --name, --description or --metadata", EXIT_USAGE
        )
    store = await client.resolve_store(args.store)
    store = await client.update_store(
        store.id, name=args.name, description=args.description, metadata=metadata
    )
    if args.json:
        _print_json(store.to_json())
    else:
        _print_store(store)
    return EXIT_OK


async def _stores_archive(client: StoreClient, args: argparse.Namespace) -> int:
    store = await client.resolve_store(args.store)
    store = await client.archive_store(store.id)
    if args.json:
        _print_json(store.to_json())
    else:
        print(f"archived store {store.name!r} ({store.id}); it is read-only from now on")
    return EXIT_OK


def _confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        return False
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


async def _stores_delete(client: StoreClient, args: argparse.Namespace) -> int:
    store = await client.resolve_store(args.store)
    question = f"delete store {store.name!r} ({store.id}) with all its memories and versions?"
    if not args.yes and not _confirm(question):
        raise CommandError(
            f"not deleting store {store.name!r} ({store.id}): confirm with --yes", EXIT_USAGE
        )
    await client.delete_store(store.id)
    if args.json:
        _print_json({"id": store.id, "type": "memory_store_deleted"})
    else:
        print(f"deleted store {store.name!r} ({store.id})")
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# Memories


def _item_json(item: Memory | MemoryPrefix) -> dict[str, Any]:
    return item.to_json() if isinstance(item, MemoryPrefix) else item.to_json(full=False)


async def _memories_ls(client: StoreClient, args: argparse.Namespace) -> int:
    prefix = _prefix(args.prefix)
    store = await client.resolve_store(args.store)
    items = [
        item
        async for item in client.list_memories(
            store.id, path_prefix=prefix, depth=None if args.recursive else 1, limit=100
        )
    ]
    if args.json:
        _print_json([_item_json(item) for item in items])
        return EXIT_OK
    rows = []
    for item in items:
        if isinstance(item, MemoryPrefix):
            rows.append(["-", "", "", item.path])
        else:
            rows.append([str(item.content_size_bytes), _time(item.updated_at), item.id, item.path])
    _print_table(["SIZE", "UPDATED", "ID", "PATH"], rows, right={0})
    return EXIT_OK


def _write_text(text: str) -> None:
    """``text`` on stdout as UTF-8, whatever the locale (a memory is UTF-8 text)."""
    sys.stdout.flush()
    sys.stdout.buffer.write(text.encode("utf-8"))
    sys.stdout.buffer.flush()


async def _memories_cat(client: StoreClient, args: argparse.Namespace) -> int:
    path = _path(args.path)
    store = await client.resolve_store(args.store)
    if args.version is not None:
        return await _cat_version(client, store, path, args)
    found = await _memory_at(client, store, path)
    memory = await client.get_memory(store.id, found.id)
    if args.json:
        _print_json(memory.to_json())
    else:
        _write_text(memory.content or "")
    return EXIT_OK


async def _cat_version(
    client: StoreClient, store: MemoryStore, path: str, args: argparse.Namespace
) -> int:
    """``cat --version V``: version V's content, V one of the versions of the memory at
    ``path`` now or of the last one there (a deleted memory's versions stay)."""
    version = await _version(client, store, args.version)
    if version.path != path:
        memory = await client.find_memory(store.id, path)
        if memory is None:
            raise await _not_found(client, store, path)
        if memory.id != version.memory_id:
            raise _not_a_version_of(version, path)
    if version.operation == "deleted":  # diff shows it as an empty text; cat has nothing
        raise CommandError(
            f"version {version.id} of {path} is its deletion: it holds no content", EXIT_NOT_FOUND
        )
    if args.json:
        _print_json(version.to_json())
    else:
        _write_text(_content(version, path))
    return EXIT_OK


async def _memories_put(client: StoreClient, args: argparse.Namespace) -> int:
    path = _path(args.path)
    expected = _sha(args.if_sha)
    content = _read_input(args.file)
    store = await client.resolve_store(args.store)
    existing = await client.find_memory(store.id, path)
    memory: Memory | None = None
    if existing is None:
        if expected is not None:
            raise CommandError(
                f"no memory at {path} (--if-sha expected content {expected[:12]}…)",
                EXIT_CONFLICT,
            )
        try:
            memory = await client.create_memory(store.id, path, content)
            action = "created"
        except PathConflictError:  # created by someone else meanwhile: update it instead
            existing = await _memory_at(client, store, path)
    if memory is None:
        assert existing is not None
        memory = await client.update_memory(
            store.id, existing.id, content=content, expected_sha256=expected
        )
        changed = memory.memory_version_id != existing.memory_version_id
        action = "updated" if changed else "unchanged"
    if args.json:
        _print_json({"action": action, "memory": memory.to_json(full=False)})
    else:
        print(
            f"{action} {memory.path} ({memory.content_size_bytes} bytes, "
            f"sha256 {memory.content_sha256[:12]}…, {memory.id})"
        )
    return EXIT_OK


async def _memories_rm(client: StoreClient, args: argparse.Namespace) -> int:
    path = _path(args.path)
    expected = _sha(args.if_sha)
    store = await client.resolve_store(args.store)
    memory = await _memory_at(client, store, path)
    await client.delete_memory(store.id, memory.id, expected_sha256=expected)
    if args.json:
        _print_json({"id": memory.id, "type": "memory_deleted", "path": memory.path})
    else:
        print(f"deleted {memory.path} ({memory.id})")
    return EXIT_OK


async def _memories_mv(client: StoreClient, args: argparse.Namespace) -> int:
    source, target = _path(args.source), _path(args.target)
    store = await client.resolve_store(args.store)
    memory = await _memory_at(client, store, source)
    moved = await client.update_memory(store.id, memory.id, path=target)
    if args.json:
        _print_json(moved.to_json(full=False))
    else:
        print(f"moved {source} -> {moved.path} ({moved.id})")
    return EXIT_OK


async def _memories_log(client: StoreClient, args: argparse.Namespace) -> int:
    path = _path(args.path) if args.path else None
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
        raise await _not_found(client, store, path)
    if args.json:
        _print_json([v.to_json(full=False) for v in versions])
        return EXIT_OK
    rows = [
        [
            _time(v.created_at),
            v.operation,
            v.created_by.describe() if v.created_by else "",
            "(redacted)" if v.redacted else (v.path or ""),
            "-" if v.content_size_bytes is None else str(v.content_size_bytes),
            v.id,
        ]
        for v in versions
    ]
    _print_table(["TIME", "OPERATION", "ACTOR", "PATH", "SIZE", "ID"], rows, right={4})
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# Old versions: cat --version, diff

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
            raise await _not_found(client, store, path)
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
    return label, f"{_time(version.created_at)} UTC by {writer}"


def _coloured(lines: list[str]) -> list[str]:
    """The diff's lines in colour: the two headers bold, hunks cyan, removed red, added green."""
    out = []
    for i, line in enumerate(lines):
        colour = _BOLD if i < 2 else _LINE_COLOURS.get(line[:1])
        out.append(f"{colour}{line.rstrip(chr(10))}{_RESET}\n" if colour else line)
    return out


def _wants_colour() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


async def _memories_diff(client: StoreClient, args: argparse.Namespace) -> int:
    """A unified diff of two versions of the memory at PATH: ``--to`` (default: the newest, the
    current content) against ``--from`` (default: the version before ``--to``; before the first
    one, nothing). Exit 0, or with ``--exit-code`` 1 when they differ (as git diff)."""
    path = _path(args.path)
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
        _print_json(
            {
                "from": old.to_json(full=False) if old is not None else None,
                "to": new.to_json(full=False),
                "diff": "".join(lines),
            }
        )
    else:
        _write_text("".join(_coloured(lines) if _wants_colour() else lines))
    return EXIT_DIFFERENT if args.exit_code and lines else EXIT_OK


def api_refusal(args: argparse.Namespace) -> str | None:
    """Why ``memfs memories {args.action}`` cannot work on the API of ``--api`` (one line), or
    None: these commands speak Memory Stores; a Databricks entry has no versions."""
    if getattr(args, "api", None) != DATABRICKS:
        return None
    if args.action in ("diff", "log") or getattr(args, "version", None) is not None:
        what = "--version" if args.action == "cat" else f"memories {args.action}"
        return (
            f"{what} needs a Memory Stores store: Databricks Agent Memory keeps no versions "
            "(an entry holds its current content only)"
        )
    return (
        "memories cat reads Memory Stores; a Databricks entry is read on a mount "
        "(memfs mount STORE DIR --api databricks --actor A) or with memfs mcp --api databricks"
    )


# ---------------------------------------------------------------------------------------------
# Running an action


def describe(exc: BaseException) -> str:
    if isinstance(exc, ApiError):
        if exc.request_id:
            return f"{exc.message} ({exc.status} {exc.error_type}, request_id {exc.request_id})"
        return exc.message
    return str(exc)


def fail(message: str, code: int, secret: str | None) -> int:
    if secret:
        message = message.replace(secret, "********")
    print(f"memfs: {message}", file=sys.stderr)
    return code


def cli_config(args: argparse.Namespace) -> ClientConfig | int:
    """A one-shot command's client configuration (the key and base URL of ``--api-key-file``,
    ``--base-url`` or the environment; ``CLI_MAX_RETRIES``), or its exit status once one line
    said why there is none."""
    try:
        return ClientConfig.from_env(
            api_key_file=args.api_key_file,
            base_url=args.base_url,
            max_retries=CLI_MAX_RETRIES,
        )
    except ConfigError as exc:
        return fail(str(exc), EXIT_USAGE, None)


def run(args: argparse.Namespace) -> int:
    """Run the action ``memfs {args.command} {args.action}``: config, client, trio.run, and
    expected errors as exit codes."""
    command = ACTIONS[f"{args.command} {args.action}"]
    refused = api_refusal(args)
    if refused is not None:
        return fail(refused, EXIT_USAGE, None)
    config = cli_config(args)
    if isinstance(config, int):
        return config
    secret = config.api_key.reveal()

    async def main() -> int:
        async with StoreClient(config) as client:
            return await command(client, args)

    try:
        return trio.run(main)
    except CommandError as exc:
        return fail(exc.message, exc.code, secret)
    except (ApiError, ApiConnectionError) as exc:
        return fail(describe(exc), exit_code_for(exc), secret)
    except BrokenPipeError:
        return EXIT_ERROR


# The actions by their command line ("stores create"; memfs.commands.admin registers the same).
ACTIONS: dict[str, Command] = {
    "stores create": _stores_create,
    "stores list": _stores_list,
    "stores show": _stores_show,
    "stores update": _stores_update,
    "stores archive": _stores_archive,
    "stores delete": _stores_delete,
    "memories ls": _memories_ls,
    "memories cat": _memories_cat,
    "memories put": _memories_put,
    "memories rm": _memories_rm,
    "memories mv": _memories_mv,
    "memories log": _memories_log,
    "memories diff": _memories_diff,
}
