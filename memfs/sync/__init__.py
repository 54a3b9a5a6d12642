"""``memfs sync``: a local directory kept in step with a store, both ways, without FUSE.

``localdir`` (DIR, read and written without following links), ``basis`` (what both sides last
agreed on, on disk), ``corefiles`` (the core by path, as the kernel would call it), ``engine``
(the three-way comparison and what it does), ``watch`` (file events or polling), ``runner``
(the process: the store, its core and change feed, the engine, the end). The rules a synced
file follows are the mount's: the core's. docs/sync.md has the model.
"""
