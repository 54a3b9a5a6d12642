"""The ``--api memory-stores|databricks`` choice and its Databricks options (``--actor``,
``--session``, ``--profile``), shared by every command that opens a store of either API
(``memfs mount``, ``memfs search``): the same options, help and one-line usage errors.

Standard library only (a command's top imports must stay light: tests/commands/test_startup.py).
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

log = logging.getLogger(__name__)

MEMORY_STORES = "memory-stores"
DATABRICKS = "databricks"


def add_api_options(parser: Any, verb: str) -> None:
    """``--api``, ``--actor``, ``--session``, ``--profile`` on ``parser``; ``verb`` is what the
    command does with an actor's entries ("mount", "search")."""
    parser.add_argument(
        "--api",
        choices=[MEMORY_STORES, DATABRICKS],
        default=MEMORY_STORES,
        help="the store's API: Anthropic Memory Stores, or Databricks Agent Memory (workspace "
        "and token from DATABRICKS_HOST and DATABRICKS_TOKEN, or --profile)",
    )
    parser.add_argument(
        "--actor", metavar="ACTOR", help=f"--api databricks: {verb} this actor's entries (required)"
    )
    parser.add_argument(
        "--session",
        metavar="SESSION",
        help="--api databricks: only this session's entries (default: the session-less ones)",
    )
    parser.add_argument(
        "--profile",
        metavar="NAME",
        help="--api databricks: the workspace of profile NAME in ~/.databrickscfg",
    )


def add_credential_options(parser: Any) -> None:
    """``--api-key-file`` and ``--base-url``: where a Memory Stores command finds its server."""
    parser.add_argument(
        "--api-key-file",
        metavar="FILE",
        help="read the API key from FILE (0600, the key alone on one line; default: "
        "$ANTHROPIC_API_KEY)",
    )
    parser.add_argument(
        "--base-url", metavar="URL", help="API base URL (default: $ANTHROPIC_BASE_URL or hosted)"
    )


def api_usage_error(
    args: argparse.Namespace, verb: str, memory_stores_only: tuple[tuple[str, Any], ...]
) -> str | None:
    """The options that do not go with ``--api`` (one line), or None. ``memory_stores_only``:
    the command's (flag, value) pairs that mean nothing to a Databricks workspace."""
    if args.api == DATABRICKS:
        if not args.actor:
            return f"--api databricks needs --actor ACTOR (whose entries to {verb})"
        if args.session == "":
            return "--session needs a session id (without it: the session-less entries)"
        for flag, value in memory_stores_only:
            if value:
                return (
                    f"{flag} is for Memory Stores; a Databricks workspace comes from "
                    "DATABRICKS_HOST and DATABRICKS_TOKEN, or --profile NAME"
                )
        return None
    for flag, value in (
        ("--actor", args.actor),
        ("--session", args.session),
        ("--profile", args.profile),
    ):
        if value:
            return f"{flag} needs --api databricks"
    return None
