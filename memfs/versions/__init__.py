"""The read-only ``.versions/`` history tree of a mount (``tree``): names, the version index and
the directory tree, on top of ``memfs.api`` only.
"""
