"""The MCP server of a memory store: the memory tool and its companions, for agents without
a filesystem (Claude Desktop and Code, Cursor, the agent SDKs).

- ``backend``: ``MemoryBackend``, all the tools need from a store (read with the content's
  SHA-256, list, create, update with a precondition, delete, history, search), its records and
  its errors. The tools are written against it alone.
- ``memory_paths``: ``/memories/a/b.md`` <-> the store's ``/a/b.md``; escapes refused.
- ``tool_error``: ``ToolError`` (a call that did nothing, and the line that says why) and the
  argument checks every tool shares.
- ``memory_tool``: the ``memory`` tool (``memory_20250818``'s contract, word for word), every
  write guarded by the content it read (no lost update).
- ``history_tools``: ``memory_history``, ``memory_restore``; ``search_tool``:
  ``memory_search``; ``databricks_tools``: ``search_memory``, ``save_memory``,
  ``list_memories``, ``forget_memory``.
- ``catalogue``: which tools a store gets (its API, read-only or not), their schemas, dispatch.
- ``resources``: each memory a resource (``memfs://memories/a/b.md``, each segment
  percent-encoded, accepted in that one form), listed a page at a time, read.
- ``prompt``: the ``memory_store`` prompt (name, description, access; the session prompt's
  words, from the leaf ``memfs.contract.store_brief``).
- ``subscriptions``: a backend's change feed (``ChangeFeed``) as resource notifications, for
  ``memfs mcp`` over stdio (stateless HTTP has no session to push to).
- ``app``: the official SDK's low-level ``Server`` over a catalogue, the resources, the prompt
  and, over stdio, the subscriptions (run under trio).
- ``handshake``: ``memfs mcp``'s answer to a plain ``initialize``, written before the SDK is
  imported (imports nothing of it); ``handover``: the SDK given the connection after it.
- ``client_config``: the client configurations ``memfs mcp --print-config`` prints (no secret:
  keys named by their environment variable).
- ``store_backend``: the adapter over the client seam (``memfs.contract.store_api.StoreAPI``), for
  ``memfs mcp STORE``. Only it may reach a client; the reference server, which may serve the
  same tools over its own storage later, never imports it (import-linter contracts).

Everything but ``store_backend`` imports only the shared leaves (``memfs.contract.models``,
``memfs.contract.errors``, ``memfs.contract.paths``...) and the ``mcp`` SDK. docs/mcp.md says what
it offers.
"""
