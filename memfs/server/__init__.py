"""The reference server (``memfs server``): the Memory Stores and Databricks Agent Memory APIs,
their change streams, search, MCP endpoints and web console, on SQLite or PostgreSQL.

It owns the server side of both APIs and shares with the client only ``memfs.contract`` (and
serves ``memfs.mcp``'s tools over its own storage); it must import nothing else from memfs
(import-linter contracts). docs/architecture.md maps its packages.
"""
