"""``memfs mcp``'s ``initialize`` answered before the SDK is loaded (``memfs.mcp.handshake``) is
the SDK's own answer, and the SDK takes the connection over from there (``memfs.mcp.handover``).

The drift guard: for every protocol version a client may ask for (the SDK's handshake
versions, its 2026-07-28 one, an unknown one), both APIs, read-only or not, with
subscriptions or without, memfs's early answer is byte for byte what the SDK writes when it
reads the same line, in process. Then what memfs leaves to the SDK (anything but a plain
``initialize``), the SDK's models against the plain shape, and the handover in process: the
replayed ``initialize`` answered once, the connection initialized, a disagreement refused.
The real ``memfs mcp`` over stdio is in ``test_stdio.py``."""

from __future__ import annotations

import json
import typing
from typing import Any, cast

import anyio
import mcp_types as types
import pydantic
import pytest
import trio
from mcp.server.lowlevel import NotificationOptions
from mcp.shared.message import SessionMessage
from mcp_types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    KNOWN_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
)

from memfs.mcp import handshake
from memfs.mcp.app import build_server, serve
from memfs.mcp.backend import ChangeFeed, MemoryBackend, StoreInfo
from memfs.mcp.handshake import HandoverError, Opening
from memfs.mcp.subscriptions import Subscriptions

STORES = {
    "memory-stores": StoreInfo(
        "memory-stores", 'Team "Notes" é', False, True, False, True, "notes\tof the team"
    ),
    "databricks": StoreInfo(
        "databricks", "agent-mem (actor a-7, session s)", False, False, True, False
    ),
}
CLIENT_CAPABILITIES = {
    "roots": {"listChanged": True},
    "sampling": {"tools": {}},
    "elicitation": {"form": {}, "url": {}},
    "tasks": {"requests": {"sampling": {"createMessage": {}}}},
    "experimental": {"x": {}},
}


class Described:
    """A store that is only its description: all ``initialize`` and the tools' list read."""

    def __init__(self, info: StoreInfo) -> None:
        self.info = info


def described(info: StoreInfo) -> MemoryBackend:
    return cast(MemoryBackend, Described(info))


def initialize(version: str, request_id: int | str = 1, **params: Any) -> bytes:
    params = {
        "protocolVersion": version,
        "capabilities": CLIENT_CAPABILITIES,
        "clientInfo": {"name": "claude-code", "version": "2.0.1"},
        **params,
    }
    request = {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}
    return json.dumps(request).encode() + b"\n"


def streams() -> tuple[Any, Any, Any, Any]:
    """(client's send, server's read, server's write, client's receive)"""
    to_server, server_reads = anyio.create_memory_object_stream[Any](100)
    server_writes, to_client = anyio.create_memory_object_stream[SessionMessage](100)
    return to_server, server_reads, server_writes, to_client


def wire(message: SessionMessage) -> bytes:
    """A message as the SDK's stdio transport writes it."""
    dumped = message.message.model_dump_json(by_alias=True, exclude_unset=True)
    return dumped.encode() + b"\n"


def parsed(line: bytes) -> SessionMessage:
    return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))


async def sdk_answer(info: StoreInfo, line: bytes, *, subscriptions: bool) -> bytes:
    """What the SDK, serving ``build_server`` as ``memfs mcp`` does, writes for ``line``."""
    async with trio.open_nursery() as nursery:
        store = described(info)
        feed = cast(ChangeFeed, None)  # never opened: initialize does not wait for it
        server = build_server(store, Subscriptions(store, feed, nursery) if subscriptions else None)
        options = server.create_initialization_options(
            NotificationOptions(resources_changed=subscriptions)
        )
        to_server, reads, writes, to_client = streams()
        await to_server.send(parsed(line))
        nursery.start_soon(server.run, reads, writes, options)
        with trio.fail_after(10):
            answer = await to_client.receive()
        nursery.cancel_scope.cancel()
    return wire(answer)


def test_the_versions_are_the_sdks() -> None:
    assert handshake.HANDSHAKE_PROTOCOL_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS
    assert handshake.LATEST_HANDSHAKE_VERSION == LATEST_HANDSHAKE_VERSION


@pytest.mark.parametrize("version", [*KNOWN_PROTOCOL_VERSIONS, "2099-01-01"])
@pytest.mark.parametrize("api", sorted(STORES))
@pytest.mark.parametrize("read_only", [False, True], ids=["read-write", "read-only"])
@pytest.mark.parametrize("subscriptions", [False, True], ids=["no-feed", "feed"])
async def test_the_early_answer_is_the_sdks(
    version: str, api: str, read_only: bool, subscriptions: bool
) -> None:
    info = StoreInfo(**{**STORES[api].__dict__, "read_only": read_only})
    for request_id in (1, "req-é"):
        line = initialize(version, request_id)
        early = handshake.answer(line, info, subscriptions=subscriptions)
        assert early is not None
        assert early == await sdk_answer(info, line, subscriptions=subscriptions)


async def test_every_plain_shape_is_answered_as_the_sdk_does() -> None:
    info = STORES["memory-stores"]
    params: dict[str, Any]
    for params in (
        {"capabilities": {}},
        {"capabilities": {"roots": {"listChanged": False}, "extensions": {"io.x/ui": {}}}},
        {"capabilities": {"roots": {}, "anything": {"nested": {}}}},
        {"clientInfo": {"name": "c", "version": "1", "title": "C", "websiteUrl": "not a url"}},
        {"clientInfo": {"name": "c", "version": "1", "description": "d"}},
    ):
        line = initialize("2025-06-18", 2**62, **params)
        early = handshake.answer(line, info, subscriptions=True)
        assert early is not None, params
        assert early == await sdk_answer(info, line, subscriptions=True)


def test_only_a_plain_initialize_is_answered_early() -> None:
    """Anything else goes to the SDK as it came (handshake's module docstring)."""
    info = STORES["memory-stores"]
    envelope = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    lines = [
        b"",  # stdin ended
        b"\n",
        b"not json\n",
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n',
        b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n',
        json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": envelope}}
        ).encode(),
        b"[" + initialize("2025-06-18").rstrip() + b"]\n",  # a batch
        initialize("2025-06-18").replace(b"2.0", b"1.0", 1),
        initialize("2025-06-18", True),
        initialize("2025-06-18", 1.5),  # type: ignore[arg-type]
        initialize("2025-06-18", 2**63),
        initialize("2025-06-18", "\ud800"),
        initialize(5),  # type: ignore[arg-type]
        initialize("2025-06-18", _meta={"progressToken": 1}),
        initialize("2025-06-18", extra=1),
        initialize("2025-06-18", capabilities={"roots": {"listChanged": {}}}),
        initialize("2025-06-18", capabilities={"sampling": {"tools": True}}),
        initialize("2025-06-18", capabilities={"experimental": {"x": {"y": 1}}}),
        initialize("2025-06-18", capabilities=[]),
        initialize("2025-06-18", clientInfo={"name": "c"}),
        initialize("2025-06-18", clientInfo={"name": "c", "version": "1", "icons": []}),
        initialize("2025-06-18").replace(b", ", b",\r", 1),  # two lines to the SDK's reader
        initialize("2025-06-18").replace(b"claude", b"\xffclaude"),  # not UTF-8
    ]
    for line in lines:
        assert handshake.answer(line, info, subscriptions=False) is None, line


def test_the_only_field_of_client_capabilities_not_an_object_is_roots_list_changed() -> None:
    """What ``handshake``'s plain shape relies on: an object anywhere else is accepted."""
    scalars: list[str] = []

    def walk(model: type[pydantic.BaseModel], path: str) -> None:
        for name, field in model.model_fields.items():
            where = f"{path}.{field.alias or name}"
            for kind in typing.get_args(field.annotation) or (field.annotation,):
                if isinstance(kind, type) and issubclass(kind, pydantic.BaseModel):
                    walk(kind, where)
                elif kind is not type(None) and typing.get_origin(kind) is not dict:
                    scalars.append(f"{where}: {kind}")

    walk(types.ClientCapabilities, "capabilities")
    assert scalars == ["capabilities.roots.listChanged: <class 'bool'>"]


async def test_the_sdk_takes_over_after_the_early_answer() -> None:
    """The replayed initialize is answered once (the early answer), the SDK's connection is
    initialized by it, and the next requests are the SDK's to answer."""
    info = STORES["memory-stores"]
    line = initialize("2025-03-26", 7)
    early = handshake.answer(line, info, subscriptions=False)
    to_server, reads, writes, to_client = streams()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve, described(info), None, reads, writes, Opening(line, early))
        await to_server.send(parsed(b'{"jsonrpc":"2.0","method":"notifications/initialized"}'))
        await to_server.send(parsed(b'{"jsonrpc":"2.0","id":8,"method":"prompts/list"}'))
        await to_server.send(parsed(b'{"jsonrpc":"2.0","id":9,"method":"ping"}'))
        with trio.fail_after(10):
            answers = [json.loads(wire(await to_client.receive())) for _ in range(2)]
        assert [a["id"] for a in answers] == [8, 9]  # not 7 again: the client has it
        assert answers[0]["result"]["prompts"][0]["name"] == "memory_store"
        await to_server.aclose()  # the client's end: the server returns
    with pytest.raises(anyio.EndOfStream):
        to_client.receive_nowait()


async def test_the_sdk_reads_the_line_itself_when_it_was_not_answered() -> None:
    info = STORES["memory-stores"]
    line = b'{"jsonrpc":"2.0","id":"p","method":"ping"}\n'
    to_server, reads, writes, to_client = streams()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve, described(info), None, reads, writes, Opening(line, None))
        with trio.fail_after(10):
            assert json.loads(wire(await to_client.receive())) == {
                "jsonrpc": "2.0",
                "id": "p",
                "result": {},
            }
        await to_server.aclose()


async def test_an_answer_the_sdk_disagrees_with_ends_the_server() -> None:
    """An early answer of another protocol version than the SDK's (a drift the tests above
    would catch first) is refused: memfs mcp ends rather than serve a client the SDK did
    not initialize as told."""
    info = STORES["memory-stores"]
    line = initialize("2025-06-18")
    told = handshake.answer(initialize("2024-11-05"), info, subscriptions=False)
    _, reads, writes, _ = streams()
    with trio.fail_after(10), pytest.raises(HandoverError, match="protocol version '2025-06-18'"):
        await serve(described(info), None, reads, writes, Opening(line, told))
