"""``memfs mcp STORE --print-config``: the configurations of the clients docs/mcp.md covers
(Claude Code, Claude Desktop, Cursor), over stdio and, where the server serves the tools over
HTTP (``memfs server``), over HTTP, ready to paste.

Never a secret: a key is named by the environment variable it comes from, which Claude Code
(``${VAR}``) and Cursor (``${env:VAR}``) expand when they start the server; Claude Desktop
expands nothing, so its block takes the key from a file (Memory Stores) or a profile
(Databricks), and a note says how to write it from the variable. Pure: the caller resolves the
store and the server (``memfs.commands.mcp``).
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

DESKTOP_KEY_FILE = "~/.config/memfs/api-key"  # Claude Desktop's key file, when none was given
DESKTOP_PROFILE = "memfs"  # Claude Desktop's Databricks profile, when none was given


@dataclass(frozen=True)
class Launch:
    """``memfs mcp`` as a client starts it: no secret in any field."""

    command: str  # the executable, absolute
    args: list[str]  # from "mcp" on (with a prefix such as "-m memfs" for a Python)
    env: dict[str, str]  # literal values: a base URL, a workspace host
    key_variable: str | None  # where the key comes from; None: a key file or profile in args
    api: str = "memory-stores"  # or "databricks"


@dataclass(frozen=True)
class HttpEndpoint:
    """The store's MCP endpoint on ``memfs server``."""

    url: str
    key_variable: str
    bearer: bool  # Authorization: Bearer (else x-api-key)
    headers: dict[str, str] = field(default_factory=dict)  # literal: a session id
    note: str = ""  # where to set key_variable from, when the key came from no variable


def server_name(store: str) -> str:
    """The key of the server in ``mcpServers``: the store's name, lower-case, dashes."""
    return re.sub(r"[^a-z0-9]+", "-", store.lower()).strip("-")[:40] or "memfs"


def configurations(
    name: str, launch: Launch, http: HttpEndpoint | None
) -> list[tuple[list[str], dict[str, Any]]]:
    """(comment lines, ``mcpServers`` document) of each client and transport."""

    def stdio(env: dict[str, str], args: list[str]) -> dict[str, Any]:
        server: dict[str, Any] = {"command": launch.command, "args": args}
        if env:
            server["env"] = env
        return {"mcpServers": {name: server}}

    def with_key(reference: str) -> dict[str, str]:
        if launch.key_variable is None:
            return dict(launch.env)
        return {**launch.env, launch.key_variable: reference.format(launch.key_variable)}

    found: list[tuple[list[str], dict[str, Any]]] = [
        (
            [
                "Claude Code, stdio: .mcp.json in a project, or the server object to "
                f"`claude mcp add-json {name} '...'`"
            ],
            stdio(with_key("${{{}}}"), launch.args),
        ),
        (
            ["Cursor, stdio: .cursor/mcp.json or ~/.cursor/mcp.json"],
            stdio(with_key("${{env:{}}}"), launch.args),
        ),
        _desktop(launch, stdio),
    ]
    if http is not None:
        found += [
            (
                ["Claude Code, HTTP (memfs server): .mcp.json", *_noted(http)],
                {"mcpServers": {name: {"type": "http", **_http(http, "${{{}}}")}}},
            ),
            (
                ["Cursor, HTTP (memfs server): .cursor/mcp.json", *_noted(http)],
                {"mcpServers": {name: _http(http, "${{env:{}}}")}},
            ),
        ]
    return found


def _desktop(launch: Launch, stdio: Any) -> tuple[list[str], dict[str, Any]]:
    title = "Claude Desktop, stdio: claude_desktop_config.json (Settings, Developer, Edit Config)"
    variable = launch.key_variable
    if variable is None:
        return [title], stdio(dict(launch.env), launch.args)
    if launch.api == "databricks":
        note = (
            f"Claude Desktop passes no shell variables: give ~/.databrickscfg a "
            f"[{DESKTOP_PROFILE}] profile with host = {launch.env.get('DATABRICKS_HOST', '…')} "
            f"and token = the value of ${variable}"
        )
        env = {k: v for k, v in launch.env.items() if not k.startswith("DATABRICKS_")}
        return [title, note], stdio(env, [*launch.args, "--profile", DESKTOP_PROFILE])
    key_file = os.path.expanduser(DESKTOP_KEY_FILE)  # Desktop runs no shell to expand ~
    note = (
        "Claude Desktop passes no shell variables: write the key to a file first: "
        f"(umask 077; mkdir -p {os.path.dirname(key_file)}; printf '%s' \"${variable}\" > "
        f"{key_file})"
    )
    return [title, note], stdio(dict(launch.env), [*launch.args, "--api-key-file", key_file])


def _noted(http: HttpEndpoint) -> list[str]:
    return [http.note] if http.note else []


def _http(http: HttpEndpoint, reference: str) -> dict[str, Any]:
    key = reference.format(http.key_variable)
    auth = {"Authorization": f"Bearer {key}"} if http.bearer else {"x-api-key": key}
    return {"url": http.url, "headers": {**auth, **http.headers}}


def render(found: list[tuple[list[str], dict[str, Any]]]) -> str:
    """Each configuration: its comment lines (``# ``), then its JSON; a blank line between."""
    blocks = [
        "\n".join([*(f"# {line}" for line in comments), json.dumps(document, indent=2)])
        for comments, document in found
    ]
    return "\n\n".join(blocks) + "\n"
