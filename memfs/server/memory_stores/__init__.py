"""The Memory Stores API of the reference server: its storage interface and SQL, its routes and
request checks, its change stream and the MCP tools' backend over it. It must not import the
Databricks API (``memfs.server.databricks``): an import-linter contract."""
