"""The reference server of the Memory Stores API (``memfs server``).

Layout: ``app`` (HTTP: routes, validation, auth, error envelope), ``storage`` (the async storage
interface), ``sqlite`` + ``schema`` (the SQLite backend and its migrations), ``cursor`` (opaque
page tokens), ``ids`` (object ids and actor ids), ``metrics`` (Prometheus exposition), ``serve``
(Hypercorn on trio plus the version-retention task). This package shares ``memfs.models``,
``memfs.paths`` and ``memfs.errors`` with the client and must import nothing else from memfs.
"""
