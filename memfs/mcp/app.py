"""The MCP server of one store: the official SDK's low-level ``Server`` over a ``Catalogue``
(tools), ``resources`` (each memory a resource), ``prompt`` (the store's prompt) and, over
stdio, ``Subscriptions`` (resource notifications from the store's change feed).

The low-level server runs on anyio, so under trio, as the rest of memfs (FastMCP's server is
not used: it relies on asyncio primitives). Transports are the caller's: ``memfs mcp`` runs it
over stdio (``serve_stdio``); tests connect the SDK's client in process.

A tool's failure is a tool result with ``isError`` and a one-line message (the model reads it
and may correct itself), never a protocol error; an unexpected exception is logged with its
traceback and answered as an internal error without details. A resource or prompt request
that fails is a protocol error (the protocol has no other way): invalid params for a URI or
cursor that names nothing of this store, -32002 for a memory that is not there, an internal
error with the store's one-line message when it failed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import mcp_types as types
import trio
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.shared.exceptions import MCPError

from memfs.mcp import handshake, prompt, resources
from memfs.mcp.backend import BackendError, ChangeFeed, MemoryBackend
from memfs.mcp.catalogue import Catalogue
from memfs.mcp.handover import take_over
from memfs.mcp.handshake import HandoverError, Opening
from memfs.mcp.subscriptions import Subscriptions
from memfs.mcp.tool_error import ToolError

log = logging.getLogger(__name__)

RESOURCE_NOT_FOUND = -32002  # the protocol's code for resources/read of no such resource
T = TypeVar("T")


async def _protocol_errors(call: Callable[[], Awaitable[T]]) -> T:
    """``call``'s answer; its failures as the protocol errors the module docstring names."""
    try:
        return await call()
    except resources.ResourceError as exc:
        raise MCPError(types.INVALID_PARAMS, str(exc)) from None
    except BackendError as exc:
        raise MCPError(types.INTERNAL_ERROR, str(exc)) from None


def build_server(backend: MemoryBackend, subscriptions: Subscriptions | None = None) -> Server[Any]:
    """The server of ``backend``'s tools, resources and prompt; ``subscriptions``: a client to
    push changes to is there (stdio), so resources can be subscribed to."""
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

    async def seen(ctx: ServerRequestContext[Any]) -> None:
        if subscriptions is not None:
            await subscriptions.seen(ctx)

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        await seen(ctx)
        found = await _protocol_errors(
            lambda: resources.page(backend, params.cursor if params else None)
        )
        listed = [
            types.Resource(
                uri=resources.uri_of(memory.path),
                name=memory.path,
                description=memory.description or None,
                mime_type=resources.mime_type(memory.path),
                size=memory.size,
            )
            for memory in found.memories
        ]
        return types.ListResourcesResult(resources=listed, next_cursor=found.next_cursor)

    async def list_templates(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(
            uri_template=resources.TEMPLATE,
            name="memory",
            title="A memory by its path",
            description="The memory at a path of the store: memfs://memories/notes/a.md is "
            "/memories/notes/a.md (each path segment percent-encoded).",
        )
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        memory = await _protocol_errors(lambda: resources.read(backend, params.uri))
        if memory is None:
            raise MCPError(RESOURCE_NOT_FOUND, f"No memory at {params.uri[:200]!r}.")
        contents = types.TextResourceContents(
            uri=params.uri, mime_type=resources.mime_type(memory.path), text=memory.content
        )
        return types.ReadResourceResult(contents=[contents])

    offered = [spec.name for spec in catalogue.offered]
    store_prompt = types.Prompt(name=prompt.NAME, description=prompt.DESCRIPTION)

    async def list_prompts(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[store_prompt])

    async def get_prompt(
        ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        if params.name != prompt.NAME:
            raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {params.name[:100]!r}")
        text = types.TextContent(type="text", text=prompt.render(backend.info, offered))
        return types.GetPromptResult(
            description=prompt.DESCRIPTION,
            messages=[types.PromptMessage(role="user", content=text)],
        )

    # what memfs.mcp.handshake answers to initialize before this is built: the same fields
    return Server(
        handshake.SERVER_NAME,
        version=handshake.SERVER_VERSION,
        title=handshake.title(backend.info),
        instructions=handshake.instructions(backend.info),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscriptions.subscribe if subscriptions else None,
        on_unsubscribe_resource=subscriptions.unsubscribe if subscriptions else None,
        on_subscriptions_listen=subscriptions.listen if subscriptions else None,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


def _answer(text: str, *, error: bool) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


async def serve_stdio(
    backend: MemoryBackend, feed: ChangeFeed | None = None, opening: Opening | None = None
) -> None:
    """Serve ``backend`` over this process's stdin and stdout until stdin ends; with ``feed``
    (the store pushes its changes), resources can be subscribed to; ``opening``: the client's
    first line, read (and maybe answered) before the SDK was imported (``handshake``)."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await serve(backend, feed, read_stream, write_stream, opening)


async def serve(
    backend: MemoryBackend,
    feed: ChangeFeed | None,
    read_stream: Any,
    write_stream: Any,
    opening: Opening | None = None,
) -> None:
    """Serve ``backend`` on a transport's streams (``serve_stdio``) until the client's end;
    ``HandoverError`` if the SDK refused the ``initialize`` answered early."""
    refusals: list[str] = []
    async with trio.open_nursery() as nursery:

        def refused(why: str) -> None:
            log.error("%s; ending", why)
            refusals.append(why)
            nursery.cancel_scope.cancel()

        if opening is not None:
            read_stream, write_stream = take_over(opening, read_stream, write_stream, refused)
        subscriptions = Subscriptions(backend, feed, nursery) if feed is not None else None
        server = build_server(backend, subscriptions)
        options = server.create_initialization_options(
            NotificationOptions(resources_changed=subscriptions is not None)
        )
        await server.run(read_stream, write_stream, options)
        nursery.cancel_scope.cancel()
    if refusals:
        raise HandoverError(refusals[0])
