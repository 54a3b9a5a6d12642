"""memfs: mount a Memory Stores API store as a directory, and serve the API yourself."""

__version__ = "0.1.0"
