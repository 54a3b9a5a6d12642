"""An import's calls on a store: ``plan_import`` (the tree walked, the store listed once, the
two compared by ``memfs.transfer.import_plan``), then ``carry_out``, a few requests at a time.

``CONCURRENCY`` workers take the steps in path order: first the deletes (they make room for the
creates the plan counted on), then the creates and updates. Each write is one request through
the store's ``StoreAPI`` (its client retries transient failures and reconciles lost answers):

- a create never overwrites (a path taken meanwhile is reported);
- an update carries the listed content's hash as its precondition (Memory Stores:
  ``content_sha256``; Databricks: the adapter reads the entry just before the write, as a
  mount does) and a delete too: a memory written by someone else since the listing is
  reported, not overwritten;
- each file is read again just before its upload and must still have the content the plan
  compared (``import_walk.open_file``); one that changed is reported (run the import again).

A step that fails is one ``Outcome`` with the reason; the others go on. Failures that would fail
every step alike (the key refused, the server unreachable after the client's retries, an
archived store) end the import at once: they propagate, and ``Results`` holds what was done
before.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

import trio

from memfs.contract.errors import (
    ApiConnectionError,
    ApiError,
    AuthenticationError,
    BadRequestError,
    NotFoundError,
    PathConflictError,
    PermissionDeniedError,
    PreconditionFailedError,
    RequestTooLargeError,
    StoreArchivedError,
    StoreFullError,
)
from memfs.contract.store_api import StoreAPI
from memfs.transfer.import_plan import Plan, Step, make_plan
from memfs.transfer.import_walk import Limits, UnreadableError, open_file, read_tree

log = logging.getLogger(__name__)

CONCURRENCY = 8  # requests in flight, never more: the hosted API's limits are per organization

# Errors every other request would meet too: the import stops.
FATAL = (AuthenticationError, PermissionDeniedError, ApiConnectionError, StoreArchivedError)


@dataclass(frozen=True)
class Outcome:
    """What became of a step: ``done``, or not with the reason."""

    step: Step
    done: bool
    reason: str = ""


@dataclass
class Results:
    """Outcomes as they come (any order), and how many steps there are to carry out."""

    total: int = 0
    outcomes: list[Outcome] = field(default_factory=list)

    def sorted(self) -> list[Outcome]:
        return sorted(self.outcomes, key=lambda o: o.step.path)


Progress = Callable[[int, int], None]  # (steps finished, steps to carry out)


def limits_of(store: StoreAPI) -> Limits:
    """What ``store`` accepts in a content (its capabilities)."""
    capabilities = store.capabilities
    return Limits(capabilities.max_content_bytes, capabilities.refused_characters)


async def plan_import(store: StoreAPI, root_fd: int, *, delete: bool = False) -> Plan:
    """Walk the tree open as ``root_fd`` (in a thread: it reads every file), then list the store
    (one pass, without contents: the listing nearest the writes), and compare them."""
    tree = await trio.to_thread.run_sync(read_tree, root_fd, limits_of(store))
    listed = [memory async for memory in store.list_below(None)]
    return make_plan(tree, listed, store.capabilities, delete=delete)


async def carry_out(
    store: StoreAPI,
    plan: Plan,
    root_fd: int,
    results: Results,
    *,
    concurrency: int = CONCURRENCY,
    progress: Progress | None = None,
) -> None:
    """Make the plan's deletes, then its creates and updates, into ``results``."""
    deletes = [step for step in plan.steps if step.action == "delete"]
    writes = [step for step in plan.steps if step.action in ("create", "update")]
    results.total = len(deletes) + len(writes)
    limits = limits_of(store)

    async def one(step: Step) -> None:
        try:
            await _apply(store, step, root_fd, limits)
            outcome = Outcome(step, True)
        except FATAL:
            raise
        except UnreadableError as exc:
            outcome = Outcome(step, False, str(exc))
        except ApiError as exc:
            outcome = _failed(step, exc)
        results.outcomes.append(outcome)
        if progress is not None:
            progress(len(results.outcomes), results.total)

    for batch in (deletes, writes):
        await _bounded(batch, one, concurrency)


async def _bounded(
    steps: list[Step], one: Callable[[Step], Awaitable[None]], concurrency: int
) -> None:
    """``one(step)`` for every step, ``concurrency`` at a time, in path order."""
    queue: Iterator[Step] = iter(steps)

    async def worker() -> None:
        for step in queue:  # one iterator shared by the workers: each step taken once
            await one(step)

    try:
        async with trio.open_nursery() as nursery:
            for _ in range(min(concurrency, len(steps))):
                nursery.start_soon(worker)
    except BaseExceptionGroup as group:
        # a fatal error of one worker cancelled the others: it alone is the import's error
        fatal = group.subgroup(lambda exc: isinstance(exc, FATAL))
        if fatal is None:
            raise
        raise _first(fatal) from None


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first(first) if isinstance(first, BaseExceptionGroup) else first


async def _apply(store: StoreAPI, step: Step, root_fd: int, limits: Limits) -> None:
    if step.action == "delete":
        assert step.memory is not None
        with contextlib.suppress(NotFoundError):  # deleted elsewhere meanwhile: gone all the same
            await store.delete(step.memory.id, expected_sha256=step.memory.content_sha256)
        return
    assert step.file is not None
    memory = step.memory
    if memory is not None and memory.content_sha256 == step.file.sha256:
        content = None  # the description alone changes
    else:
        # read on the loop, not in a worker thread: a file of at most the store's limit reads in
        # microseconds from a local disk, where a thread hop per file costs more than the read
        # (python -m bench import_tree)
        data = open_file(root_fd, step.file.relative, limits, step.file.sha256)
        content = data.decode("utf-8")
    if memory is None:
        assert content is not None
        await store.create(step.path, content, description=step.description)
        return
    await store.update(
        memory.id,
        content=content,
        expected_sha256=memory.content_sha256,
        description=step.description,
    )


def _failed(step: Step, exc: ApiError) -> Outcome:
    """A step the store refused, with the reason in a few words (never the content)."""
    if isinstance(exc, PreconditionFailedError):
        reason = "changed in the store since it was listed: not overwritten"
    elif isinstance(exc, PathConflictError):
        reason = "created in the store meanwhile: not overwritten"
    elif isinstance(exc, NotFoundError):
        reason = "deleted from the store meanwhile: not written again"
    elif isinstance(exc, StoreFullError):
        reason = "the store is full"
    elif isinstance(exc, RequestTooLargeError):
        reason = "too large for the server"
    elif isinstance(exc, BadRequestError):
        reason = f"refused by the server: {exc.message}"
    else:
        reason = f"failed: {exc.status} {exc.error_type}: {exc.message}"
    return Outcome(step, False, " ".join(reason.split()))
