"""The MCP tools of a store, served by the reference server over streamable HTTP (``endpoint``),
on each API's backend (``memory_stores.mcp_backend``, ``databricks.mcp_backend``)."""
