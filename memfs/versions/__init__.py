"""The read-only ``.versions/`` history tree of a mount, on top of ``memfs.api`` only: the names
of instants and history files (``names``), the version index and the views computed from it
(``index``), and the tree of inodes and handles that ``fuse_ops`` dispatches to (``tree``).
"""
