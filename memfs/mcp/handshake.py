"""``memfs mcp``'s answer to ``initialize``, given before the SDK is imported.

The SDK's import is most of ``memfs mcp``'s start-up (docs/benchmarks.md, "MCP server"), and
an agent's host waits for the ``initialize`` answer before anything else. So once the store is
open, ``memfs mcp`` reads the client's first line of stdin itself (one byte at a time: not a
byte of the next message is taken from the pipe, which the SDK's stdio transport reads from
where this stops) and, if it is an ``initialize`` request of the plain shape every client sends,
writes the answer the SDK would write: the same protocol version negotiation, capabilities,
``serverInfo`` and ``instructions``. Then the SDK is imported and given the line, replayed, as
the client's first message (``memfs.mcp.handover``): it handles that ``initialize`` as it would
have (its connection state, the client's params), and its own answer is compared with the one
sent and dropped, so the client gets one answer and everything after is the SDK's.

Anything else first (``ping``, a 2026-07-28 client's enveloped request, a notification,
malformed JSON, an ``initialize`` with fields beyond the plain shape, stdin ended) is not
answered here: the line goes to the SDK unanswered, as if it had read it.

The plain shape is narrower than what the SDK accepts, so that whatever is answered here the
SDK accepts too: ``params`` has exactly ``protocolVersion`` (a string), ``capabilities`` (an
object of objects, nested, whose only non-object is ``roots.listChanged``, a boolean) and
``clientInfo`` (``name`` and ``version``, and optionally ``title``, ``description`` and
``websiteUrl``, all strings); the id is a string or a 64-bit integer. What the SDK would answer
is pinned by ``tests/mcp_tools/test_handshake.py`` for every version it negotiates, both APIs,
read-only or not, with subscriptions or without; at run time ``handover`` compares the two.

Imports nothing of the SDK (nor of ``memfs.mcp.app``): this module is what runs before it.
"""

from __future__ import annotations

import io
import json
import logging
import os
from dataclasses import dataclass
from typing import Any

from memfs import __version__
from memfs.mcp.backend import StoreInfo

log = logging.getLogger(__name__)

SERVER_NAME = "memfs"
SERVER_VERSION = __version__

# The SDK's mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS (mcp 2.3), oldest first: the versions
# ``initialize`` negotiates. Requested one of them, the answer is it; else the newest. Importing
# the SDK's tuple would import the SDK; tests/mcp_tools/test_handshake.py checks they agree.
HANDSHAKE_PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_HANDSHAKE_VERSION = HANDSHAKE_PROTOCOL_VERSIONS[-1]

_CLIENT_INFO_FIELDS = frozenset({"name", "version", "title", "description", "websiteUrl"})
_PARAMS = frozenset({"protocolVersion", "capabilities", "clientInfo"})
_REQUEST = frozenset({"jsonrpc", "id", "method", "params"})
_ID_BOUND = 2**63


class HandoverError(Exception):
    """The SDK refused the ``initialize`` answered here (``memfs.mcp.handover``; one line)."""


def instructions(info: StoreInfo) -> str:
    """The server's ``instructions``: one short paragraph (the prompt says the rest)."""
    access = "read-only" if info.read_only else "read-write"
    about = f" ({info.description})" if info.description else ""
    return (
        f"Memory store {info.name}{about}, {access}. Use the memory tool on /memories: view "
        "/memories first to see what you already know. Edits never overwrite a change made by "
        "someone else."
    )


def title(info: StoreInfo) -> str:
    return f"{SERVER_NAME}: {info.name}"


def capabilities(*, subscriptions: bool) -> dict[str, Any]:
    """What ``memfs.mcp.app.build_server``'s handlers make the SDK announce: tools, resources
    and prompts, lists fixed but the resources' when a change feed can tell their changes."""
    return {
        "prompts": {"listChanged": False},
        "resources": {"listChanged": subscriptions, "subscribe": subscriptions},
        "tools": {"listChanged": False},
    }


def negotiated(requested: str) -> str:
    return requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION


@dataclass(frozen=True)
class Opening:
    """The client's first line as read from stdin (b"" if stdin ended first), and the answer
    written to it here (None: the SDK answers it)."""

    line: bytes
    answer: bytes | None = None

    def messages(self) -> list[str]:
        """The line as the SDK's stdio transport would have read it: UTF-8 with replacement,
        split at universal newlines (a lone CR too)."""
        text = io.TextIOWrapper(io.BytesIO(self.line), encoding="utf-8", errors="replace")
        return list(text)


def read_line(fd: int) -> bytes:
    """The bytes of ``fd`` up to and including the first newline (or its end): one read of
    one byte at a time, so that nothing after the line is consumed."""
    line = bytearray()
    while not line.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            break
        line += byte
    return bytes(line)


def answer(line: bytes, info: StoreInfo, *, subscriptions: bool) -> bytes | None:
    """The line to write in answer to ``line`` if it is an ``initialize`` of the plain shape
    (module docstring), else None."""
    request = _plain_initialize(line)
    if request is None:
        return None
    server_info = {"name": SERVER_NAME, "title": title(info), "version": SERVER_VERSION}
    result = {
        "capabilities": capabilities(subscriptions=subscriptions),
        "instructions": instructions(info),
        "protocolVersion": negotiated(request["params"]["protocolVersion"]),
        "serverInfo": server_info,
    }
    reply = {"jsonrpc": "2.0", "id": request["id"], "result": result}
    try:  # the SDK's framing: compact JSON, UTF-8 unescaped, one line
        return (json.dumps(reply, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    except UnicodeEncodeError:  # a lone surrogate in a string id: the SDK's to refuse
        return None


def open_connection(
    info: StoreInfo, *, subscriptions: bool, stdin: int = 0, stdout: int = 1
) -> Opening:
    """Read the client's first line from ``stdin`` and answer it on ``stdout`` if it is a
    plain ``initialize`` (blocking: run it in a thread)."""
    line = read_line(stdin)
    reply = answer(line, info, subscriptions=subscriptions)
    if reply is not None:
        view = memoryview(reply)
        while view:
            view = view[os.write(stdout, view) :]
        log.debug("initialize answered before the SDK was loaded")
    return Opening(line, reply)


def _plain_initialize(line: bytes) -> dict[str, Any] | None:
    if len(Opening(line).messages()) != 1:
        return None
    try:
        request = json.loads(line.decode("utf-8"))
    except ValueError:  # not UTF-8, or not JSON
        return None
    if not isinstance(request, dict) or request.keys() != _REQUEST:
        return None
    if request["jsonrpc"] != "2.0" or request["method"] != "initialize":
        return None
    request_id = request["id"]
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    if isinstance(request_id, int) and not -_ID_BOUND <= request_id < _ID_BOUND:
        return None
    params = request["params"]
    if not isinstance(params, dict) or params.keys() != _PARAMS:
        return None
    client = params["clientInfo"]
    plain = (
        isinstance(params["protocolVersion"], str)
        and _plain_capabilities(params["capabilities"])
        and isinstance(client, dict)
        and {"name", "version"} <= client.keys() <= _CLIENT_INFO_FIELDS
        and all(isinstance(value, str) for value in client.values())
    )
    return request if plain else None


def _plain_capabilities(capabilities: Any) -> bool:
    """An object of objects, nested, but ``roots.listChanged``, a boolean (the one field of
    the SDK's ``ClientCapabilities`` that is not an object)."""
    if not isinstance(capabilities, dict):
        return False
    for name, value in capabilities.items():
        if name == "roots" and isinstance(value, dict) and "listChanged" in value:
            if not isinstance(value["listChanged"], bool):
                return False
            value = {k: v for k, v in value.items() if k != "listChanged"}
        if not _objects_only(value):
            return False
    return True


def _objects_only(value: Any) -> bool:
    return isinstance(value, dict) and all(_objects_only(v) for v in value.values())
