"""``FakeStore``: an in-memory ``memfs.contract.store_api.StoreAPI`` with faults a test can script.

A test double behind the store-API seam (never a mock of our own components): it keeps memories
and their versions the way the reference server does (``memfs.server.memory_stores.sql``), and
raises the
errors the real client raises:
- ids ``mem_fake_N`` / ``memver_fake_N``, ``content_sha256`` by
  ``memfs.contract.models.sha256_hex``,
  created/updated times strictly increasing, one version per change (``recent_changes``,
  ``list_versions``, ``get_version``);
- ``create`` on a taken path: ``PathConflictError`` naming the memory that holds it (the body
  the real client parses; ``names_conflicts=False``: an API that does not say); a store
  holding ``max_memories``: ``StoreFullError``;
- ``update``/``delete`` with an ``expected_sha256`` that is not the stored one:
  ``PreconditionFailedError``; an update asking for what the memory already is succeeds
  without a new version (so a retried or replayed update is not a conflict);
- content over ``max_content_bytes``: ``RequestTooLargeError``;
- with ``Capabilities(descriptions=True)`` each memory has a ``description`` (``""`` unless
  given), set by ``create``/``update`` and kept by a move; without, a description asked for
  fails the test;
- a gone store (``delete_store``): every call raises ``NotFoundError``, ``store_exists`` is False.

Faults, one call of one operation (``"create"``, ``"update"``, ...) at a time, in order:
``fail_next`` raises a transient error *before* the call is applied (server unreachable, 503);
``lose_answer`` applies the call, then raises a transient error (the reply was lost: what the
client raises when its own retries ran out); ``before_next`` runs a hook first, for a change
made "elsewhere" (by another writer) between two calls. ``seed``, ``edit`` and ``remove`` are
such changes: they touch no counter and meet no fault. ``hold_next`` makes the next call of an
operation wait for the test (another operation runs in its middle).

Every call is an ``await`` point (like a request), and each one ends by waking ``wait_calls``,
so a test waits for the store to have been asked instead of sleeping.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import AsyncIterable, AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import trio

from memfs.contract.errors import (
    ApiConnectionError,
    InternalServerError,
    NotFoundError,
    PathConflictError,
    PreconditionFailedError,
    RequestTooLargeError,
    StoreFullError,
)
from memfs.contract.models import (
    Actor,
    ListItem,
    Memory,
    MemoryPrefix,
    MemoryVersion,
    Page,
    sha256_hex,
)
from memfs.contract.store_api import Capabilities, ChangeEvent, SearchResult

T = TypeVar("T")
Hook = Callable[["FakeStore"], None]
ErrorFactory = Callable[[], BaseException]

ACTOR = Actor(type="api_actor", id="apikey_fake")


def unreachable() -> BaseException:
    """The server could not be reached (transient)."""
    return ApiConnectionError("connection refused (fake)")


def unavailable() -> BaseException:
    """A 503 (transient)."""
    return InternalServerError("service unavailable (fake)", status=503)


@dataclass
class _Fault:
    error: ErrorFactory
    applied: bool  # True: the call is applied before the error (a lost answer)


class FakeStore:
    """One memory store in memory; see the module docstring."""

    def __init__(
        self,
        store_id: str = "memstore_fake",
        capabilities: Capabilities | None = None,
        *,
        names_conflicts: bool = True,
    ) -> None:
        self._store_id = store_id
        self._capabilities = capabilities or Capabilities()
        # a path conflict names the memory holding the path (the Memory Stores API does)
        self.names_conflicts = names_conflicts
        self.memories: dict[str, Memory] = {}  # id -> head, content included
        self.versions: list[MemoryVersion] = []  # oldest first, content included
        self.gone = False
        self.calls: Counter[str] = Counter()  # calls per operation, faulted ones included
        self.raised: list[tuple[str, BaseException]] = []  # every error a call raised
        self.writes: list[tuple[str, dict[str, Any]]] = []  # create/update/delete, as asked
        self._faults: dict[str, list[_Fault]] = {}
        self._hooks: dict[str, list[Hook]] = {}
        self._holds: dict[str, trio.Event] = {}
        self._ids = 0
        self._last = datetime(2026, 1, 1, tzinfo=UTC)
        self._progress = trio.Event()

    def __repr__(self) -> str:
        return f"FakeStore({self._store_id}, {len(self.memories)} memories)"

    # -- scripting ---------------------------------------------------------------------------

    def fail_next(self, op: str, times: int = 1, error: ErrorFactory = unreachable) -> None:
        """The next ``times`` calls of ``op`` raise ``error()`` and change nothing."""
        self._faults.setdefault(op, []).extend(_Fault(error, False) for _ in range(times))

    def lose_answer(self, op: str, times: int = 1, error: ErrorFactory = unreachable) -> None:
        """The next ``times`` calls of ``op`` are applied, then raise ``error()``."""
        self._faults.setdefault(op, []).extend(_Fault(error, True) for _ in range(times))

    def heal(self) -> None:
        """Drop the faults not yet met (the server is back)."""
        self._faults.clear()

    def before_next(self, op: str, hook: Hook) -> None:
        """Run ``hook(store)`` once, right before the next call of ``op`` is applied."""
        self._hooks.setdefault(op, []).append(hook)

    def hold_next(self, op: str) -> trio.Event:
        """The next call of ``op`` waits, before it is applied, until the returned event is set:
        another operation runs in its middle (``wait_calls`` sees the call arrive)."""
        gate = trio.Event()
        self._holds[op] = gate
        return gate

    def delete_store(self) -> None:
        """The store is deleted (elsewhere): from now on every call gets a 404."""
        self.gone = True

    async def wait_calls(self, op: str, count: int) -> None:
        """Return once ``op`` has been called ``count`` times (answered or failed)."""
        while self.calls[op] < count:
            await self._progress.wait()

    # -- changes made elsewhere (no counter, no fault) -----------------------------------------

    def seed(self, path: str, content: str) -> Memory:
        """Another writer creates ``path``."""
        return self._create(path, content)

    def edit(
        self,
        memory_id: str,
        content: str | None = None,
        path: str | None = None,
        description: str | None = None,
    ) -> Memory:
        """Another writer changes a memory."""
        return self._update(memory_id, content, path, None, description)

    def remove(self, memory_id: str) -> None:
        """Another writer deletes a memory."""
        self._delete(memory_id, None)

    def at(self, path: str) -> Memory | None:
        """The memory at ``path`` (content included), or None."""
        return next((m for m in self.memories.values() if m.path == path), None)

    def head(self, path: str) -> Memory:
        """The memory at ``path`` (content included); there must be one."""
        memory = self.at(path)
        assert memory is not None, f"no memory at {path}"
        return memory

    def contents(self) -> dict[str, str]:
        """Every memory's content by path."""
        return {m.path: m.content or "" for m in self.memories.values()}

    # -- StoreAPI: identity --------------------------------------------------------------------

    @property
    def store_id(self) -> str:
        return self._store_id

    @property
    def capabilities(self) -> Capabilities:
        return self._capabilities

    # -- StoreAPI: reading -----------------------------------------------------------------------

    async def list_directory_page(
        self,
        prefix: str | None,
        *,
        with_content: bool = False,
        cursor: str | None = None,
        limit: int = 100,
    ) -> Page[ListItem]:
        def apply() -> Page[ListItem]:
            base = prefix or "/"
            items: list[ListItem] = []
            for memory in self._below(base):
                rest = memory.path[len(base) :]
                if "/" in rest:
                    directory = MemoryPrefix(base + rest.split("/", 1)[0] + "/")
                    if directory not in items:
                        items.append(directory)
                else:
                    items.append(memory if with_content else _basic(memory))
            start = int(cursor or 0)
            more = start + limit < len(items)
            return Page(items[start : start + limit], str(start + limit) if more else None)

        return await self._call("list_directory_page", apply)

    async def list_subtree_page(
        self, prefix: str | None, *, cursor: str | None = None, limit: int = 20
    ) -> Page[Memory]:
        def apply() -> Page[Memory]:
            items = self._below(prefix or "/")
            start = int(cursor or 0)
            more = start + limit < len(items)
            return Page(items[start : start + limit], str(start + limit) if more else None)

        return await self._call("list_subtree_page", apply)

    async def list_below(self, prefix: str | None) -> AsyncIterator[Memory]:
        found = await self._call("list_below", lambda: list(self._below(prefix or "/")))
        for memory in found:
            yield _basic(memory)

    async def find(self, path: str) -> Memory | None:
        def apply() -> Memory | None:
            memory = self.at(path)
            return _basic(memory) if memory is not None else None

        return await self._call("find", apply)

    async def read(self, memory_id: str, *, with_content: bool = True) -> Memory:
        def apply() -> Memory:
            memory = self._memory(memory_id)
            return memory if with_content else _basic(memory)

        return await self._call("read", apply)

    async def store_exists(self) -> bool:
        return await self._call("store_exists", lambda: not self.gone, of_store=False)

    # -- StoreAPI: writing -------------------------------------------------------------------

    async def create(self, path: str, content: str, *, description: str | None = None) -> Memory:
        asked = {"path": path, "content": content}
        if description is not None:
            asked["description"] = description
        self.writes.append(("create", asked))
        return await self._call("create", lambda: self._create(path, content, description))

    async def update(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        path: str | None = None,
        expected_sha256: str | None = None,
        description: str | None = None,
    ) -> Memory:
        assert path is None or self._capabilities.rename_keeps_identity, "a move the API lacks"
        asked = {"content": content, "path": path, "expected_sha256": expected_sha256}
        if description is not None:
            asked["description"] = description
        self.writes.append(("update", {"memory_id": memory_id, **asked}))
        return await self._call(
            "update", lambda: self._update(memory_id, content, path, expected_sha256, description)
        )

    async def delete(self, memory_id: str, *, expected_sha256: str | None = None) -> None:
        self.writes.append(("delete", {"memory_id": memory_id, "expected_sha256": expected_sha256}))
        await self._call("delete", lambda: self._delete(memory_id, expected_sha256))

    # -- StoreAPI: changes and history -----------------------------------------------------------

    async def recent_changes(self, *, since: datetime | None, limit: int) -> Page[MemoryVersion]:
        def apply() -> Page[MemoryVersion]:
            newest = [_basic_version(v) for v in reversed(self.versions)]
            if since is not None:
                newest = [v for v in newest if v.created_at >= since]
            return Page(newest[:limit], None)

        return await self._call("recent_changes", apply)

    async def offers_change_stream(self) -> bool:
        return False

    def change_stream(self) -> AbstractAsyncContextManager[AsyncIterable[ChangeEvent]]:
        @asynccontextmanager
        async def refused() -> AsyncIterator[AsyncIterable[ChangeEvent]]:
            raise NotImplementedError("the fake store pushes no changes")
            yield  # pragma: no cover

        return refused()

    async def offers_search(self) -> bool:
        return False  # the hosted API's answer: a mount searches its own copy

    async def search(
        self, query: str, *, limit: int = 10, path_prefix: str | None = None
    ) -> list[SearchResult]:
        raise AssertionError("searched a store that does not offer search")

    async def list_versions(
        self, *, memory_id: str | None = None, since: datetime | None = None
    ) -> AsyncIterator[MemoryVersion]:
        assert self._capabilities.versions, "versions listed from an API without them"

        def apply() -> list[MemoryVersion]:
            return [
                _basic_version(v)
                for v in reversed(self.versions)
                if (memory_id is None or v.memory_id == memory_id)
                and (since is None or v.created_at >= since)
            ]

        for version in await self._call("list_versions", apply):
            yield version

    async def get_version(self, version_id: str) -> MemoryVersion:
        def apply() -> MemoryVersion:
            for version in self.versions:
                if version.id == version_id:
                    return version
            raise NotFoundError(f"memory version {version_id!r} not found")

        return await self._call("get_version", apply)

    def request_counts(self) -> dict[str, Any]:
        return dict(self.calls)

    # -- the store's rules -----------------------------------------------------------------------

    async def _call(self, op: str, apply: Callable[[], T], *, of_store: bool = True) -> T:
        """Run one request: hooks, then its fault (if any), then ``apply``. ``of_store``: a
        request about something in the store (a gone store answers it with a 404)."""
        await trio.lowlevel.checkpoint()  # a request is an await point
        self.calls[op] += 1
        gate = self._holds.pop(op, None)
        if gate is not None:
            self._woken()
            await gate.wait()
        try:
            for hook in self._hooks.pop(op, []):
                hook(self)
            queue = self._faults.get(op)
            fault = queue.pop(0) if queue else None
            if fault is not None and not fault.applied:
                raise fault.error()
            if self.gone and of_store:
                raise NotFoundError(f"memory store {self._store_id!r} not found")
            result = apply()
            if fault is not None:
                raise fault.error()
            return result
        except Exception as exc:
            self.raised.append((op, exc))
            raise
        finally:
            self._woken()

    def _woken(self) -> None:
        """Wake ``wait_calls``."""
        self._progress.set()
        self._progress = trio.Event()

    def _now(self) -> datetime:
        now = max(datetime.now(UTC), self._last + timedelta(microseconds=1))
        self._last = now
        return now

    def _new_id(self, kind: str) -> str:
        self._ids += 1
        return f"{kind}_fake_{self._ids}"

    def _memory(self, memory_id: str) -> Memory:
        if not isinstance(memory_id, str):  # the real client quotes it into a URL
            raise TypeError(f"quote() doesn't support {type(memory_id).__name__!r} objects")
        memory = self.memories.get(memory_id)
        if memory is None:
            raise NotFoundError(f"memory {memory_id!r} not found in store {self._store_id!r}")
        return memory

    def _below(self, prefix: str) -> list[Memory]:
        return sorted(
            (m for m in self.memories.values() if m.path.startswith(prefix)),
            key=lambda m: m.path,
        )

    def _check_path_free(self, path: str) -> None:
        holder = self.at(path)
        if holder is not None:
            named = {"conflicting_memory_id": holder.id, "conflicting_path": path}
            raise PathConflictError(
                f"a memory already exists at path {path!r}",
                body={"error": named} if self.names_conflicts else {},
            )

    def _check_content(self, content: str) -> None:
        size = len(content.encode("utf-8"))
        if size > self._capabilities.max_content_bytes:
            raise RequestTooLargeError(f"content: {size} bytes is more than the maximum")

    def _version(self, memory: Memory, operation: str) -> None:
        self.versions.append(
            MemoryVersion(
                id=memory.memory_version_id,
                memory_id=memory.id,
                memory_store_id=self._store_id,
                operation=operation,  # type: ignore[arg-type]
                created_at=memory.updated_at,
                path=memory.path,
                content_sha256=None if operation == "deleted" else memory.content_sha256,
                content_size_bytes=None if operation == "deleted" else memory.content_size_bytes,
                created_by=ACTOR,
                content=None if operation == "deleted" else memory.content,
            )
        )

    def _create(self, path: str, content: str, description: str | None = None) -> Memory:
        assert description is None or self._capabilities.descriptions, "a description unkept"
        self._check_content(content)
        self._check_path_free(path)
        limit = self._capabilities.max_memories
        if limit is not None and len(self.memories) >= limit:
            raise StoreFullError(f"Memory store is full: it already holds {limit} memories")
        now = self._now()
        memory = Memory(
            id=self._new_id("mem"),
            memory_store_id=self._store_id,
            path=path,
            content_sha256=sha256_hex(content),
            content_size_bytes=len(content.encode("utf-8")),
            memory_version_id=self._new_id("memver"),
            created_at=now,
            updated_at=now,
            content=content,
            description=(description or "") if self._capabilities.descriptions else None,
        )
        self.memories[memory.id] = memory
        self._version(memory, "created")
        return memory

    def _update(
        self,
        memory_id: str,
        content: str | None,
        path: str | None,
        expected: str | None,
        description: str | None = None,
    ) -> Memory:
        assert expected is None or self._capabilities.preconditions, "a precondition unsupported"
        assert description is None or self._capabilities.descriptions, "a description unkept"
        if content is not None:
            self._check_content(content)
        current = self._memory(memory_id)
        new_content = current.content if content is None else content
        new_path = current.path if path is None else path
        new_description = current.description if description is None else description
        unchanged = (new_content, new_path, new_description) == (
            current.content,
            current.path,
            current.description,
        )
        if unchanged:  # already as requested: success, no version (precondition or not)
            return current
        if expected is not None and expected != current.content_sha256:
            raise _precondition_failed(current, expected)
        if new_path != current.path:
            self._check_path_free(new_path)
        text = new_content or ""
        memory = dataclasses.replace(
            current,
            path=new_path,
            content=text,
            description=new_description,
            content_sha256=sha256_hex(text),
            content_size_bytes=len(text.encode("utf-8")),
            memory_version_id=self._new_id("memver"),
            updated_at=self._now(),
        )
        self.memories[memory_id] = memory
        self._version(memory, "modified")
        return memory

    def _delete(self, memory_id: str, expected: str | None) -> None:
        assert expected is None or self._capabilities.preconditions, "a precondition unsupported"
        current = self._memory(memory_id)
        if expected is not None and expected != current.content_sha256:
            raise _precondition_failed(current, expected, "; nothing was deleted")
        del self.memories[memory_id]
        gone = dataclasses.replace(
            current, memory_version_id=self._new_id("memver"), updated_at=self._now()
        )
        self._version(gone, "deleted")


def _precondition_failed(current: Memory, expected: str, tail: str = "") -> Exception:
    return PreconditionFailedError(
        f"precondition failed: memory {current.id!r} has content_sha256 "
        f"{current.content_sha256}, not {expected}{tail}"
    )


def _basic(memory: Memory) -> Memory:
    return dataclasses.replace(memory, content=None)


def _basic_version(version: MemoryVersion) -> MemoryVersion:
    return dataclasses.replace(version, content=None)
