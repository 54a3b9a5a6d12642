"""The Memory Stores API's endpoints, one class per resource: ``StoreRoutes`` (``stores``),
``MemoryRoutes`` (``memories``), ``VersionRoutes`` (``versions``) and ``SearchRoutes``
(``search``, the memfs search extension). ``memfs.server.routes`` maps URLs onto them."""
