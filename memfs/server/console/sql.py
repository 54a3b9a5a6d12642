"""The console's sessions and counts in SQL: ``ConsoleStorage`` in the ``Storage``'s transactions.

``SqlConsole`` runs its statements in its backend's ``_read``/``_write`` transactions, on the
``console_sessions`` table (``db.schema`` step 8), the stores' ``memory_count``, the memories'
paths and the versions' metadata. A session row
holds a hash of the browser's token and a key's id, never a token or a key (see
``console.storage``). Sessions need no lock: each row is written by the one browser that holds
its token, and a lost ``touch`` only shortens an idle session by a minute.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol, TypeVar

from memfs.contract.models import Actor
from memfs.server.console.storage import (
    ConsoleSession,
    ConsoleStorage,
    ContentPair,
    EntryGroup,
    TreeMemory,
    VersionMark,
)
from memfs.server.db.clock import from_us, to_us
from memfs.server.db.transaction import Row, Tx

log = logging.getLogger(__name__)

R = TypeVar("R")
_COLUMNS = "token_hash, api_key_id, created_us, expires_us, last_seen_us"


class Backend(Protocol):
    """What ``SqlConsole`` uses of its ``Storage`` (``backends.storage``)."""

    max_memories: int

    async def _read(self, fn: Callable[[Tx], R]) -> R: ...

    async def _write(self, fn: Callable[[Tx], R]) -> R: ...


_MARK = "id, memory_id, operation, path, created_us, content_size, redacted_us"
_IDS_A_QUERY = 500  # memory ids in one IN (...): well below every backend's parameter limit


def _mark(row: Row) -> VersionMark:
    return VersionMark(
        row["id"],
        row["memory_id"],
        row["operation"],
        row["path"],
        from_us(row["created_us"]),
        row["content_size"],
        row["redacted_us"] is not None,
    )


def _content(content: str | None, redacted_us: int | None, operation: str | None) -> str | None:
    """A version's content for a line count: None if redacted, "" for a deletion's."""
    if redacted_us is not None:
        return None
    return "" if operation == "deleted" else content or ""


def _session(row: Row) -> ConsoleSession:
    return ConsoleSession(
        token_hash=row["token_hash"],
        api_key_id=row["api_key_id"],
        created_at=from_us(row["created_us"]),
        expires_at=from_us(row["expires_us"]),
        last_seen_at=from_us(row["last_seen_us"]),
    )


class SqlConsole(ConsoleStorage):
    """``ConsoleStorage`` in the backend's database."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend

    @property
    def memory_limit(self) -> int:
        return self._backend.max_memories

    async def create_session(self, session: ConsoleSession, *, ended_before: datetime) -> None:
        cutoff = to_us(ended_before)

        def run(tx: Tx) -> None:
            tx.execute(
                "DELETE FROM console_sessions WHERE expires_us <= ? OR last_seen_us <= ?",
                (to_us(session.created_at), cutoff),
            )
            tx.execute(
                f"INSERT INTO console_sessions ({_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
                (
                    session.token_hash,
                    session.api_key_id,
                    to_us(session.created_at),
                    to_us(session.expires_at),
                    to_us(session.last_seen_at),
                ),
            )

        await self._backend._write(run)

    async def get_session(self, token_hash: str) -> ConsoleSession | None:
        def run(tx: Tx) -> ConsoleSession | None:
            row = tx.one(
                f"SELECT {_COLUMNS} FROM console_sessions WHERE token_hash = ?", (token_hash,)
            )
            return None if row is None else _session(row)

        return await self._backend._read(run)

    async def touch_session(self, token_hash: str, seen_at: datetime) -> None:
        await self._backend._write(
            lambda tx: tx.execute(
                "UPDATE console_sessions SET last_seen_us = ? WHERE token_hash = ?",
                (to_us(seen_at), token_hash),
            )
        )

    async def delete_session(self, token_hash: str) -> None:
        await self._backend._write(
            lambda tx: tx.execute(
                "DELETE FROM console_sessions WHERE token_hash = ?", (token_hash,)
            )
        )

    async def memory_counts(self, store_ids: Sequence[str]) -> dict[str, int]:
        if not store_ids:
            return {}
        marks = ", ".join("?" for _ in store_ids)

        def run(tx: Tx) -> dict[str, int]:
            rows = tx.execute(
                f"SELECT id, memory_count FROM stores WHERE id IN ({marks})", tuple(store_ids)
            ).fetchall()
            return {row["id"]: int(row["memory_count"]) for row in rows}

        return await self._backend._read(run)

    async def tree_memories(self, store_id: str) -> list[TreeMemory]:
        def run(tx: Tx) -> list[TreeMemory]:
            # the head version (its primary key) says when and by whom the memory last changed
            rows = tx.execute(
                "SELECT m.id, m.path, m.content_size, v.created_us, v.actor_type, v.actor_id "
                "FROM memories m JOIN versions v ON v.id = m.head_version_id "
                "WHERE m.store_id = ? ORDER BY m.path",
                (store_id,),
            ).fetchall()
            writers: dict[tuple[str, str], Actor] = {}  # a few writers wrote most memories
            tree = []
            for row in rows:
                writer = (row["actor_type"], row["actor_id"])
                actor = writers.get(writer) or writers.setdefault(writer, Actor(*writer))
                tree.append(
                    TreeMemory(
                        row["id"],
                        row["path"],
                        row["content_size"],
                        from_us(row["created_us"]),
                        actor,
                    )
                )
            return tree

        return await self._backend._read(run)

    async def latest_versions(self, store_id: str, instant: datetime) -> list[VersionMark]:
        def run(tx: Tx) -> list[VersionMark]:
            # ``seq`` and ``created_us`` increase together (``SqlBase._append_version``), so
            # "made at or before" is "up to the last seq made then": each memory's newest is
            # then read from the covering index (store_id, memory_id, seq) alone (2x faster
            # than filtering every version's time, at 10,000 versions)
            rows = tx.execute(
                f"SELECT {_MARK} FROM versions WHERE store_id = ? AND seq IN ("
                "SELECT MAX(seq) FROM versions WHERE store_id = ? AND seq <= ("
                "SELECT seq FROM versions WHERE store_id = ? AND created_us <= ? "
                "ORDER BY seq DESC LIMIT 1) GROUP BY memory_id) ORDER BY seq",
                (store_id, store_id, store_id, to_us(instant)),
            ).fetchall()
            return [_mark(row) for row in rows]

        return await self._backend._read(run)

    async def version_marks(self, store_id: str, memory_ids: Sequence[str]) -> list[VersionMark]:
        ids = list(memory_ids)

        def run(tx: Tx) -> list[VersionMark]:
            rows: list[Row] = []
            for start in range(0, len(ids), _IDS_A_QUERY):
                chunk = ids[start : start + _IDS_A_QUERY]
                marks = ", ".join("?" for _ in chunk)
                rows += tx.execute(
                    f"SELECT {_MARK}, seq FROM versions WHERE store_id = ? "
                    f"AND memory_id IN ({marks})",
                    (store_id, *chunk),
                ).fetchall()
            rows.sort(key=lambda row: int(row["seq"]))
            return [_mark(row) for row in rows]

        return await self._backend._read(run)

    async def version_changes(
        self, store_id: str, version_ids: Sequence[str]
    ) -> dict[str, ContentPair]:
        ids = list(version_ids)

        def run(tx: Tx) -> dict[str, ContentPair]:
            pairs: dict[str, ContentPair] = {}
            for start in range(0, len(ids), _IDS_A_QUERY):
                chunk = ids[start : start + _IDS_A_QUERY]
                marks = ", ".join("?" for _ in chunk)
                # each version by its id (the primary key: with "store_id = ?" beside it SQLite
                # walked the store's versions instead, 15 ms at 10,000 for 50; the store is
                # checked below), the one before it as its memory's highest seq below (a probe
                # of (store_id, memory_id, seq)), read by (store_id, seq)
                rows = tx.execute(
                    "SELECT v.id, v.store_id, v.operation, v.content, v.redacted_us, "
                    "p.id AS p_id, p.content AS p_content, p.redacted_us AS p_redacted_us FROM ("
                    "SELECT x.id, x.store_id, x.operation, x.content, x.redacted_us, "
                    "(SELECT MAX(q.seq) FROM versions q WHERE q.store_id = x.store_id "
                    "AND q.memory_id = x.memory_id AND q.seq < x.seq) AS before_seq "
                    f"FROM versions x WHERE x.id IN ({marks})) v "
                    "LEFT JOIN versions p ON p.store_id = v.store_id AND p.seq = v.before_seq",
                    tuple(chunk),
                ).fetchall()
                for row in rows:
                    if row["store_id"] != store_id:
                        continue  # another store's version: not this page's
                    pairs[row["id"]] = ContentPair(
                        _content(row["content"], row["redacted_us"], row["operation"]),
                        _content(row["p_content"], row["p_redacted_us"], None)
                        if row["p_id"] is not None
                        else "",
                    )
            return pairs

        return await self._backend._read(run)

    async def dbx_actors(
        self, store_id: str, *, limit: int, after: str | None = None
    ) -> list[EntryGroup]:
        def run(tx: Tx) -> list[EntryGroup]:
            rows = tx.execute(
                "SELECT actor_id, COUNT(*) AS n FROM dbx_entries WHERE store_id = ? "
                + ("AND actor_id > ? " if after is not None else "")
                + "GROUP BY actor_id ORDER BY actor_id LIMIT ?",
                (store_id, *([after] if after is not None else []), limit),
            ).fetchall()
            return [EntryGroup(row["actor_id"], int(row["n"])) for row in rows]

        return await self._backend._read(run)

    async def dbx_sessions(
        self, store_id: str, actor_id: str, *, limit: int, after: str | None = None
    ) -> list[EntryGroup]:
        def run(tx: Tx) -> list[EntryGroup]:
            rows = tx.execute(
                "SELECT session_id, COUNT(*) AS n FROM dbx_entries "
                "WHERE store_id = ? AND actor_id = ? "
                + ("AND session_id > ? " if after is not None else "")
                + "GROUP BY session_id ORDER BY session_id LIMIT ?",
                (store_id, actor_id, *([after] if after is not None else []), limit),
            ).fetchall()
            # no session is stored as "" (databricks.storage), which sorts first
            return [EntryGroup(row["session_id"] or None, int(row["n"])) for row in rows]

        return await self._backend._read(run)

    async def dbx_newest_change(self, store_id: str) -> int:
        def run(tx: Tx) -> int:
            # as ``databricks.sql``'s next ordinal, less one: the store's counter (it outlives
            # retention) or a change logged under its id, whichever is later; two index lookups
            row = tx.one(
                "SELECT (SELECT change_seq FROM dbx_stores WHERE id = ?) AS counted, "
                "(SELECT MAX(ordinal) FROM dbx_changes WHERE store_id = ?) AS logged",
                (store_id, store_id),
            )
            assert row is not None  # a SELECT of two subqueries has one row
            return max(int(row["counted"] or 0), int(row["logged"] or 0))

        return await self._backend._read(run)
