"""Limits of the Databricks Agent Memory API as memfs server enforces them (the contract
documents none)."""

MAX_CONTENT_BYTES = 102_400  # UTF-8 bytes of an entry's content (as Memory Stores)
MAX_DESCRIPTION_BYTES = 4_096  # UTF-8 bytes of an entry's description
MAX_PATH_BYTES = 1_024  # UTF-8 bytes of an entry path
REFUSED_CHARACTERS = "\x00"  # in content and descriptions (PostgreSQL text cannot hold NUL)
MAX_ID_CHARS = 256  # actor_id and session_id length
MAX_ENTRIES_PER_STORE = 100_000  # no per-actor limit
DEFAULT_PAGE_SIZE = 10
MAX_PAGE_SIZE = 100
