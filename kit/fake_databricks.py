"""``FakeDatabricks``: the entry endpoints of Databricks Agent Memory, in memory.

A test double of the remote API (never of our own components), with the methods of
``memfs.api.databricks.client.DatabricksClient`` that ``DatabricksStore`` calls, so the real
adapter runs FUSE-free under the core. It keeps the contract's rules
(``docs/databricks-agent-memory.md``): entries keyed by (actor, session or none, path), an
exclusive create (``PathConflictError``, as the client maps ``ALREADY_EXISTS``), the list
filters (``path``: every session of that path; else ``session_id``: that session only; else
the whole actor), BASIC views without content, ``update_time`` bumped by every PATCH, no
preconditions, no rename. ``calls`` counts requests by operation; ``before_next`` runs a hook
right before the next call of an operation (another writer between two requests);
``edit`` is such a writer.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import trio

from memfs.api.databricks.client import VIEW_BASIC, Entry
from memfs.contract.errors import NotFoundError, PathConflictError

Hook = Callable[["FakeDatabricks"], None]


class _Stats:
    def __init__(self, calls: Counter[str]) -> None:
        self._calls = calls

    def snapshot(self) -> dict[str, Any]:
        return dict(self._calls)


class FakeDatabricks:
    """One Databricks store's entries; see the module docstring."""

    def __init__(self, store_id: str = "fake-store") -> None:
        self.store_id = store_id
        self.entries: dict[str, Entry] = {}
        self.calls: Counter[str] = Counter()
        self.stats = _Stats(self.calls)
        self._hooks: dict[str, list[Hook]] = {}
        self._ids = 0
        self._last = datetime(2026, 1, 1, tzinfo=UTC)

    # -- scripting ---------------------------------------------------------------------------

    def before_next(self, op: str, hook: Hook) -> None:
        self._hooks.setdefault(op, []).append(hook)

    def put(
        self,
        actor: str,
        path: str,
        content: str,
        *,
        session: str | None = None,
        description: str = "",
    ) -> Entry:
        """Another writer creates an entry."""
        return self._create(actor, session, path, content, description)

    def edit(
        self, entry_id: str, content: str | None = None, description: str | None = None
    ) -> Entry:
        """Another writer PATCHes an entry."""
        return self._update(entry_id, content, description)

    def at(self, actor: str, path: str, session: str | None = None) -> Entry | None:
        for entry in self.entries.values():
            if (entry.actor_id, entry.session_id, entry.path) == (actor, session, path):
                return entry
        return None

    # -- the client's methods ----------------------------------------------------------------

    async def _call(self, op: str) -> None:
        await trio.lowlevel.checkpoint()
        self.calls[op] += 1
        for hook in self._hooks.pop(op, []):
            hook(self)

    async def capabilities(self) -> dict[str, Any]:
        """A Databricks workspace has no memfs capabilities: a 404."""
        await self._call("capabilities")
        raise NotFoundError("no /v1/memfs/capabilities on a Databricks workspace")

    async def get_store(self, store_id: str) -> dict[str, Any]:
        await self._call("get_store")
        if store_id != self.store_id:
            raise NotFoundError(f"memory store {store_id!r} not found")
        return {"name": f"memory-stores/{store_id}"}

    async def list_entries(
        self,
        store_id: str,
        actor_id: str,
        *,
        session_id: str | None = None,
        path: str | None = None,
        path_prefix: str | None = None,
        view: str = "",
    ) -> AsyncIterator[Entry]:
        await self._call("list_entries")
        found = []
        for entry in sorted(self.entries.values(), key=lambda e: e.path):
            if entry.actor_id != actor_id:
                continue
            if path is not None:
                if entry.path != path:
                    continue
            elif session_id is not None and entry.session_id != session_id:
                continue
            if path_prefix is not None and not entry.path.startswith(path_prefix):
                continue
            found.append(dataclasses.replace(entry, content=None) if view == VIEW_BASIC else entry)
        for entry in found:
            yield entry

    async def get_entry(self, store_id: str, entry_id: str, *, view: str = "") -> Entry:
        await self._call("get_entry")
        return self._entry(entry_id)

    async def create_entry(
        self,
        store_id: str,
        actor_id: str,
        session_id: str | None,
        path: str,
        content: str,
        description: str | None = None,
    ) -> Entry:
        await self._call("create_entry")
        return self._create(actor_id, session_id, path, content, description or "")

    async def update_entry(
        self,
        store_id: str,
        entry_id: str,
        *,
        content: str | None = None,
        description: str | None = None,
    ) -> Entry:
        await self._call("update_entry")
        return self._update(entry_id, content, description)

    async def delete_entry(self, store_id: str, entry_id: str) -> None:
        await self._call("delete_entry")
        self._entry(entry_id)
        del self.entries[entry_id]

    # -- the store's rules ---------------------------------------------------------------------

    def _now(self) -> datetime:
        self._last = max(datetime.now(UTC), self._last + timedelta(microseconds=1))
        return self._last

    def _entry(self, entry_id: str) -> Entry:
        entry = self.entries.get(entry_id)
        if entry is None:
            raise NotFoundError(f"entry {entry_id!r} not found")
        return entry

    def _create(
        self, actor: str, session: str | None, path: str, content: str, description: str
    ) -> Entry:
        if self.at(actor, path, session) is not None:
            raise PathConflictError(f"an entry exists at {path!r}")
        self._ids += 1
        now = self._now()
        entry = Entry(
            id=f"entry-{self._ids}",
            actor_id=actor,
            session_id=session,
            path=path,
            content=content,
            description=description,
            create_time=now,
            update_time=now,
        )
        self.entries[entry.id] = entry
        return entry

    def _update(self, entry_id: str, content: str | None, description: str | None) -> Entry:
        current = self._entry(entry_id)
        entry = dataclasses.replace(
            current,
            content=current.content if content is None else content,
            description=current.description if description is None else description,
            update_time=self._now(),
        )
        self.entries[entry_id] = entry
        return entry
