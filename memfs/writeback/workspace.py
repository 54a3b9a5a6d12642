"""Which workspace a write-back journal belongs to: ``WorkspaceId``, the API and the normalised
base URL of the server whose store a mount holds.

A journal's records are uploaded to the server they were written for and to no other: one store
id can name two stores (``agent-memory`` on a dev and on a prod Databricks workspace, a Memory
Stores database copied or restored on another server). So a journal's directory is named by its
workspace as well as by its store (``directory_name``: ``workspace-<host>-<digest>``, below the
store's directory), and it records which workspace it belongs to in ``workspace.json`` (0600:
``record``), which a mount of another workspace reads to say in ``memfs status`` which workspace
the journal waits for (``recorded``).

The base URL is normalised so that one server has one name (``normalise_base_url``): scheme and
host in lower case, the default port dropped (80 for http, 443 for https), the path without
empty, ``.``, ``..`` or trailing segments. A ``user:password@`` part, a query and a fragment are
dropped: a credential never names a directory nor lands in a file.

This module must not know about records, slots or locks (``memfs.writeback.journal``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from memfs.host.private import NotPrivateError, check_private_file, replace_file

log = logging.getLogger(__name__)

WORKSPACE_FILE = "workspace.json"
PREFIX = "workspace-"  # of the directory of one workspace's journal, below the store's
DEFAULT_PORTS = {"http": 80, "https": 443}
_NOT_IN_NAME = re.compile(r"[^a-z0-9.-]")


def normalise_base_url(url: str) -> str:
    """``scheme://host[:port][/path]`` of ``url`` (module docstring); never its credentials."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".")  # urlsplit lowers it and drops user:password@
    if ":" in host:
        host = f"[{host}]"  # IPv6
    port = parts.port
    if port is not None and port != DEFAULT_PORTS.get(scheme):
        host += f":{port}"
    segments: list[str] = []
    for segment in parts.path.split("/"):
        if segment == "..":
            if segments:
                segments.pop()
        elif segment not in ("", "."):
            segments.append(segment)
    return f"{scheme}://{host}" + "".join(f"/{segment}" for segment in segments)


@dataclass(frozen=True)
class WorkspaceId:
    """The server a journal's records are for: ``api`` (``memory-stores`` or ``databricks``,
    as ``memfs mount --api`` names them) and its normalised ``base_url``."""

    api: str
    base_url: str

    @classmethod
    def of(cls, api: str, base_url: str) -> WorkspaceId:
        return cls(api, normalise_base_url(base_url))

    def __str__(self) -> str:
        return f"{self.base_url} ({self.api})"

    def directory_name(self, store_key: str) -> str:
        """The directory, below the store's, of this workspace's journal of ``store_key``: the
        host for a person, and a digest of all three so that no two workspaces share one."""
        digest = hashlib.sha256(
            json.dumps([self.api, self.base_url, store_key]).encode()
        ).hexdigest()[:16]
        host = _NOT_IN_NAME.sub("_", urlsplit(self.base_url).netloc)[:64]
        return f"{PREFIX}{host}-{digest}"

    def document(self, store_key: str) -> dict[str, Any]:
        return {"api": self.api, "base_url": self.base_url, "store": store_key}


class WorkspaceMismatchError(Exception):
    """A journal directory records another workspace (the message is one line for a person)."""


def record(directory: Path, workspace: WorkspaceId, store_key: str) -> None:
    """Make ``directory`` say that its journal is ``workspace``'s journal of ``store_key``: write
    ``workspace.json`` if it is missing; refuse (``WorkspaceMismatchError``) if it names
    another. ``NotPrivateError`` if it is not a file of ours alone."""
    path = directory / WORKSPACE_FILE
    mine = workspace.document(store_key)
    found = _read(path)
    if found is None:
        data = (json.dumps(mine, indent=1) + "\n").encode()
        replace_file(path, data, "journal's workspace file", durable=True)
    elif found != mine:
        raise WorkspaceMismatchError(
            f"the journal directory {directory} records the store {found.get('store')!r} of "
            f"{found.get('base_url')} ({found.get('api')}), not this mount's "
            f"{store_key!r} of {workspace}: its records are not uploaded here"
        )


def recorded(directory: Path, store_key: str) -> WorkspaceId | None:
    """The workspace whose journal of ``store_key`` ``directory`` holds; None if it records
    none, another store, or cannot be trusted (logged)."""
    try:
        found = _read(directory / WORKSPACE_FILE)
    except (NotPrivateError, OSError) as exc:
        log.warning("journal directory %s not considered: %s", directory, exc)
        return None
    if found is None or found.get("store") != store_key:
        return None
    api, base_url = found.get("api"), found.get("base_url")
    if not isinstance(api, str) or not isinstance(base_url, str):
        return None
    return WorkspaceId(api, base_url)


def _read(path: Path) -> dict[str, Any] | None:
    """``workspace.json`` as a dict (None: there is none; a file that is no JSON object reads
    as an empty one, which matches no workspace)."""
    if not os.path.lexists(path):
        return None
    check_private_file(path, "journal's workspace file", why=": it says where records go")
    try:
        found = json.loads(path.read_bytes())
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}
