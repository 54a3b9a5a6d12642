"""A Databricks store's change bounds (``change_bounds``: every change stream's opening and
every live console page) on SQLite with many changes, with and without schema step 9's index of
store deletions.

    python -m bench change_bounds [--changes N] [--runs R]

The time of one ``change_bounds`` query each way and their ratio (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import sqlite3
import time

from bench.harness import Case, Row
from memfs.server.db import schema

# the query of ``sql.databricks.DatabricksStorage.change_bounds``, its two subqueries
BOUNDS = (
    "SELECT (SELECT MAX(ordinal) FROM dbx_changes WHERE store_id = ? AND kind = 'store_deleted')"
    " AS start, (SELECT MAX(ordinal) FROM dbx_changes WHERE store_id = ?) AS newest"
)


def database(changes: int, *, indexed: bool) -> sqlite3.Connection:
    """A migrated in-memory database whose store ``s`` logged ``changes`` creations."""
    conn = sqlite3.connect(":memory:")
    schema.migrate(conn)
    if not indexed:
        conn.execute("DROP INDEX dbx_changes_store_deletions")
    conn.executemany(
        "INSERT INTO dbx_changes (seq, store_id, kind, entry_id, actor_id, session_id, path, "
        "update_us, content_sha256, content_size, ordinal) "
        "VALUES (?, 's', 'created', ?, 'a', '', ?, ?, 'x', 1, ?)",
        ((i, f"e{i}", f"/p{i}", i, i) for i in range(1, changes + 1)),
    )
    return conn


def timed(conn: sqlite3.Connection, runs: int) -> float:
    """Seconds per ``change_bounds`` query, over ``runs``."""
    start = time.perf_counter()
    for _ in range(runs):
        conn.execute(BOUNDS, ("s", "s")).fetchone()
    return (time.perf_counter() - start) / runs


class ChangeBoundsCase(Case[None]):
    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--changes", type=int, default=100_000)
        parser.add_argument("--runs", type=int, default=50)

    def note(self, options: argparse.Namespace) -> str:
        return f"{options.changes:,} changes of one store, {options.runs} queries each"

    def run(self, options: argparse.Namespace, fixture: None) -> list[Row]:
        before = timed(database(options.changes, indexed=False), options.runs)
        after = timed(database(options.changes, indexed=True), options.runs)
        return [
            {"index of deletions": "without", "ms_per_query": before * 1e3, "ratio": 1.0},
            {"index of deletions": "with (schema step 9)", "ms_per_query": after * 1e3,
             "ratio": after / before},
        ]  # fmt: skip


CASE = ChangeBoundsCase()
