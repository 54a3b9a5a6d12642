"""Search of a store, beside ``memfs.versions``: ``engine`` (``StoreSearch``: the server's search
when it ranks queries itself, else ``LocalSearch`` over ``index``, an in-memory SQLite FTS5 index
kept current by the store's changes; the one text format of the results), ``tree`` (the
read-only ``.search/`` directory a mount serves). Used by the core's builder and by
``memfs search``; it reaches a store only through ``memfs.contract.store_api``.
"""
