"""What ``memfs stores …`` and ``memfs memories …`` do: each action against the API, its output
(aligned tables, or ``--json`` for scripts) and its exit code.

``memfs.commands.admin`` parses the command line and imports this module only to run an action
(it brings trio and httpx). It talks to the API only through ``memfs.api.StoreClient`` and must
not import httpx or print tracebacks for expected errors: those become one line
``memfs: <message>`` on stderr. The API key comes from ``ANTHROPIC_API_KEY`` or
``--api-key-file``, never from argv, and is scrubbed from anything printed.

STORE arguments are a store id (``memstore_…``) or an exact store name.

Exit codes: ``memfs.contract.exit_codes`` (the same for every command). What every action
shares (its error, output, how a PATH names a memory) is ``memfs.commands.action_support``; a
memory's versions (``log``, ``cat --version``, ``diff``) are ``memfs.commands.version_actions``.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

from memfs.api import StoreClient
from memfs.api.config import ClientConfig, ConfigError
from memfs.commands import version_actions
from memfs.commands.action_support import (
    CommandError,
    memory_at,
    print_json,
    print_table,
    rooted,
    store_path,
    time_text,
    write_text,
)
from memfs.commands.api_options import DATABRICKS
from memfs.contract.errors import ApiConnectionError, ApiError, PathConflictError
from memfs.contract.exit_codes import (
    EXIT_CONFLICT,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    exit_code_for,
)
from memfs.contract.models import Memory, MemoryPrefix, MemoryStore
from memfs.contract.paths import PathError, as_prefix, validate_prefix

log = logging.getLogger(__name__)

# A command-line tool should fail fast when the server is down: fewer retries than a mount.
CLI_MAX_RETRIES = 2

_SHA256 = re.compile(r"^[0-9a-f]{64}$")

Command = Callable[[StoreClient, argparse.Namespace], Awaitable[int]]


# ---------------------------------------------------------------------------------------------
# Output


def _shorten(text: str, width: int = 40) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= width else one_line[: width - 1] + "…"


def _print_store(store: MemoryStore) -> None:
    rows = [
        ("id", store.id),
        ("name", store.name),
        ("description", store.description),
        ("created", time_text(store.created_at)),
        ("updated", time_text(store.updated_at)),
        ("archived", time_text(store.archived_at) or "no"),
    ]
    rows += [("metadata", f"{key}={value}") for key, value in sorted(store.metadata.items())]
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label.ljust(width)}  {value}".rstrip())


# ---------------------------------------------------------------------------------------------
# Argument helpers


def _prefix(text: str | None) -> str | None:
    if text is None or text == "/" or text == "":
        return None
    try:
        return validate_prefix(as_prefix(rooted(text)))
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
        print_json(store.to_json())
    else:
        print(f"created store {store.name!r} ({store.id})")
    return EXIT_OK


async def _stores_list(client: StoreClient, args: argparse.Namespace) -> int:
    stores = [s async for s in client.list_stores(include_archived=args.archived, limit=100)]
    if args.json:
        print_json([s.to_json() for s in stores])
        return EXIT_OK
    rows = [
        [s.id, s.name, time_text(s.created_at), time_text(s.archived_at), _shorten(s.description)]
        for s in stores
    ]
    headers = ["ID", "NAME", "CREATED", "ARCHIVED", "DESCRIPTION"]
    if not args.archived:
        headers = headers[:3] + headers[4:]
        rows = [row[:3] + row[4:] for row in rows]
    print_table(headers, rows, right=set())
    return EXIT_OK


async def _stores_show(client: StoreClient, args: argparse.Namespace) -> int:
    store = await client.resolve_store(args.store)
    if args.json:
        print_json(store.to_json())
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
        print_json(store.to_json())
    else:
        _print_store(store)
    return EXIT_OK


async def _stores_archive(client: StoreClient, args: argparse.Namespace) -> int:
    store = await client.resolve_store(args.store)
    store = await client.archive_store(store.id)
    if args.json:
        print_json(store.to_json())
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
        print_json({"id": store.id, "type": "memory_store_deleted"})
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
        print_json([_item_json(item) for item in items])
        return EXIT_OK
    rows = []
    for item in items:
        if isinstance(item, MemoryPrefix):
            rows.append(["-", "", "", item.path])
        else:
            rows.append(
                [str(item.content_size_bytes), time_text(item.updated_at), item.id, item.path]
            )
    print_table(["SIZE", "UPDATED", "ID", "PATH"], rows, right={0})
    return EXIT_OK


async def _memories_cat(client: StoreClient, args: argparse.Namespace) -> int:
    path = store_path(args.path)
    store = await client.resolve_store(args.store)
    if args.version is not None:
        return await version_actions.cat_version(client, store, path, args)
    found = await memory_at(client, store, path)
    memory = await client.get_memory(store.id, found.id)
    if args.json:
        print_json(memory.to_json())
    else:
        write_text(memory.content or "")
    return EXIT_OK


async def _memories_put(client: StoreClient, args: argparse.Namespace) -> int:
    path = store_path(args.path)
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
            existing = await memory_at(client, store, path)
    if memory is None:
        assert existing is not None
        memory = await client.update_memory(
            store.id, existing.id, content=content, expected_sha256=expected
        )
        changed = memory.memory_version_id != existing.memory_version_id
        action = "updated" if changed else "unchanged"
    if args.json:
        print_json({"action": action, "memory": memory.to_json(full=False)})
    else:
        print(
            f"{action} {memory.path} ({memory.content_size_bytes} bytes, "
            f"sha256 {memory.content_sha256[:12]}…, {memory.id})"
        )
    return EXIT_OK


async def _memories_rm(client: StoreClient, args: argparse.Namespace) -> int:
    path = store_path(args.path)
    expected = _sha(args.if_sha)
    store = await client.resolve_store(args.store)
    memory = await memory_at(client, store, path)
    await client.delete_memory(store.id, memory.id, expected_sha256=expected)
    if args.json:
        print_json({"id": memory.id, "type": "memory_deleted", "path": memory.path})
    else:
        print(f"deleted {memory.path} ({memory.id})")
    return EXIT_OK


async def _memories_mv(client: StoreClient, args: argparse.Namespace) -> int:
    source, target = store_path(args.source), store_path(args.target)
    store = await client.resolve_store(args.store)
    memory = await memory_at(client, store, source)
    moved = await client.update_memory(store.id, memory.id, path=target)
    if args.json:
        print_json(moved.to_json(full=False))
    else:
        print(f"moved {source} -> {moved.path} ({moved.id})")
    return EXIT_OK


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
    "memories log": version_actions.memories_log,
    "memories diff": version_actions.memories_diff,
}
