"""The Databricks Agent Memory API of the reference server: its storage interface and SQL, its
routes, request checks and error envelope, its change stream and the MCP tools' backend over it.
It must not import the Memory Stores API (``memfs.server.memory_stores``): an import-linter
contract."""
