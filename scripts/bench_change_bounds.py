"""A Databricks store's change bounds (``change_bounds``: every change stream's opening and
every live console page) on SQLite with many changes, with and without schema step 9's index of
store deletions.

    python scripts/bench_change_bounds.py [--changes N] [--runs R]

Prints the time of one ``change_bounds`` query each way and their ratio (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import sqlite3
import time

from memfs.server import schema

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    before = timed(database(args.changes, indexed=False), args.runs)
    after = timed(database(args.changes, indexed=True), args.runs)
    print(f"{args.changes:,} changes of one store, {args.runs} queries each")
    print(f"without the index of deletions: {before * 1e3:.3f} ms a query")
    print(f"with it (schema step 9):        {after * 1e3:.3f} ms a query ({after / before:.5f}x)")


if __name__ == "__main__":
    main()
