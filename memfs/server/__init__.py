"""The reference server of the Memory Stores API (``memfs server``).

Layout (docs/server.md "Code layout" has the full table):
- HTTP: ``app`` (``create_app``: the stack), ``middleware`` (request ids, metrics, the last-resort
  500), ``auth`` (keys, admin key, headers, actors), ``routes`` (the URL table and the store,
  memory and version endpoints), ``event_stream`` (the SSE change stream), ``validation``
  (request bodies), ``json_body`` (strict JSON), ``query`` (query parameters, listing pages),
  ``cursor`` (opaque page tokens), ``envelope`` (the error envelope), ``faults`` (fault
  injection), ``metrics`` (Prometheus exposition);
- storage: ``storage`` (the async interface and its invariants), ``sql`` (every rule in SQL,
  once), ``sqlite`` and ``postgres`` (the backends), ``schema`` (migrations), ``changes``
  (change notification for the stream), ``ids`` (object ids and actor ids);
- ``serve``: Hypercorn on trio plus the version-retention task.

This package shares ``memfs.contract.models``, ``memfs.contract.paths`` and
``memfs.contract.errors`` with the client and
must import nothing else from memfs.
"""
