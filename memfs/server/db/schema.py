"""The schema of the reference server, as numbered migrations, for SQLite and PostgreSQL.

Both dialects live here, step for step: ``MIGRATIONS[n]`` (SQLite) and ``PG_MIGRATIONS[n]``
(PostgreSQL) describe the same tables, so a new step is added to both lists at once (a test
checks that their numbers agree).

``migrate`` brings a SQLite database up to ``LATEST`` inside one transaction and records the step
in ``schema_version``. ``migrate_postgres`` does the same on PostgreSQL inside one transaction that
first takes ``pg_advisory_xact_lock(MIGRATION_LOCK)``: when several replicas start together, one
migrates and the others wait, then find nothing left to do.

Times are integer microseconds since the Unix epoch (UTC). Paths compare in byte order of UTF-8:
SQLite's default BINARY collation does that; on PostgreSQL every text column that is sorted or
compared (ids, paths) is declared ``COLLATE "C"``. This module must not hold any query other than
DDL, the bookkeeping of ``schema_version`` and the one-off backfill a step needs (step 3 indexes
the memories that existed before the search index; step 4, the Databricks change log, has none;
step 5 counts the tokens of the documents indexed before it, step 6 sums them per scope, and
step 7 numbers the Databricks change log per store; step 8, the console's sessions, and
step 9, an index of Databricks store deletions, have none; step 10 doubles PostgreSQL's escape
character in the stored contents, so that they may hold NUL: ``memory_stores.sql.rows``).
"""

from __future__ import annotations

import logging
import sqlite3
import unicodedata
from typing import Any

log = logging.getLogger(__name__)

# Search (step 3): SQLite's FTS5 tokenizer: Porter stemming over Unicode words, diacritics
# removed. PostgreSQL's nearest: the ``english`` configuration (Snowball stemmer; it also drops
# English stop words) over text whose Latin diacritics ``search_fold`` removes (no ``unaccent``
# extension needed). docs/server.md lists the differences.
SQLITE_TOKENIZER = "porter unicode61 remove_diacritics 2"
PG_TS_CONFIG = "english"


def _fold_table() -> tuple[str, str]:
    """The letters of U+00C0..U+024F that are an ASCII letter plus combining marks (canonical
    decomposition), and those ASCII letters: ``translate``'s arguments for ``search_fold``."""
    source, target = [], []
    for code in range(0xC0, 0x250):
        decomposed = unicodedata.normalize("NFD", chr(code))
        base, marks = decomposed[0], decomposed[1:]
        if marks and base.isascii() and base.isalpha() and all(map(unicodedata.combining, marks)):
            source.append(chr(code))
            target.append(base)
    return "".join(source), "".join(target)


_FOLD_FROM, _FOLD_TO = _fold_table()


def _per_store_change_ordinals(integer: str) -> str:
    """Step 7 in either dialect (``integer``: its 64-bit integer type). The changes logged
    before it keep their ``seq`` as ordinal and each store counts on from its newest, so a
    cursor a client holds across the upgrade still means the same position."""
    return f"""
        ALTER TABLE dbx_changes ADD COLUMN ordinal {integer} NOT NULL DEFAULT 0;
        UPDATE dbx_changes SET ordinal = seq;
        ALTER TABLE dbx_stores ADD COLUMN change_seq {integer} NOT NULL DEFAULT 0;
        UPDATE dbx_stores SET change_seq = coalesce(
            (SELECT max(ordinal) FROM dbx_changes WHERE store_id = dbx_stores.id), 0);
        DROP INDEX dbx_changes_by_store;
        CREATE UNIQUE INDEX dbx_changes_by_store ON dbx_changes (store_id, ordinal);
        """


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
    (
        2,
        """
        -- Databricks Agent Memory (``memfs.server.databricks.sql``): its own stores and entries.
        CREATE TABLE dbx_stores (
            id TEXT PRIMARY KEY,                 -- managed_memory_store_id
            description TEXT,                    -- NULL: unset
            creator TEXT NOT NULL,               -- id of the API key that created it
            created_us INTEGER NOT NULL,
            updated_us INTEGER NOT NULL,
            entry_count INTEGER NOT NULL DEFAULT 0
        );

        -- session_id '' is "no session" (its own value in the unique key, as the contract says).
        CREATE TABLE dbx_entries (
            store_id TEXT NOT NULL REFERENCES dbx_stores (id) ON DELETE CASCADE,
            id TEXT NOT NULL,
            actor_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            path TEXT NOT NULL,
            content TEXT,
            description TEXT,
            source_type TEXT NOT NULL,
            created_us INTEGER NOT NULL,
            updated_us INTEGER NOT NULL,
            PRIMARY KEY (store_id, id),
            UNIQUE (store_id, actor_id, session_id, path)
        );
        CREATE INDEX dbx_entries_by_path ON dbx_entries (store_id, actor_id, path, session_id, id);
        """,
    ),
    (
        3,
        # The search index (memfs.server.search): one row per document of either API, its text
        # in an FTS5 table sharing its rowid. Existing memories are indexed here (backfill).
        f"""
        CREATE TABLE search_docs (
            id INTEGER PRIMARY KEY,              -- the rowid of its text in search_text
            kind TEXT NOT NULL,                  -- 'memory_stores' or 'databricks'
            store_id TEXT NOT NULL,
            doc_id TEXT NOT NULL,
            path TEXT NOT NULL,
            actor_id TEXT NOT NULL,              -- '' for Memory Stores memories
            session_id TEXT,
            embedding BLOB,                      -- float32 vector (semantic search), or NULL
            embedding_model TEXT,                -- the model that computed it
            UNIQUE (kind, store_id, doc_id)
        );
        CREATE INDEX search_docs_scope ON search_docs (kind, store_id, actor_id, session_id, path);
        CREATE VIRTUAL TABLE search_text USING fts5 (
            description, path, content, tokenize = '{SQLITE_TOKENIZER}'
        );
        INSERT INTO search_docs (kind, store_id, doc_id, path, actor_id)
            SELECT 'memory_stores', store_id, id, path, '' FROM memories;
        INSERT INTO search_text (rowid, description, path, content)
            SELECT d.id, '', d.path, m.content FROM search_docs d
            JOIN memories m ON m.id = d.doc_id AND m.store_id = d.store_id;
        """,
    ),
    (
        4,
        # The Databricks change stream (memfs.server.databricks.stream): one row per entry
        # create, update, delete and store delete, written in the same transaction as the change
        # (memfs.server.databricks.sql). ``seq`` is handed out under the store's lock, so within
        # a store it grows in commit order; AUTOINCREMENT never reuses one. No backfill: the
        # entries that exist before this step have no history, a stream starts at "now".
        """
        CREATE TABLE dbx_changes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            store_id TEXT NOT NULL,              -- no foreign key: a store delete is a change
            kind TEXT NOT NULL
                CHECK (kind IN ('created', 'updated', 'deleted', 'store_deleted')),
            entry_id TEXT NOT NULL,              -- '' for store_deleted
            actor_id TEXT NOT NULL,
            session_id TEXT NOT NULL,            -- '' for "no session"
            path TEXT NOT NULL,
            update_us INTEGER NOT NULL,          -- the entry's update_time (a delete: its time)
            content_sha256 TEXT,                 -- of the content written; NULL for deletes
            content_size INTEGER
        );
        CREATE INDEX dbx_changes_by_store ON dbx_changes (store_id, seq);
        """,
    ),
    (
        5,
        # Search statistics per scope (memfs.server.search.fts_sqlite): BM25 is computed in SQL
        # over the scope's documents, from each document's token count (``doc_len``: FTS5's
        # count over the three columns, backfilled from the token occurrences) and the token
        # occurrences (``search_terms``, an fts5vocab table over ``search_text``). ``doc_len``
        # joins the scope index so a scope's count and average length come from the index alone.
        """
        ALTER TABLE search_docs ADD COLUMN doc_len INTEGER NOT NULL DEFAULT 0;
        CREATE VIRTUAL TABLE search_terms USING fts5vocab (search_text, 'instance');
        UPDATE search_docs SET doc_len = counted.n
            FROM (SELECT doc, count(*) AS n FROM search_terms GROUP BY doc) AS counted
            WHERE counted.doc = search_docs.id;
        DROP INDEX search_docs_scope;
        CREATE INDEX search_docs_scope
            ON search_docs (kind, store_id, actor_id, session_id, path, doc_len);
        """,
    ),
    (
        6,
        # The document count and token total of each (kind, store, actor, session) of the search
        # index, kept by every index write (fts_sqlite), so a search's N and average length cost
        # a few rows instead of a pass over its scope. ``session_key`` '' = no session.
        """
        CREATE TABLE search_scope_stats (
            kind TEXT NOT NULL,
            store_id TEXT NOT NULL,
            actor_id TEXT NOT NULL,
            session_key TEXT NOT NULL,
            docs INTEGER NOT NULL,
            tokens INTEGER NOT NULL,
            PRIMARY KEY (kind, store_id, actor_id, session_key)
        );
        INSERT INTO search_scope_stats (kind, store_id, actor_id, session_key, docs, tokens)
            SELECT kind, store_id, actor_id, coalesce(session_id, ''), count(*), sum(doc_len)
            FROM search_docs GROUP BY kind, store_id, actor_id, coalesce(session_id, '');
        """,
    ),
    (
        7,
        # Change-stream ids per store (memfs.server.databricks.sql): each change gets its store's
        # next ``ordinal`` under the store's lock, counted in ``dbx_stores.change_seq``, so a
        # store's ids tell nothing of other stores' writes (``seq`` counted every store's).
        _per_store_change_ordinals("INTEGER"),
    ),
    (
        8,
        # The console's sign-in sessions (memfs.server.console.sql, memfs.server.console): the
        # SHA-256 of the cookie's random token (never the token) and the id of the API key
        # signed in with (``ids.api_key_id``, never the key), so every replica sees a session.
        """
        CREATE TABLE console_sessions (
            token_hash TEXT PRIMARY KEY,
            api_key_id TEXT NOT NULL,
            created_us INTEGER NOT NULL,
            expires_us INTEGER NOT NULL,         -- the absolute limit
            last_seen_us INTEGER NOT NULL        -- the idle limit counts from here
        );
        CREATE INDEX console_sessions_by_expiry ON console_sessions (expires_us);
        """,
    ),
    (
        9,
        # A Databricks store's last deletion (``change_bounds``, at every change stream's
        # opening): found in this index at once, where ``dbx_changes_by_store`` made it walk
        # every change of a store never deleted.
        """
        CREATE INDEX dbx_changes_store_deletions ON dbx_changes (store_id, ordinal)
            WHERE kind = 'store_deleted';
        """,
    ),
    (
        10,
        # A content may hold NUL: SQLite's text holds it as it is, nothing to change (on
        # PostgreSQL the contents are escaped from this step: see there).
        "",
    ),
]
LATEST = MIGRATIONS[-1][0]

# The same tables on PostgreSQL. ``C`` collation = byte order, as SQLite's BINARY.
PG_MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        """
        CREATE TABLE stores (
            id TEXT COLLATE "C" PRIMARY KEY,
            name TEXT NOT NULL,
            description TEXT NOT NULL,
            metadata TEXT NOT NULL,
            created_us BIGINT NOT NULL,
            updated_us BIGINT NOT NULL,
            archived_us BIGINT,
            memory_count INTEGER NOT NULL DEFAULT 0,
            version_seq BIGINT NOT NULL DEFAULT 0,
            last_version_us BIGINT NOT NULL DEFAULT 0
        );
        CREATE INDEX stores_by_created ON stores (created_us, id);

        CREATE TABLE memories (
            id TEXT COLLATE "C" PRIMARY KEY,
            store_id TEXT COLLATE "C" NOT NULL REFERENCES stores (id) ON DELETE CASCADE,
            path TEXT COLLATE "C" NOT NULL,
            content TEXT NOT NULL,
            content_sha256 TEXT NOT NULL,
            content_size INTEGER NOT NULL,
            head_version_id TEXT COLLATE "C" NOT NULL,
            created_us BIGINT NOT NULL,
            updated_us BIGINT NOT NULL,
            UNIQUE (store_id, path)
        );
        CREATE INDEX memories_by_head ON memories (head_version_id);

        CREATE TABLE versions (
            id TEXT COLLATE "C" PRIMARY KEY,
            store_id TEXT COLLATE "C" NOT NULL REFERENCES stores (id) ON DELETE CASCADE,
            seq BIGINT NOT NULL,
            memory_id TEXT COLLATE "C" NOT NULL,
            operation TEXT NOT NULL CHECK (operation IN ('created', 'modified', 'deleted')),
            path TEXT COLLATE "C",
            content TEXT,
            content_sha256 TEXT,
            content_size INTEGER,
            created_us BIGINT NOT NULL,
            actor_type TEXT NOT NULL,
            actor_id TEXT NOT NULL,
            redacted_us BIGINT,
            redacted_by_type TEXT,
            redacted_by_id TEXT,
            UNIQUE (store_id, seq)
        );
        CREATE INDEX versions_by_memory ON versions (store_id, memory_id, seq);
        CREATE INDEX versions_by_created ON versions (created_us);
        CREATE INDEX versions_by_store_created ON versions (store_id, created_us);
        """,
    ),
    (
        2,
        """
        CREATE TABLE dbx_stores (
            id TEXT COLLATE "C" PRIMARY KEY,
            description TEXT,
            creator TEXT NOT NULL,
            created_us BIGINT NOT NULL,
            updated_us BIGINT NOT NULL,
            entry_count INTEGER NOT NULL DEFAULT 0
        );

        CREATE TABLE dbx_entries (
            store_id TEXT COLLATE "C" NOT NULL REFERENCES dbx_stores (id) ON DELETE CASCADE,
            id TEXT COLLATE "C" NOT NULL,
            actor_id TEXT COLLATE "C" NOT NULL,
            session_id TEXT COLLATE "C" NOT NULL,
            path TEXT COLLATE "C" NOT NULL,
            content TEXT,
            description TEXT,
            source_type TEXT NOT NULL,
            created_us BIGINT NOT NULL,
            updated_us BIGINT NOT NULL,
            PRIMARY KEY (store_id, id),
            UNIQUE (store_id, actor_id, session_id, path)
        );
        CREATE INDEX dbx_entries_by_path ON dbx_entries (store_id, actor_id, path, session_id, id);
        """,
    ),
    (
        3,
        # The search index: ``search_tsvector`` is the one definition of a document's indexed
        # text (description A, path words B, content C; diacritics folded by ``search_fold``),
        # used by every write and by the backfill of existing memories here. ``doc_len``
        # is the document's token count (BM25's |D|).
        f"""
        CREATE FUNCTION search_fold(t text) RETURNS text LANGUAGE sql IMMUTABLE
            AS $$ SELECT translate(t, '{_FOLD_FROM}', '{_FOLD_TO}') $$;
        CREATE FUNCTION search_tsvector(description text, path text, content text)
            RETURNS tsvector LANGUAGE sql IMMUTABLE AS $$
            SELECT setweight(to_tsvector('{PG_TS_CONFIG}', search_fold(description)), 'A')
                || setweight(to_tsvector('{PG_TS_CONFIG}',
                             search_fold(translate(path, '/._', '   '))), 'B')
                || setweight(to_tsvector('{PG_TS_CONFIG}', search_fold(content)), 'C') $$;
        CREATE TABLE search_docs (
            kind TEXT COLLATE "C" NOT NULL,
            store_id TEXT COLLATE "C" NOT NULL,
            doc_id TEXT COLLATE "C" NOT NULL,
            path TEXT COLLATE "C" NOT NULL,
            actor_id TEXT COLLATE "C" NOT NULL,
            session_id TEXT COLLATE "C",
            description TEXT NOT NULL,
            content TEXT NOT NULL,
            tsv TSVECTOR NOT NULL,
            doc_len INTEGER NOT NULL,
            embedding BYTEA,
            embedding_model TEXT,
            PRIMARY KEY (kind, store_id, doc_id)
        );
        CREATE INDEX search_docs_scope ON search_docs (kind, store_id, actor_id, session_id, path);
        CREATE INDEX search_docs_tsv ON search_docs USING GIN (tsv);
        INSERT INTO search_docs (kind, store_id, doc_id, path, actor_id, description, content,
                                 tsv, doc_len)
            SELECT 'memory_stores', m.store_id, m.id, m.path, '', '', m.content, v.tsv,
                   (SELECT coalesce(sum(cardinality(u.positions)), 0) FROM unnest(v.tsv) u)
            FROM memories m
            CROSS JOIN LATERAL (SELECT search_tsvector('', m.path, m.content) AS tsv) v;
        """,
    ),
    (
        4,
        # The Databricks change stream (see the SQLite step 4). An identity ``seq`` drawn under
        # the store's row lock (FOR UPDATE) grows in commit order within a store.
        """
        CREATE TABLE dbx_changes (
            seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            store_id TEXT COLLATE "C" NOT NULL,
            kind TEXT NOT NULL
                CHECK (kind IN ('created', 'updated', 'deleted', 'store_deleted')),
            entry_id TEXT COLLATE "C" NOT NULL,
            actor_id TEXT COLLATE "C" NOT NULL,
            session_id TEXT COLLATE "C" NOT NULL,
            path TEXT COLLATE "C" NOT NULL,
            update_us BIGINT NOT NULL,
            content_sha256 TEXT,
            content_size INTEGER
        );
        CREATE INDEX dbx_changes_by_store ON dbx_changes (store_id, seq);
        """,
    ),
    (
        5,
        # Search statistics per scope: nothing to change here, PostgreSQL's BM25 has counted
        # them over the scope since step 3 (``doc_len`` included); the step keeps the numbers of
        # both dialects equal.
        "",
    ),
    (
        6,
        # Nothing here either: PostgreSQL counts a scope's documents and tokens per search (the
        # SQLite step 6 keeps them in a table).
        "",
    ),
    (
        7,
        # Change-stream ids per store (see the SQLite step 7).
        _per_store_change_ordinals("BIGINT"),
    ),
    (
        8,
        # The console's sign-in sessions (see the SQLite step 8).
        """
        CREATE TABLE console_sessions (
            token_hash TEXT COLLATE "C" PRIMARY KEY,
            api_key_id TEXT COLLATE "C" NOT NULL,
            created_us BIGINT NOT NULL,
            expires_us BIGINT NOT NULL,
            last_seen_us BIGINT NOT NULL
        );
        CREATE INDEX console_sessions_by_expiry ON console_sessions (expires_us);
        """,
    ),
    (
        9,
        # A Databricks store's last deletion (see the SQLite step 9).
        """
        CREATE INDEX dbx_changes_store_deletions ON dbx_changes (store_id, ordinal)
            WHERE kind = 'store_deleted';
        """,
    ),
    (
        10,
        # A content may hold NUL, which ``text`` cannot: from this step the content columns of
        # memories and versions hold it escaped (``memory_stores.sql.rows.stored_content``: U+FFFF
        # doubled for itself, U+FFFF "0" for NUL), so the U+FFFF of the contents stored before is
        # doubled.
        """
        UPDATE memories SET content = replace(content, chr(65535), chr(65535) || chr(65535))
            WHERE strpos(content, chr(65535)) > 0;
        UPDATE versions SET content = replace(content, chr(65535), chr(65535) || chr(65535))
            WHERE strpos(content, chr(65535)) > 0;
        """,
    ),
]
PG_LATEST = PG_MIGRATIONS[-1][0]
# Key of the transaction-level advisory lock that serialises migrations of concurrent replicas.
MIGRATION_LOCK = 0x6D656D6673  # "memfs"


def current_version(conn: Any) -> int:
    """The schema version a database records (0: none yet); creates ``schema_version``.

    ``conn`` is a sqlite3 or psycopg connection (rows as tuples, ``sqlite3.Row`` or dicts).
    """
    conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    value = next(iter(row.values())) if isinstance(row, dict) else row[0]
    return int(value) if value is not None else 0


def migrate(conn: sqlite3.Connection) -> int:
    """Apply every migration newer than the database; return the resulting version.

    ``conn`` must be in autocommit mode (``isolation_level=None``).
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = _apply(
            conn,
            MIGRATIONS,
            current_version(conn),
            "INSERT INTO schema_version (version) VALUES (?)",
            "schema migration",
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return version


def migrate_postgres(conn: Any) -> int:
    """Apply every PostgreSQL migration newer than the database; return the resulting version.

    ``conn`` is a psycopg connection (not in a transaction). Safe to call from several
    processes at once: the advisory lock admits one migrator at a time.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        return _apply(
            conn,
            PG_MIGRATIONS,
            current_version(conn),
            "INSERT INTO schema_version (version) VALUES (%s)",
            "PostgreSQL schema migration",
        )


def _apply(conn: Any, steps: list[tuple[int, str]], version: int, record: str, what: str) -> int:
    """Run the ``steps`` newer than ``version`` in the caller's transaction, recording each with
    ``record`` (an INSERT taking the step number); return the resulting version."""
    latest = steps[-1][0]
    if version > latest:
        raise RuntimeError(f"database schema version {version} is newer than this memfs ({latest})")
    for number, script in steps:
        if number <= version:
            continue
        for statement in _statements(script):
            conn.execute(statement)
        conn.execute(record, (number,))
        log.info("applied %s %d", what, number)
        version = number
    return version


def _statements(script: str) -> list[str]:
    """Split a DDL script on ``;`` (DDL here holds no string literals with semicolons)."""
    lines = [line.split("--", 1)[0] for line in script.splitlines()]
    return [part.strip() for part in "\n".join(lines).split(";") if part.strip()]
