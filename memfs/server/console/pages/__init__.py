"""The console's pages, one module per group, each a class made on the ``Console`` whose
methods are its pages and whose ``routes()`` maps its URLs onto them (``context.PageGroup``).
URL templates are relative to ``/console`` (``app`` mounts them there)."""
