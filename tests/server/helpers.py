"""Helpers of the server tests: API keys of the in-process app, a settable clock, a client
over ``httpx.ASGITransport`` and the error envelope check."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

KEY = "sk-inproc-" + "a" * 30


OTHER = "sk-inproc-" + "b" * 30


BASE = "http://memfs.test"


BETA = {"anthropic-beta": "agent-memory-2026-07-22", "anthropic-version": "2023-06-01"}


class FakeClock:
    """A settable clock for storage (times of versions, retention)."""

    def __init__(self, start: datetime | None = None, *, frozen: bool = False) -> None:
        self.now = start or datetime(2026, 11, 1, tzinfo=UTC)
        self.frozen = frozen

    def __call__(self) -> datetime:
        if not self.frozen:
            self.now += timedelta(milliseconds=1)
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def make_client(app: Any, key: str | None = KEY, **headers: str) -> httpx.AsyncClient:
    base_headers = dict(BETA)
    if key is not None:
        base_headers["x-api-key"] = key
    base_headers.update(headers)
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url=BASE, headers=base_headers
    )


def assert_error(
    r: httpx.Response, status: int, error_type: str, contains: str = ""
) -> dict[str, Any]:
    """The response is the documented error envelope with this status and type."""
    assert r.status_code == status, r.text
    body: dict[str, Any] = r.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == error_type
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert contains.lower() in body["error"]["message"].lower(), body["error"]["message"]
    assert body["request_id"].startswith("req_")
    assert r.headers["request-id"] == body["request_id"]
    return body


MakeMemory = Callable[..., Any]


# What each migration step added (memfs.server.db.schema), newest first, so that a database made by
# this memfs can be taken back to an older step and its upgrade tested.
_UNDO: dict[int, dict[str, list[str]]] = {
    10: {
        "sqlite": [],
        "postgres": [  # (a content holding NUL would not go back: none does where this runs)
            f"UPDATE {table} SET content = replace(content, chr(65535) || chr(65535), chr(65535))"
            for table in ("memories", "versions")
        ],
    },
    9: {backend: ["DROP INDEX dbx_changes_store_deletions"] for backend in ("sqlite", "postgres")},
    8: {backend: ["DROP TABLE console_sessions"] for backend in ("sqlite", "postgres")},
    7: {
        backend: [
            "DROP INDEX dbx_changes_by_store",
            "ALTER TABLE dbx_changes DROP COLUMN ordinal",
            "ALTER TABLE dbx_stores DROP COLUMN change_seq",
            "CREATE INDEX dbx_changes_by_store ON dbx_changes (store_id, seq)",
        ]
        for backend in ("sqlite", "postgres")
    },
    6: {"sqlite": ["DROP TABLE search_scope_stats"], "postgres": []},
    5: {
        "sqlite": [
            "DROP TABLE search_terms",
            "DROP INDEX search_docs_scope",
            "ALTER TABLE search_docs DROP COLUMN doc_len",
            "CREATE INDEX search_docs_scope "
            "ON search_docs (kind, store_id, actor_id, session_id, path)",
        ],
        "postgres": [],
    },
    4: {"sqlite": ["DROP TABLE dbx_changes"], "postgres": ["DROP TABLE dbx_changes"]},
    3: {
        "sqlite": ["DROP TABLE search_text", "DROP TABLE search_docs"],
        "postgres": [
            "DROP TABLE search_docs",
            "DROP FUNCTION search_tsvector(text, text, text)",
            "DROP FUNCTION search_fold(text)",
        ],
    },
    2: {
        "sqlite": ["DROP TABLE dbx_entries", "DROP TABLE dbx_stores"],
        "postgres": ["DROP TABLE dbx_entries", "DROP TABLE dbx_stores"],
    },
}


def back_to_step(step: int, backend: str) -> Callable[[Any], None]:
    """A write transaction (``SqlStorage._write``) that undoes every migration after ``step``."""

    def undo(tx: Any) -> None:
        for newer in sorted(_UNDO, reverse=True):
            if newer > step:
                for statement in _UNDO[newer][backend]:
                    tx.execute(statement)
        tx.execute("DELETE FROM schema_version WHERE version > ?", (step,))

    return undo
