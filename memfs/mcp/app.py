"""The MCP server of one store: the official SDK's low-level ``Server`` over a ``Catalogue``.

The low-level server runs on anyio, so under trio, as the rest of memfs (FastMCP's server is
not used: it relies on asyncio primitives). Transports are the caller's: ``memfs mcp`` runs it
over stdio (``serve_stdio``); tests connect the SDK's client in process.

A tool's failure is a tool result with ``isError`` and a one-line message (the model reads it
and may correct itself), never a protocol error; an unexpected exception is logged with its
traceback and answered as an internal error without details.
"""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from memfs import __version__
from memfs.mcp.backend import BackendError, MemoryBackend
from memfs.mcp.catalogue import Catalogue
from memfs.mcp.tool_error import ToolError

log = logging.getLogger(__name__)


def instructions(backend: MemoryBackend) -> str:
    info = backend.info
    access = "read-only" if info.read_only else "read-write"
    about = f" ({info.description})" if info.description else ""
    return (
        f"Memory store {info.name}{about}, {access}. Use the memory tool on /memories: view "
        "/memories first to see what you already know. Edits never overwrite a change made by "
        "someone else."
    )


def build_server(backend: MemoryBackend) -> Server[Any]:
    catalogue = Catalogue(backend)
    tools = [
        types.Tool(
            name=spec.name,
            description=spec.description,
            input_schema=spec.input_schema,
            annotations=types.ToolAnnotations(
                read_only_hint=spec.reads_only,
                destructive_hint=not spec.reads_only,
                open_world_hint=False,
            ),
        )
        for spec in catalogue.offered
    ]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            text = await catalogue.call(params.name, params.arguments)
        except (ToolError, BackendError) as exc:
            return _answer(str(exc), error=True)
        except Exception:
            log.exception("tool %s failed", params.name)
            return _answer(f"Internal error in {params.name}; see the server's log.", error=True)
        return _answer(text, error=False)

    return Server(
        "memfs",
        version=__version__,
        title=f"memfs: {backend.info.name}",
        instructions=instructions(backend),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _answer(text: str, *, error: bool) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


async def serve_stdio(backend: MemoryBackend) -> None:
    """Serve ``backend``'s tools over this process's stdin and stdout until stdin ends."""
    from mcp.server.stdio import stdio_server

    server = build_server(backend)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
