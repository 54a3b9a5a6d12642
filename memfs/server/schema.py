"""The SQLite schema of the reference server, as numbered migrations.

``migrate`` brings a database up to ``LATEST`` inside one transaction per step and records the
step in ``schema_version``. Times are integer microseconds since the Unix epoch (UTC), paths are
TEXT compared with the default BINARY collation, which is byte order of UTF-8 (a PostgreSQL port
needs ``COLLATE "C"`` on ``path``). Keep the SQL plain so it ports; this module must not hold any
query other than DDL.
"""

from __future__ import annotations

import logging
import sqlite3

log = logging.getLogger(__name__)

MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        """
        CREATE TABLE stores (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            description TEXT NOT NULL,
            metadata TEXT NOT NULL,              -- JSON object of strings
            created_us INTEGER NOT NULL,
            updated_us INTEGER NOT NULL,
            archived_us INTEGER,
            memory_count INTEGER NOT NULL DEFAULT 0,
            version_seq INTEGER NOT NULL DEFAULT 0,  -- last version sequence handed out
            last_version_us INTEGER NOT NULL DEFAULT 0  -- created_at of that version
        );
        CREATE INDEX stores_by_created ON stores (created_us, id);

        CREATE TABLE memories (
            id TEXT PRIMARY KEY,
            store_id TEXT NOT NULL REFERENCES stores (id) ON DELETE CASCADE,
            path TEXT NOT NULL,
            content TEXT NOT NULL,
            content_sha256 TEXT NOT NULL,
            content_size INTEGER NOT NULL,
            head_version_id TEXT NOT NULL,
            created_us INTEGER NOT NULL,
            updated_us INTEGER NOT NULL,
            UNIQUE (store_id, path)
        );
        CREATE INDEX memories_by_head ON memories (head_version_id);

        -- memory_id has no foreign key: versions outlive their memory.
        CREATE TABLE versions (
            id TEXT PRIMARY KEY,
            store_id TEXT NOT NULL REFERENCES stores (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            memory_id TEXT NOT NULL,
            operation TEXT NOT NULL CHECK (operation IN ('created', 'modified', 'deleted')),
            path TEXT,
            content TEXT,
            content_sha256 TEXT,
            content_size INTEGER,
            created_us INTEGER NOT NULL,
            actor_type TEXT NOT NULL,
            actor_id TEXT NOT NULL,
            redacted_us INTEGER,
            redacted_by_type TEXT,
            redacted_by_id TEXT,
            UNIQUE (store_id, seq)
        );
        CREATE INDEX versions_by_memory ON versions (store_id, memory_id, seq);
        CREATE INDEX versions_by_created ON versions (created_us);
        """,
    ),
]
LATEST = MIGRATIONS[-1][0]


def current_version(conn: sqlite3.Connection) -> int:
    conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def migrate(conn: sqlite3.Connection) -> int:
    """Apply every migration newer than the database; return the resulting version.

    ``conn`` must be in autocommit mode (``isolation_level=None``).
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = current_version(conn)
        if version > LATEST:
            raise RuntimeError(
                f"database schema version {version} is newer than this memfs ({LATEST})"
            )
        for number, script in MIGRATIONS:
            if number <= version:
                continue
            for statement in _statements(script):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (number,))
            log.info("applied schema migration %d", number)
            version = number
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return version


def _statements(script: str) -> list[str]:
    """Split a DDL script on ``;`` (DDL here holds no string literals with semicolons)."""
    lines = [line.split("--", 1)[0] for line in script.splitlines()]
    return [part.strip() for part in "\n".join(lines).split(";") if part.strip()]
